"""One attempt at one task: ask the model, run its tool calls, until `finish` or the step budget.

Each request is rebuilt from the run's state rather than grown as a transcript, through
`agent.request.Request`: the system prompt, the fenced recalled memory, the attempt's brief (the
task, its check, the hints, the plan and the last failure), the pinned notes, the assembled
working memory, the previous tool exchange in full up to a cap, the step's own line (which task
and attempt, the tool calls left), the goal last.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request, brief
from agent_cli.agent.ask.window import after_overflow, replaced, send, stub_arguments
from agent_cli.agent.attempt import hooked, loopguard, pins
from agent_cli.agent.attempt.freshness import after_tool, stub
from agent_cli.agent.attempt.runtime import Limits, Runtime, check_budgets
from agent_cli.agent.attempt.toolbox import READ_ONLY, TOOLS, Toolbox, ToolResult, fenced
from agent_cli.agent.run.journal import MemoryAdd, StepRecord
from agent_cli.core import events, fences, tokens
from agent_cli.core.errors import AgentError, ContextOverflow, MalformedReply
from agent_cli.core.messages import AssistantMessage, Message, ToolMessage
from agent_cli.core.models import ChatReply, ToolCall, Usage
from agent_cli.core.redact import redact
from agent_cli.core.text import shorten
from agent_cli.memory.working.store import Item

MAX_MALFORMED_IN_A_ROW = 10
NOW_GOAL_CHARS = 120  # the task's goal, named again in each step's last message
NAME_MAX = 64  # the longest function name OpenAI accepts; a longer one names no tool here


@dataclass(frozen=True)
class Finished:
    """The model called finish: its summary, for the verifier."""

    summary: str
    steps: int
    finished: ClassVar[bool] = True
    reason: ClassVar[str] = ""


@dataclass(frozen=True)
class Stopped:
    """The attempt ended without finish: why (its step budget, a loop)."""

    reason: str
    steps: int
    finished: ClassVar[bool] = False
    summary: ClassVar[str] = ""


AttemptOutcome = Finished | Stopped


@dataclass(frozen=True)
class RunAgain:
    """The step is over and the attempt goes on, with this exchange shown next."""

    last: Exchange
    steps: int


StepOutcome = RunAgain | Finished | Stopped


@dataclass
class Exchange:
    """The previous reply's tool calls and their results, shown in full to the next request."""

    calls: list[ToolCall] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    items: list[str | None] = field(default_factory=list)  # the working-memory item of each result
    ok: list[bool] = field(default_factory=list)  # whether each call did what it was asked
    nudge: str = ""


def task_block(rt: Runtime, index: int, attempt: int) -> str:
    """What the attempt is for: the task, its check, the plan's criteria, which attempt."""
    task = rt.state.plan[index]
    criteria = rt.state.success_criteria.strip()
    return (
        f"{_which(rt, index, attempt, 'CURRENT TASK ({n} of {total}), attempt {a} of {most}')}:\n"
        f"{task.goal}\nAcceptance: {task.acceptance or '-'}\n"
        f"Acceptance command (run by the harness after finish): "
        f"{task.acceptance_cmd or 'none'}\n"
        f"Success criteria of the whole plan: {criteria or '-'}"
    )


def now_line(rt: Runtime, index: int, attempt: int, steps_left: int) -> str:
    """The step's own line: which task and attempt (named again, in short), the calls left."""
    goal = shorten(rt.state.plan[index].goal, NOW_GOAL_CHARS)
    which = _which(rt, index, attempt, "NOW: task {n} of {total}, attempt {a} of {most}")
    return (
        f"{which}: {goal} (the task, its check and the plan are under CURRENT TASK above)\n"
        f"Tool calls left in this attempt: {steps_left}"
    )


def _which(rt: Runtime, index: int, attempt: int, form: str) -> str:
    task = rt.state.plan[index]
    most = max(task.max_attempts, attempt)
    return form.format(n=index + 1, total=len(rt.state.plan), a=attempt, most=most)


