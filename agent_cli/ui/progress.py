"""What a run's events say so far, and their plain-text pieces (no terminal library here).

`render` turns these into what the console draws; they are kept apart so the drawing module
holds only drawing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agent_cli.core.events import (
    BudgetExhausted,
    Event,
    PlanMade,
    PlanRevised,
    RunStarted,
    TaskDone,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolRan,
    Verified,
)
from agent_cli.core.models import TIMED_OUT
from agent_cli.core.text import short

_VOLATILE = re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d+(?:\.\d+)?s\b")
_ARG_KEYS = ("cmd", "path", "pattern", "query", "text", "summary")


def arg_summary(arguments: str, limit: int = 80) -> str:
    """The telling argument of a tool call (its command, path, pattern...) on one line."""
    try:
        args = json.loads(arguments)
    except ValueError:
        return short(arguments, limit)
    if isinstance(args, dict):
        for key in _ARG_KEYS:
            if isinstance(args.get(key), str):
                return short(args[key], limit)
        return short(", ".join(f"{k}={v}" for k, v in args.items()), limit)
    return short(args, limit)


def cost_text(usd: float) -> str:
    """Dollars for display: `$0` when nothing was spent (a replayed run), else four decimals."""
    return "$0" if usd == 0 else f"${usd:.4f}"


@dataclass
class RunState:
    """What the events so far say: the plan, the current task, the last tool call."""

    run_id: str = ""
    goal: str = ""
    branch: str = ""
    base: str = ""
    tasks: list[dict[str, Any]] = field(default_factory=list)
    current: int | None = None
    last_call: ToolCalled | None = None
    summaries: list[tuple[int, str]] = field(default_factory=list)
    final_gate: Verified | None = None
    # per task: the files each attempt edited (attempt -> paths), and the failed checks shown
    edits: dict[int, dict[int, list[str]]] = field(default_factory=dict)
    failures: dict[int, list[Verified]] = field(default_factory=dict)

    def task(self, index: int) -> dict[str, Any]:
        """The task at `index`, created as a placeholder if the plan did not list it."""
        while len(self.tasks) <= index:
            self.tasks.append(
                {
                    "goal": f"task {len(self.tasks) + 1}",
                    "status": "pending",
                    "attempts": 0,
                    "acceptance_cmd": None,
                }
            )
        return self.tasks[index]

    def label(self, index: int) -> str:
        """`task i/n` for a 0-based index."""
        return f"task {index + 1}/{max(len(self.tasks), index + 1)}"

    def apply(self, ev: Event) -> None:
        """Fold one event into the state."""
        match ev:
            case RunStarted():
                self.run_id, self.goal, self.branch, self.base = (
                    ev.run_id,
                    ev.goal,
                    ev.branch,
                    ev.base,
                )
            case PlanMade():
                self.goal = ev.goal
                self.tasks = [dict(t) for t in ev.tasks]
            case TaskStarted():
                self.task(ev.index).update(status="running", attempts=ev.attempt)
                self.current, self.last_call = ev.index, None
                self.edits.setdefault(ev.index, {})[ev.attempt] = []
            case ToolRan() if ev.diff:
                files = self.edits.setdefault(ev.index, {}).setdefault(
                    self.task(ev.index).get("attempts", 0), []
                )
                path = edited_path(ev.diff)
                if path not in files:
                    files.append(path)
            case ToolCalled():
                self.last_call = ev
            case Verified() if ev.index < 0:
                self.final_gate = ev
            case Verified() if not ev.passed:
                self.failures.setdefault(ev.index, []).append(ev)
            case PlanRevised():  # what the replaced tasks did is no new task's
                self.summaries = [(i, s) for i, s in self.summaries if i < ev.start]
                self.edits = {i: e for i, e in self.edits.items() if i < ev.start}
                self.failures = {i: f for i, f in self.failures.items() if i < ev.start}
                self.tasks = self.tasks[: ev.start] + [
                    {
                        "goal": t.get("goal", ""),
                        "acceptance": t.get("acceptance", ""),
                        "acceptance_cmd": t.get("acceptance_cmd"),
                        "exit_code": None,
                        "status": "pending",
                        "attempts": 0,
                    }
                    for t in ev.new
                ]
            case TaskSkipped():
                self.task(ev.index)["status"] = "skipped"
            case TaskDone():
                self.task(ev.index).update(status=ev.status, attempts=ev.attempts)
                self.current = None
                # the task's latest round speaks for it, as its saved state does: a claim of a
                # round that was rejected before the human's hint is not shown beside it
                self.summaries = [(i, s) for i, s in self.summaries if i != ev.index]
                if ev.summary.strip():
                    self.summaries.append((ev.index, ev.summary))


def edited_path(diff: str) -> str:
    """The file a tool's diff is about (`+++ b/PATH`, or the `PATH: ...` of a large file)."""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip()
            return path[2:] if path.startswith("b/") else path
    return diff.split(":", 1)[0].strip()


def same_failure_before(state: RunState, ev: Verified) -> Verified | None:
    """An earlier failed check of the task whose output `ev` repeats word for word."""
    earlier = [f for f in state.failures.get(ev.index, []) if f.attempt < ev.attempt]
    return next((f for f in earlier if same_output(f.reason, ev.reason)), None)


def same_output(a: str, b: str) -> bool:
    """Whether two checks printed the same, apart from timings and object addresses."""
    return _VOLATILE.sub("", a) == _VOLATILE.sub("", b)


def edit_size(diff: str) -> str:
    """`+9 -2` from a unified diff; the summary said instead of a diff (a file too large to
    compare) as it is, not as `+0 -0`."""
    lines = diff.splitlines()
    if lines and not any(ln.startswith("@@") for ln in lines):
        return short(lines[0].strip("[]"), 100)
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    return f"+{added} -{removed}"


def no_exit_code(reason: str) -> str:
    """What a check with no exit code did, from the harness's reason for its verdict: it ran
    until its timeout, or it did not run."""
    return "timed out" if TIMED_OUT in reason else "not run"


def verify_line(ev: Verified) -> str:
    """One line for a verification: what ran, its exit code, and the verdict."""
    verdict = "passed" if ev.passed else "did not pass"
    who = "final check" if ev.index < 0 else f"verify attempt {ev.attempt}"
    if ev.judge == "command" and ev.command:
        code = no_exit_code(ev.reason) if ev.exit_code is None else f"exit {ev.exit_code}"
        return f"{who}: `{short(ev.command, 100)}` -> {code}: {verdict}"
    if ev.judge == "none":  # the attempt ended before its check (stuck, out of steps)
        return f"{who}: nothing judged it: {verdict}"
    return f"{who} ({ev.judge} judge): {verdict}"


def budget_line(ev: BudgetExhausted) -> str:
    """Which budget ran out and how much of it was used, with the flag that raises it."""
    if ev.budget == "max_steps":
        return (
            f"budget ran out: {ev.used:.0f} of {ev.limit:.0f} tool calls used "
            "(raise --max-steps, then `agent run --resume`)"
        )
    return (
        f"budget ran out: ${ev.used:.4f} of ${ev.limit:.2f} spent "
        "(raise --budget-usd, then `agent run --resume`)"
    )
