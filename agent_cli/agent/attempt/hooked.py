"""The user's hooks at the loop's points: around each tool call, after a verified task, at the end.

Each point asks `core.protocols.Hooks` (None: no hooks configured, and nothing is done) and
emits what every hook did. A `pre_tool` hook that blocks keeps the tool from running and its
reason becomes the tool's result for the model; a `task_verified` hook that blocks turns the
passing verdict into a failed one, so the attempt counts and the task is retried or escalated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agent_cli.agent.attempt.toolbox import ToolResult
from agent_cli.core import events
from agent_cli.core.errors import EXIT_INTERRUPTED
from agent_cli.core.models import ToolCall, Verdict
from agent_cli.core.protocols import Hooks, HookStopped, HookTask

if TYPE_CHECKING:
    from agent_cli.agent.attempt.runtime import Runtime


def _first_block(ran: Sequence[events.HookRan], emit: events.Emit) -> events.HookRan | None:
    """Emit each hook's event; the one that blocked, if any."""
    for ev in ran:
        emit(ev)
    return next((ev for ev in ran if ev.blocks), None)


def _asked(ask: Callable[[], Sequence[events.HookRan]], emit: events.Emit) -> events.HookRan | None:
    """Run the hooks `ask` runs and emit what each did; the one that blocked, if any. When
    Ctrl-C stops one of them, what they did is emitted, the stopped one's included, and the
    run stops as on any Ctrl-C."""
    try:
        ran = ask()
    except HookStopped as e:
        _first_block(e.ran, emit)
        raise
    return _first_block(ran, emit)


def _at(rt: Runtime, index: int) -> HookTask:
    return HookTask(run_id=rt.run_id, goal=rt.state.plan[index].goal, index=index)


def refused(rt: Runtime, index: int, call: ToolCall) -> ToolResult | None:
    """The `pre_tool` hooks of `call`: the tool's result when one of them blocks it, else None
    (the tool may run)."""
    if rt.hooks is None:
        return None
    hooks = rt.hooks
    block = _asked(lambda: hooks.before_tool(_at(rt, index), call.name, call.arguments), rt.emit)
    if block is None:
        return None
    return ToolResult(
        call.name,
        f"the tool did not run: a pre_tool hook refused it ({block.command}):\n{block.message}",
        ok=False,
        summary="blocked by a pre_tool hook",
    )


def ran(rt: Runtime, index: int, call: ToolCall, result: ToolResult) -> None:
    """The `post_tool` hooks of a tool that ran, given its result; called once the result is
    out (its `tool_result` event first, then what the hooks did)."""
    if rt.hooks is None:
        return
    hooks = rt.hooks
    shown = {"ok": result.ok, "text": result.text, "summary": result.summary}
    _asked(lambda: hooks.after_tool(_at(rt, index), call.name, call.arguments, shown), rt.emit)


def task_verified(rt: Runtime, index: int, verdict: Verdict) -> Verdict:
    """`verdict` of a task about to be committed, or a failed one when a hook refused it."""
    if rt.hooks is None or not verdict.passed:
        return verdict
    hooks = rt.hooks
    block = _asked(lambda: hooks.task_verified(_at(rt, index), verdict.model_dump()), rt.emit)
    if block is None:
        return verdict
    return Verdict(
        passed=False,
        judge="hook",
        command=verdict.command,
        exit_code=verdict.exit_code,  # what the command exited with; the hook's is in the reason
        reason=f"the harness's check passed, but a task_verified hook refused the task "
        f"({block.command}): {block.message}",
    )


def run_end(hooks: Hooks | None, emit: events.Emit, done: events.RunDone) -> None:
    """The `run_end` hooks, given the run's outcome (what `run_done` says). Ctrl-C stops the
    hook at work; the hooks after it still run unless Ctrl-C comes again (for a run that was
    interrupted, this one was the second), and the run ends with its own `run_done` either way:
    a run that finished stays finished."""
    if hooks is None:
        return
    wait = hooks.longest("run_end")
    again = done.exit_code == EXIT_INTERRUPTED  # the run was stopped: Ctrl-C now is the second
    if again and wait > 0:
        # the user asked to stop: say why the run does not yet, and how to stop it at once
        emit(
            events.Notice(
                text=f"interrupted: running the run_end hooks first (at most {wait:g}s); "
                "Ctrl-C again stops them"
            )
        )
    at, outcome = HookTask(run_id=done.run_id), done.model_dump(exclude={"event"})
    after = 0
    try:
        while True:
            try:
                _first_block(hooks.run_end(at, outcome, after), emit)
                return
            except HookStopped as e:
                _first_block(e.ran, emit)
                if again or not e.left:
                    return
                again, after = True, after + len(e.ran)
                emit(
                    events.Notice(
                        text=f"Ctrl-C stopped a run_end hook; the run ends once the ones after "
                        f"it have run ({e.left}, at most {e.left_s:g}s); Ctrl-C again stops them"
                    )
                )
    except KeyboardInterrupt:  # again, or between two hooks: the hooks left do not run
        return