def hint_blocks(hints: list[str]) -> str:
    """The human's hints for the task, each in its own <human_hint> block, the latest last."""
    if not hints:
        return ""
    return (
        "The human you work for read the failure and answered (their own words, to follow):\n"
        + "\n".join(fences.human_hint(h) for h in hints)
    )


def build_messages(
    rt: Runtime, index: int, attempt: int, steps_left: int, last: Exchange
) -> list[dict[str, Any]]:
    """The request for the next step, assembled by `Request` (stable parts first, goal last).

    What holds for the whole attempt (the task, its check, the hints, the plan, the last
    failure) is its brief, before the pinned notes; the last message carries only what
    changes from step to step, so a prompt cache reads all but the newest call, its result
    and a few lines from the request before."""
    now = now_line(rt, index, attempt, steps_left)
    if last.nudge:
        now = f"NOTE: {last.nudge}\n\n{now}"
    unpin = pins.before_request(rt)
    if unpin:
        now = f"{unpin}\n\n{now}"
    context = rt.memory.assemble()
    others = context.tokens - tokens.count(context.memory)  # the pinned notes and the join
    results = [item for item in last.items if item]  # left out, each is sent whole below

    def memory_within(size: int) -> str:
        return rt.memory.assemble(max_tokens=others + size, keep=results).memory

    task = task_block(rt, index, attempt)
    return Request(
        system=prompts.load("system"),
        goal=rt.state.goal,
        instructions=instructions_block(rt),
        recalled="\n".join(p for p in (rt.recalled, rt.fixes) if p),
        brief=brief(task, hint_blocks(rt.state.plan[index].hints), rt.state.render_progress()),
        pinned=context.pinned,
        memory=context.memory,
        memory_within=memory_within,
        # Request takes the wire's plain dicts; these are typed where they are made.
        exchange=cast("list[dict[str, Any]]", exchange_messages(last)),
        in_memory=results_in_memory(rt, last),
        seen=results_seen(rt, last),
        task=now,
    ).fitted(offered(rt), rt.limits.window())


def offered(rt: Runtime) -> list[dict[str, Any]]:
    """The tools of a task's conversation: the toolbox's, or the built-ins before there is one."""
    toolbox: Toolbox | None = rt.toolbox
    return TOOLS if toolbox is None else toolbox.specs()


def instructions_block(rt: Runtime) -> str:
    """The repository's instruction files, with the nearest AGENTS.md of each touched file."""
    if rt.instructions is None:
        return ""
    rt.instructions.touch(rt.toolbox.touched)
    return rt.instructions.render()


def exchange_messages(last: Exchange) -> list[Message]:
    """The previous reply's tool calls and their results, as chat messages; a done edit's old
    text is echoed as its size only (the file holds it no more)."""
    if not last.calls:
        return []
    done = [*last.ok, *[False] * (len(last.calls) - len(last.ok))]
    call: AssistantMessage = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": stub_arguments(
                        c.name,
                        replaced(c.arguments) if c.name == "edit_file" and ok else c.arguments,
                    ),
                },
            }
            for c, ok in zip(last.calls, done, strict=True)
        ],
    }
    results: list[ToolMessage] = [
        {"role": "tool", "tool_call_id": c.id, "content": r}
        for c, r in zip(last.calls, last.results, strict=False)
    ]
    return [call, *results]


def results_in_memory(rt: Runtime, last: Exchange) -> dict[str, str]:
    """Tool call id -> the working-memory item that holds its result in full, as rendered.

    A result the memory block already shows is pointed to rather than sent twice (see
    `Request.messages`): the exchange is the volatile part, the memory block the cached one.
    """
    return {call: item.render() for call, item in _result_items(rt, last) if not item.origin_id}


def results_seen(rt: Runtime, last: Exchange) -> dict[str, int]:
    """Tool call id -> how many times the working-memory item of its result has come, for a
    result identical to an earlier one (merged into it, see `WorkingMemory.add`)."""
    return {call: item.repeats for call, item in _result_items(rt, last) if item.repeats > 1}


