"""What a hook's exit means: go on (0), block (2, its stderr the reason), or a notice (anything else).

Only `pre_tool` and `task_verified` hooks can block: at `post_tool` and `run_end` there is
nothing left to refuse, so exit 2 there is a notice like any other failure, and the hooks
after it still run. A `pre_tool` hook that does not answer within its timeout blocks the
tool (fail closed): a guard that hangs must not let the call through; so does one killed by a
signal before it exited (a crash, the OOM killer: it never answered either), and one that
cannot be run at all (its program not found or not executable: exit 127 or 126, the shell's
codes, which a hook that failed to start is also given). At every other point each is a notice.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from agent_cli.core.events import HookRan
from agent_cli.core.redact import redact
from agent_cli.tools.hooks.config import HookEvent, HookSpec
from agent_cli.tools.hooks.process import Finished

BLOCK_EXIT = 2
CANNOT_RUN = (126, 127)  # not executable, not found (process.run_hook gives them too)
BLOCKING: tuple[HookEvent, ...] = ("pre_tool", "task_verified")  # the points a hook can refuse
MESSAGE_MAX = 4000  # characters of a hook's stderr kept as its reason or notice


@dataclass(frozen=True)
class GoOn:
    """The hook exited 0: the run goes on."""


@dataclass(frozen=True)
class Block:
    """The hook refused: the tool does not run, or the verification fails, for `reason`."""

    reason: str
    timed_out: bool = False


@dataclass(frozen=True)
class Warn:
    """The hook failed (another exit, or a timeout where that does not block): a notice."""

    text: str
    timed_out: bool = False


HookOutcome = GoOn | Block | Warn


def decide(
    event: HookEvent, spec: HookSpec, ran: Finished, secrets: tuple[str, ...]
) -> HookOutcome:
    """The outcome of one hook run at `event`."""
    stderr = _bounded(redact(ran.stderr, secrets).strip())
    if ran.timed_out:
        said = f"the hook did not finish within its timeout of {spec.timeout_s:g}s and was stopped"
        if event == "pre_tool":
            return Block(f"{said}; a pre_tool hook that does not answer blocks the tool", True)
        return Warn(said, True)
    if ran.exit_code == 0:
        return GoOn()
    if ran.exit_code is not None and ran.exit_code < 0:
        said = f"the hook was killed by {_signal(-ran.exit_code)} before it exited" + (
            f": {stderr}" if stderr else ""
        )
        if event == "pre_tool":
            return Block(f"{said}; a pre_tool hook that does not answer blocks the tool")
        return Warn(said)
    if ran.exit_code in CANNOT_RUN and event == "pre_tool":
        said = stderr or f"exit {ran.exit_code}"
        return Block(
            f"the hook could not be run ({said}); a pre_tool hook that cannot run blocks the tool"
        )
    if ran.exit_code == BLOCK_EXIT and event in BLOCKING:
        return Block(stderr or "(the hook exited 2 and wrote no reason on stderr)")
    stdout = _bounded(redact(ran.stdout, secrets).strip())
    return Warn(f"exit {ran.exit_code}" + (f": {stderr or stdout}" if stderr or stdout else ""))


def tampered(event: HookEvent, changed: list[str]) -> tuple[Finished, HookOutcome]:
    """The outcome of a hook that was not run because a file it runs changed during the run
    (`scripts.py`): a block where a hook can block, else a notice."""
    said = (
        f"not run: {', '.join(changed)} changed since the run started, and a hook runs only "
        "the files it was set up with (the model may have changed them)"
    )
    ran = Finished(exit_code=None, stdout="", stderr=said, timed_out=False, duration_s=0.0)
    return ran, (Block(said) if event in BLOCKING else Warn(said))


def stopped(event: HookEvent, duration_s: float) -> tuple[Finished, HookOutcome]:
    """The outcome of a hook Ctrl-C stopped before it finished: where a hook can block, a block
    (it never answered, and the run stops), else a notice."""
    said = "stopped by Ctrl-C before it finished"
    ran = Finished(exit_code=None, stdout="", stderr=said, timed_out=False, duration_s=duration_s)
    return ran, (Block(said) if event in BLOCKING else Warn(said))


def as_event(
    event: HookEvent,
    spec: HookSpec,
    ran: Finished,
    outcome: HookOutcome,
    at: tuple[int, str],
    secrets: tuple[str, ...] = (),
) -> HookRan:
    """The event that says what one hook run did at `at` (the task's index, the tool)."""
    index, tool = at
    kind = (
        "ok"
        if isinstance(outcome, GoOn)
        else "timed_out"
        if outcome.timed_out
        else "blocked"
        if isinstance(outcome, Block)
        else "failed"
    )
    return HookRan(
        hook=event,
        command=redact(spec.shown(), secrets)[:500],
        outcome=kind,
        blocks=isinstance(outcome, Block),
        exit_code=ran.exit_code,
        index=index,
        tool=tool,
        message=outcome.reason
        if isinstance(outcome, Block)
        else outcome.text
        if isinstance(outcome, Warn)
        else "",
        duration_s=round(ran.duration_s, 3),
    )


def _signal(number: int) -> str:
    """`SIGKILL (signal 9)`, or `signal 64` for a number with no name."""
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def _bounded(text: str) -> str:
    if len(text) <= MESSAGE_MAX:
        return text
    half = MESSAGE_MAX // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
