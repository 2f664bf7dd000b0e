"""When a task is rejected: show what was tried, and go on with the human's answer.

The answer comes from the terminal (`ask`), or was given up front on the command line
(`agent run --resume --hint TEXT | --skip | --replan NOTE`). A line of free text is a hint:
one more attempt whose requests carry it in a `<human_hint>` block (at most MAX_HINTS per
task); `s` skips the task; `r [NOTE]` asks the model to re-plan the remaining work; `q` or an
empty line stops the run, resumable. Without a terminal and without an answer the run stops.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_cli.agent.adapt import replan
from agent_cli.agent.attempt.runtime import Runtime
from agent_cli.agent.judge.dispatch import unheld
from agent_cli.core import events
from agent_cli.core.models import Task
from agent_cli.core.protocols import Workspace
from agent_cli.core.text import readable, some

if TYPE_CHECKING:
    from agent_cli.agent.judge.gate import Gate
    from agent_cli.agent.run.state import AgentState

MAX_HINTS = 3
MAX_QUESTIONS = 10
Outcome = Literal["retry", "next", "stop"]


@dataclass
class Answer:
    """The human's decision about a rejected task."""

    kind: Literal["hint", "skip", "replan", "quit"]
    text: str = ""


def parse_answer(line: str) -> Answer:
    """`s`, `r [NOTE]`, `q` or empty, else the line is a hint. `stop` and `exit` are `q` too:
    the choices read "q: stop here", and as a hint either word would only spend an attempt."""
    text = line.strip()
    low = text.lower()
    if low in ("", "q", "quit", "stop", "exit"):
        return Answer("quit")
    if low in ("s", "skip"):
        return Answer("skip")
    match = re.fullmatch(r"(?:r|replan)(?:\s+(.*))?", text, re.IGNORECASE | re.DOTALL)
    if match:
        return Answer("replan", (match.group(1) or "").strip())
    return Answer("hint", text)


def header_path(header: str) -> str:
    """The path of a `diff --git a/P b/P` line. Git writes a path with non-ASCII or special
    characters C-quoted (`"b/donn\\303\\251es.py"`), and a path may hold ` b/` itself."""
    rest = header.removeprefix("diff --git ")
    if rest.endswith('"') and ' "' in rest:  # a quoted `"` is `\"`, so ` "` starts the last one
        quoted = rest[rest.rindex(' "') + 2 : -1].encode("latin-1", "backslashreplace")
        raw: bytes = codecs.escape_decode(quoted)[0]
        return raw.decode("utf-8", "replace").removeprefix("b/")
    half = (len(rest) - 1) // 2
    if rest[2:half] == rest[half + 3 :]:  # the same path on both sides: no rename
        return rest[half + 3 :]
    return rest.split(" b/", 1)[-1]


def diff_stat(diff: str) -> str:
    """` path | +added -removed` per file of a unified diff."""
    rows: list[list[Any]] = []
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            rows.append([header_path(line), 0, 0])
        elif rows and line.startswith("+") and not line.startswith("+++"):
            rows[-1][1] += 1
        elif rows and line.startswith("-") and not line.startswith("---"):
            rows[-1][2] += 1
    return "\n".join(f"{path} | +{added} -{removed}" for path, added, removed in rows)