def _result_items(rt: Runtime, last: Exchange) -> list[tuple[str, Item]]:
    """(tool call id, the hot item of its result) of each call whose item is hot."""
    pairs = []
    for call, item_id in zip(last.calls, last.items, strict=False):
        item = rt.memory.hot_item(item_id) if item_id else None
        if item is not None:
            pairs.append((call.id, item))
    return pairs


def _ask(rt: Runtime, messages: list[dict[str, Any]], choice: str = "auto") -> ChatReply | None:
    """One model call, logged; None when the reply was not readable at all."""
    try:
        reply = send(
            rt.model, messages, rt.toolbox.specs(), choice, window=rt.limits.window(), log=rt.log
        )
    except MalformedReply as e:
        rt.log({"type": "reply", "error": e.message})
        return None
    rt.log({"type": "reply", "reply": reply.model_dump()})
    return reply


def _ask_fitting(
    rt: Runtime, build: Callable[[], list[dict[str, Any]]], choice: str = "auto"
) -> ChatReply | None:
    """Ask; when the server says the request overflowed its window, shrink it and ask once more."""
    try:
        return _ask(rt, build(), choice)
    except ContextOverflow as e:
        before = rt.limits.context_window
        shrink_window(rt.limits, e)
        rt.emit(
            events.Notice(
                text=f"the request did not fit the server's context window; "
                f"asking once more within {rt.limits.context_window:,} tokens "
                f"(was {before:,})"
            )
        )
    try:
        return _ask(rt, build(), choice)
    except ContextOverflow as e:
        raise ContextOverflow(
            f"{e.message}, even after the request was cut to fit "
            f"{rt.limits.context_window:,} tokens",
            e.hint,
            prompt_tokens=e.prompt_tokens,
            window=e.window,
        ) from None


def shrink_window(limits: Limits, overflow: ContextOverflow) -> None:
    """Lower the window requests are fitted to: the server's, when it said, else by a quarter."""
    window = after_overflow(limits.window(), overflow)
    limits.context_window = window.context_window
    limits.reserved_output_tokens = window.reserved_output_tokens


def bounded(call: ToolCall) -> ToolCall:
    """The call as the harness keeps, shows and echoes it: a name over NAME_MAX cut (such a
    name is no tool's, so the call is a malformed one)."""
    if len(call.name) <= NAME_MAX:
        return call
    return call.model_copy(update={"name": call.name[:NAME_MAX] + "…"})


def _count_malformed(rt: Runtime, malformed: bool) -> None:
    in_a_row = rt.count_reply(malformed)
    if in_a_row >= MAX_MALFORMED_IN_A_ROW:
        raise AgentError(
            f"the model sent {in_a_row} malformed replies in a row",
            "check that the model supports function tools; the state is saved, "
            "continue with `agent run --resume`",
        )


def _record(
    rt: Runtime,
    index: int,
    call: ToolCall,
    result: ToolResult,
    usage: Usage,
    remember: bool = True,
    repeat_of: str | None = None,
) -> tuple[str, str | None, list[str]]:
    """Put a tool result in working memory (unless `remember` is False: a loop notice, which
    stands for a repeated call's result), advance the step, emit and log it.

    `repeat_of` is the item of the call before, when this one repeats it with the same result
    (`loopguard`): a result word for word the same is merged into that item (counted there),
    one the same but for a duration stays that item; either way the next request points to it
    instead of sending the result again.

    Returns the result as the next request shows it, the id of its memory item (or None), and
    the items it superseded (views of files it changed)."""
    rt.state.step += 1
    rt.memory.tick()
    item_id, added, adds = None, None, False
    text, summary = fenced(result), result.memory_summary()
    earlier = rt.memory.hot_item(repeat_of) if repeat_of else None
    if earlier is not None and earlier.text != text:
        item_id = earlier.id  # one copy is kept
    elif remember and result.kind != "note" and not result.finished:
        item_id, adds = rt.memory.add(result.kind, text, summary=summary), True
    gone = after_tool(rt.views, rt.memory, item_id, result, rt.toolbox.blob_of)
    if adds and item_id is not None:
        path, blob = result.path, rt.views.blob(item_id, result.path)
        added = MemoryAdd(kind=result.kind, text=text, summary=summary, path=path, blob=blob)
    rt.emit(
        events.ToolRan(
            index=index,
            step=rt.state.step,
            name=call.name,
            ok=result.ok,
            summary=result.summary,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=rt.spent(),
            diff=(result.diff or result.text) if result.kind == "edit" and result.ok else "",
        )
    )
    rt.log(
        {
            "type": "tool",
            "name": call.name,
            "arguments": call.arguments,
            "ok": result.ok,
            "result": result.text,
        }
    )
    may_change = call.name not in READ_ONLY
    rt.journal(StepRecord(step=rt.state.step, task=index, added=added, may_change=may_change))
    return fenced(capped(result, rt.limits.tool_output_max_tokens)), item_id, gone


def _stub_superseded(shown: Exchange, ran: list[ToolResult], gone: list[str]) -> None:
    """The results of this reply whose items a later call of it superseded (a read, then a
    write of that file) are shown as their stub, as working memory shows them: the next
    request's exchange does not send the file's replaced content either."""
    for at, item_id in enumerate(shown.items):
        if item_id is not None and item_id in gone:
            done = ran[at]
            shown.results[at] = fenced(replace(done, text=stub(done.path, done.kind == "edit")))


def capped(result: ToolResult, max_tokens: int) -> ToolResult:
    """The result with its text cut to `max_tokens` (head and tail kept, the cut said)."""
    if len(result.text.encode("utf-8")) <= max_tokens:
        return result  # a token holds at least one byte: no need to count
    total = tokens.count(result.text)
    if total <= max_tokens:
        return result
    # The tail matters as much as the head: a test run ends with its failures and summary.
    head = tokens.truncate(result.text, max_tokens // 2)
    tail = result.text[len(result.text) - len(result.text) * (max_tokens // 2) // total :]
    note = (
        f"\n[... {total - max_tokens} more tokens cut here; read a range with "
        "start_line/end_line, or narrow the command's output]\n"
    )
    return replace(result, text=head + note + tail)


def _cut_short(result: ToolResult, finish_reason: str | None) -> ToolResult:
    """A malformed call of a reply the server cut at its output limit says so: the model
    sent too much in one call, not broken JSON, and must send less (or it repeats the call)."""
    if not result.malformed or finish_reason != "length":
        return result
    return replace(
        result,
        text=result.text + "\n(your reply was cut at the server's output token limit before "
        "this call's arguments were complete: send less in one call, such as a file in parts "
        "with write_file and then edit_file)",
        summary="cut at the output limit: " + result.summary,
    )


def _no_call(rt: Runtime, index: int, reply: ChatReply | None) -> Exchange:
    """A reply without a tool call costs a step and comes back as a correction."""
    rt.state.step += 1
    rt.memory.tick()
    what = (
        "was not readable"
        if reply is None
        else {
            "no_choices": "had no choices",
            "length": "was cut at the length limit before it made a tool call (keep text short)",
        }.get(reply.finish_reason or "", "had no tool call")
    )
    rt.emit(
        events.ToolRan(
            index=index, step=rt.state.step, name="(none)", ok=False, summary=f"the reply {what}"
        )
    )
    rt.journal(StepRecord(step=rt.state.step, task=index))
    _count_malformed(rt, True)  # after the step is shown and kept: the last one too
    return Exchange(
        nudge=f"your last reply {what}. Every reply must be a tool call; call "
        "finish(summary) when the task is done."
    )


def _guard(
    rt: Runtime, index: int, guard: loopguard.LoopGuard, call: ToolCall, result: ToolResult
) -> tuple[ToolResult, int]:
    """The result the model sees (a notice for a third repeat on), and the repeats in a row."""
    repeats = guard.observe(call.name, call.arguments, result.ok, result.text)
    if repeats < loopguard.WARN_AT:
        return result, repeats
    rt.emit(
        events.LoopDetected(
            index=index, name=call.name, repeats=repeats, stopped=repeats >= loopguard.STOP_AT
        )
    )
    shown = replace(
        result,
        text=loopguard.notice(call.name, repeats),
        ok=False,
        summary=f"{result.summary} (same call and result {repeats} times in a row)",
    )
    return shown, repeats


def run_attempt(rt: Runtime, index: int, attempt: int) -> AttemptOutcome:
    """Carry out one attempt at task `index` until finish or the task's step budget.

    However it ends, the run's branch is where the attempt began: what the model's commands
    committed (a script that runs `git commit`), switched or reset is taken back into the
    work tree as uncommitted changes (`Workspace.take_back`), for the harness to judge and
    commit; only the harness commits."""
    outcome: StepOutcome = RunAgain(Exchange(), 0)
    guard = loopguard.LoopGuard()
    rt.memory.lay_out()  # recalled memory changes here, so the whole context is new anyway
    if rt.workspace is not None:
        rt.workspace.hold_branch()
    try:
        while isinstance(outcome, RunAgain):
            outcome = step(rt, index, attempt, outcome, guard)
    except BaseException:
        with suppress(AgentError):  # what stopped the attempt is what the run reports
            _take_back(rt, index)
        raise
    _take_back(rt, index)
    return outcome


def _take_back(rt: Runtime, index: int) -> None:
    """Take back what the attempt's commands committed, and say so."""
    said = rt.workspace.take_back() if rt.workspace is not None else ""
    if said:
        rt.emit(events.Notice(text=said))
        rt.log({"type": "taken_back", "index": index, "text": said})


def step(
    rt: Runtime, index: int, attempt: int, now: RunAgain, guard: loopguard.LoopGuard
) -> StepOutcome:
    """One request and the tool calls of its reply."""
    last, steps = now.last, now.steps
    check_budgets(rt)
    if steps >= rt.limits.task_max_steps:
        return Stopped(
            f"the attempt used all {rt.limits.task_max_steps} tool calls of its step budget "
            "without calling finish",
            steps,
        )
    left = rt.limits.task_max_steps - steps
    # Every reply must be a tool call: after one that was not, the server is told so too.
    choice = "required" if last.nudge else "auto"
    reply = _ask_fitting(rt, lambda: build_messages(rt, index, attempt, left, last), choice)
    if reply is None or not reply.tool_calls:
        return RunAgain(_no_call(rt, index, reply), steps + 1)
    shown = Exchange()
    made: list[ToolResult] = []  # each call's result, for those a later call supersedes
    for call in map(bounded, reply.tool_calls):
        if steps >= rt.limits.task_max_steps:
            break  # the budget is per call: the rest of this reply is never run
        check_budgets(rt, money=False)  # the reply is paid for: money stops the next request
        steps += 1
        arguments = redact(call.arguments, rt.toolbox.secrets)[:500]
        rt.emit(
            events.ToolCalled(
                index=index, step=rt.state.step + 1, name=call.name, arguments=arguments
            )
        )
        blocked = hooked.refused(rt, index, call)
        raw = blocked or rt.toolbox.execute(call)
        ran = _cut_short(raw, reply.finish_reason)
        result, repeats = _guard(rt, index, guard, call, ran)
        _count_malformed(rt, result.malformed)
        shown.calls.append(call)
        prior = (shown.items or last.items or [None])[-1] if repeats == 2 else None
        shown_text, item_id, gone = _record(
            rt, index, call, result, reply.usage, repeats < loopguard.WARN_AT, prior
        )
        if blocked is None:
            hooked.ran(rt, index, call, raw)
        shown.results.append(shown_text)
        shown.items.append(item_id)
        shown.ok.append(result.ok)
        made.append(result)
        _stub_superseded(shown, made, gone)
        if result.finished:
            return Finished(result.text[:2000], steps)
        if repeats >= loopguard.STOP_AT:
            return Stopped(f"stuck repeating {call.name}", steps)
    return RunAgain(shown, steps)