class Escalation:
    """Resolves rejected tasks for one run."""

    def __init__(
        self,
        rt: Runtime,
        ws: Workspace,
        gate: Gate,
        ask: Callable[[events.Escalated], str] | None,
        branch: str,
        answer: Answer | None = None,
    ) -> None:
        self.rt, self.ws, self.gate, self.ask, self.branch = rt, ws, gate, ask, branch
        self.pending = answer  # given on the command line, used for the first rejected task

    def resolve(self, index: int) -> Outcome:
        """Decide what happens to rejected task `index`: retry it, go on, or stop."""
        if self.pending is not None:
            answer, self.pending = self.pending, None
            outcome = self._apply(index, answer)
            if outcome is not None:
                return outcome
        event = self.event(index)
        self.rt.emit(event)
        if self.ask is None:
            return "stop"
        for _ in range(MAX_QUESTIONS):
            answer = parse_answer(self.ask(event))
            if answer.kind == "hint" and not event.hints_left:
                self.rt.emit(
                    events.Notice(
                        text=f"task {index + 1} has had its {MAX_HINTS} hints: answer s, r or q"
                    )
                )
                continue
            outcome = self._apply(index, answer)
            if outcome is not None:
                return outcome
        return "stop"

    def _apply(self, index: int, answer: Answer) -> Outcome | None:
        """Carry out the answer; None when the model kept the plan after `r` (ask again)."""
        if answer.kind == "hint":
            self.hint(index, answer.text)
            return "retry"
        if answer.kind == "skip":
            self.skip(index)
            return "next"
        if answer.kind == "replan":
            task = self.rt.state.plan[index]
            answered = replan.revise(
                self.rt,
                self.gate,
                index,
                asked_by="human",
                failure=task.last_reason,
                note=answer.text,
                left=[readable(f) for f in unheld(self.rt, self.ws)],
            )
            if answered == "revised":
                return "retry"
            if answered == "kept":  # an unusable reply was said where it was refused
                self.rt.emit(
                    events.Notice(
                        text=f"the model kept the plan; task {index + 1} is still rejected"
                    )
                )
            return None
        return "stop"

    def hint(self, index: int, text: str) -> None:
        """One more attempt at the task, carrying the human's words."""
        task = self.rt.state.plan[index]
        task.hints.append(text)
        task.max_attempts = task.attempts + 1
        task.status = "pending"
        self.rt.save()
        self.rt.emit(events.HintGiven(index=index, text=text, attempt=task.attempts + 1))

    def skip(self, index: int) -> None:
        """Give the task up; its changes stay uncommitted and out of later commits."""
        task = self.rt.state.plan[index]
        task.left_files = [readable(f) for f in unheld(self.rt, self.ws)]
        task.status = "skipped"
        self.rt.state.last_error = None
        self.rt.save()
        self.rt.emit(events.TaskSkipped(index=index, goal=task.goal, left_files=task.left_files))

    def event(self, index: int) -> events.Escalated:
        """The escalation of task `index`: what was tried, why it failed, what is left on disk."""
        task = self.rt.state.plan[index]
        stat = diff_stat(self.ws.diff())
        return events.Escalated(
            index=index,
            goal=task.goal,
            summary=task.summary,
            reason=task.last_reason,
            attempts=task.attempts,
            hints=list(task.hints),
            diff_stat=stat,
            hints_left=max(MAX_HINTS - len(task.hints), 0),
            asks=self.ask is not None,
            next_steps=next_steps(self.branch, bool(stat), self.ask is None),
        )


def next_steps(branch: str, changed: bool, resume_hint: bool) -> str:
    """What the human can do now; uncommitted changes are named only when there are some."""
    look = (
        f"Inspect the changes left uncommitted on branch {branch} (git status, git diff) and "
        "fix or adjust them if you like. "
        if changed
        else "The attempts changed no files. "
    )
    if not resume_hint:
        return look.strip()
    return (
        look + "Then continue: `agent run --resume` (two fresh attempts), "
        '`agent run --resume --hint "TEXT"` (one more attempt with your advice), '
        "`agent run --resume --skip` (go on without this task), or "
        '`agent run --resume --replan "NOTE"` (re-plan the remaining work).'
    )


def final_gate_steps(branch: str) -> str:
    """What the human can do when every task passed its own check but the final one did not
    (no task was rejected, so there is nothing to hint, skip or re-plan)."""
    return (
        f"Every task's work is committed on branch {branch}. Fix what the final check reports "
        "and commit the fix on that branch, then `agent run --resume` runs the final check again."
    )


def check_answer(state: AgentState, answer: Answer | None, run_id: str) -> None:
    """Refuse an answer given with --resume that the saved run cannot take."""
    if answer is None:
        return
    from agent_cli.core.errors import UsageError

    flag = {"hint": "--hint", "skip": "--skip", "replan": "--replan"}.get(answer.kind, "")
    rejected = [t for t in state.plan if t.status == "rejected"]
    if not rejected:
        raise UsageError(
            f"{flag} answers a rejected task, and run {run_id} has none",
            "continue it with `agent run --resume` alone",
        )
    if answer.kind == "hint" and len(rejected[0].hints) >= MAX_HINTS:
        raise UsageError(
            f"the rejected task has had its {MAX_HINTS} hints already",
            "use --skip, --replan NOTE, or --resume alone for two fresh attempts",
        )


def skipped_message(plan: list[Task], skipped: list[int]) -> str:
    """Which tasks were skipped and what they left uncommitted."""
    parts = []
    for i in skipped:
        files = plan[i].left_files
        left = (
            f"its changes were left uncommitted: {some(files)}" if files else "it left no changes"
        )
        parts.append(f"task {i + 1} skipped ({left})")
    return "; ".join(parts)


def replaced_message(state: AgentState, held: set[str]) -> str:
    """Which tasks a revision replaced with changes left uncommitted that no task took over."""
    parts = []
    for revision in state.revisions:
        for task in revision.get("old", []):
            files = [f for f in task.get("left_files", []) if f in state.dropped and f in held]
            if files:
                goal = " ".join(str(task.get("goal", "")).split())
                parts.append(
                    f"the replaced task {goal!r} left its changes uncommitted: {some(files)}"
                )
    return "; ".join(parts)
