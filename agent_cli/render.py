"""What the console draws: the log's lines, the plan table, the escalation block, the report.

Everything the model or a tool wrote is shown as a rich `Text` (never parsed as markup) with
escape and control codes stripped, so it can neither break the layout nor colour a log. The
same renderables serve a terminal and a log file; without colour their styles simply vanish.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from dataclasses import dataclass, field

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent_cli.events import (BudgetExhausted, Escalated, Event, Notice, PlanMade, RunDone,
                              RunStarted, TaskDone, TaskStarted, ToolCalled, ToolRan, Verified)
from agent_cli.text import shorten

MODEL_SUMMARIES = "The model's summaries (not verified by the harness)"
DIFF_LINES = 80  # --verbose shows at most this many lines of one edit's diff
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
_ARG_KEYS = ("cmd", "path", "pattern", "query", "text", "summary")
_STATUS_STYLE = {"pending": "dim", "running": "bold yellow", "verified": "bold green",
                 "rejected": "bold red"}


def clean(text: object) -> str:
    """Text with terminal escape sequences and control characters removed."""
    return _CONTROL.sub("", str(text)).replace("\t", "    ")


def short(text: object, limit: int = 80) -> str:
    """One cleaned line of at most `limit` characters, cut between words."""
    return shorten(clean(text), limit)


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
    tasks: list[dict] = field(default_factory=list)
    current: int | None = None
    last_call: ToolCalled | None = None
    summaries: list[tuple[int, str]] = field(default_factory=list)
    final_gate: Verified | None = None

    def task(self, index: int) -> dict:
        """The task at `index`, created as a placeholder if the plan did not list it."""
        while len(self.tasks) <= index:
            self.tasks.append({"goal": f"task {len(self.tasks) + 1}", "status": "pending",
                               "attempts": 0, "acceptance_cmd": None})
        return self.tasks[index]

    def label(self, index: int) -> str:
        """`task i/n` for a 0-based index."""
        return f"task {index + 1}/{max(len(self.tasks), index + 1)}"

    def apply(self, ev: Event) -> None:
        """Fold one event into the state."""
        match ev:
            case RunStarted():
                self.run_id, self.goal, self.branch, self.base = (ev.run_id, ev.goal, ev.branch,
                                                                  ev.base)
            case PlanMade():
                self.goal = ev.goal
                self.tasks = [dict(t) for t in ev.tasks]
            case TaskStarted():
                self.task(ev.index).update(status="running", attempts=ev.attempt)
                self.current, self.last_call = ev.index, None
            case ToolCalled():
                self.last_call = ev
            case Verified() if ev.index < 0:
                self.final_gate = ev
            case TaskDone():
                self.task(ev.index).update(status=ev.status, attempts=ev.attempts)
                self.current = None
                if ev.summary.strip():
                    self.summaries.append((ev.index, ev.summary))


def _edit_size(diff: str) -> str:
    """`+9 -2` from a unified diff."""
    lines = diff.splitlines()
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    return f"+{added} -{removed}"


def tool_line(call: ToolCalled | None, result: ToolRan) -> Text:
    """`step 4 run: pytest -q -> exit 1` for a tool call and its result."""
    line = Text(f"step {result.step} ", style="dim")
    line.append(result.name, style="bold")
    line.append(":")
    arg = arg_summary(call.arguments) if call is not None and call.step == result.step else ""
    if arg:
        line.append(f" {arg}")
    outcome = _edit_size(result.diff) if result.diff else short(result.summary, 120)
    if result.ok:
        # "read calc/stats.py" after the path, "note" after a note: nothing new to say
        outcome = outcome.removesuffix(arg).strip() if arg else outcome
        if len(outcome.split()) > 1:
            line.append(f" -> {outcome}", style="dim")
    else:
        line.append(f" -> FAILED: {outcome}", style="red")
    return line


def diff_text(diff: str) -> Text:
    """An edit's diff, coloured, indented, at most DIFF_LINES lines."""
    lines = clean(diff).splitlines()
    out = Text()
    for line in lines[:DIFF_LINES]:
        style = ("green" if line.startswith("+") else "red" if line.startswith("-")
                 else "cyan" if line.startswith("@@") else "dim")
        out.append(f"      {line}\n", style=style)
    if len(lines) > DIFF_LINES:
        out.append(f"      … {len(lines) - DIFF_LINES} more lines\n", style="dim")
    out.rstrip()
    return out


def verify_line(ev: Verified) -> str:
    """One line for a verification: what ran, its exit code, and the verdict."""
    verdict = "passed" if ev.passed else "did not pass"
    who = "final check" if ev.index < 0 else f"verify attempt {ev.attempt}"
    if ev.judge == "command" and ev.command:
        code = "not run" if ev.exit_code is None else f"exit {ev.exit_code}"
        return f"{who}: `{short(ev.command, 100)}` -> {code}: {verdict}"
    return f"{who} ({ev.judge} judge): {verdict}"


def _task_done(ev: TaskDone, state: RunState) -> Text:
    commit = f" (commit {ev.commit[:10]})" if ev.commit else ""
    tries = "attempt" if ev.attempts == 1 else "attempts"
    line = Text(f"[{state.label(ev.index)}] ", style="bold")
    line.append(ev.status, style=_STATUS_STYLE.get(ev.status, ""))
    line.append(f" after {ev.attempts} {tries}{commit}")
    for stat in clean(ev.diff_stat).splitlines():
        line.append(f"\n    {stat.strip()}", style="dim")
    return line


def event_line(ev: Event, state: RunState) -> Text | None:
    """The log line of an event (None for the events shown as blocks or not at all)."""
    match ev:
        case RunStarted():
            how = "resuming run" if ev.resumed else "run"
            base = f" (from {ev.base})" if ev.base else ""
            return Text(f"{how} {ev.run_id} on branch {ev.branch}{base} in {ev.repo}\n"
                        f"goal: {clean(ev.goal)}")
        case TaskStarted():
            return Text(f"[{state.label(ev.index)}] attempt {ev.attempt}: {short(ev.goal, 200)}",
                        style="bold")
        case ToolRan():
            return Text("  ").append_text(tool_line(state.last_call, ev))
        case Verified():
            line = Text("  " + verify_line(ev), style="green" if ev.passed else "yellow")
            if not ev.passed:
                for tail in ev.reason.splitlines()[-12:]:
                    line.append(f"\n    {clean(tail)}", style="dim")
            return line
        case TaskDone():
            return _task_done(ev, state)
        case BudgetExhausted():
            return Text(f"budget ran out: {ev.budget} used {ev.used} of {ev.limit}", style="yellow")
        case Notice():
            return Text(f"-- {clean(ev.text)}", style="dim")
    return None


def plan_table(tasks: list[dict], *, plain: bool) -> Table:
    """The plan: index, task goal, acceptance command."""
    table = Table(box=box.ASCII if plain else box.SIMPLE_HEAD)
    table.add_column("#", justify="right")
    table.add_column("Task", ratio=3)
    table.add_column("Acceptance command", ratio=2)
    for i, t in enumerate(tasks):
        cmd = t.get("acceptance_cmd")
        check = Text(clean(cmd)) if cmd else Text(
            f"(none; the model judges: {clean(t.get('acceptance') or 'the goal')})", style="dim")
        table.add_row(Text(str(i + 1)), Text(clean(t.get("goal", ""))), check)
    return table


def plan_heading(ev: PlanMade) -> Text:
    """`plan: 2 tasks for: GOAL`."""
    n = len(ev.tasks)
    return Text(f"plan: {n} task{'s' if n != 1 else ''} for: {clean(ev.goal)}", style="bold")


def escalation_block(ev: Escalated, *, plain: bool) -> RenderableType:
    """The "Needs you" block: what failed, the model's last words, why, and what to do next."""
    body = Text("I tried twice and couldn't finish this myself: ")
    body.append(clean(ev.goal), style="bold")
    for heading, text in (
            ("The model's summary of its last attempt (its words, not verified):", ev.summary),
            ("Why it did not pass (the harness's check):", ev.reason),
            ("What to do next:", ev.next_steps)):
        body.append(f"\n\n{heading}\n", style="bold")
        body.append(clean(text.strip() or "(nothing)"))
    if plain:
        rule = "=" * 30
        return Group(Text(f"{rule} Needs you {rule}"), body, Text("=" * 71))
    return Panel(body, title="Needs you", title_align="left", border_style="yellow")


def _report_tasks(ev: RunDone) -> Text:
    """Per task: its goal on one line, then what the harness observed."""
    lines = Text("Run report", style="bold")
    for i, t in enumerate(ev.tasks):
        st, code, cmd = str(t.get("status", "")), t.get("exit_code"), t.get("acceptance_cmd")
        tries = t.get("attempts", 0)
        lines.append(f"\n  {i + 1}. {short(t.get('goal', ''), 90)}\n     ")
        lines.append(st, style=_STATUS_STYLE.get(st, ""))
        lines.append(f", {tries} attempt{'' if tries == 1 else 's'}; ")
        lines.append(f"`{clean(cmd)}` -> {'not run' if code is None else f'exit {code}'}"
                     if cmd else "no acceptance command")
    return lines


def _summaries(state: RunState) -> Text:
    lines = Text(MODEL_SUMMARIES, style="bold")
    for index, summary in state.summaries:
        lines.append(f"\n  task {index + 1}: ")
        lines.append(clean(summary.strip()).replace("\n", "\n    "), style="italic")
    return lines


def take_it(ev: RunDone) -> Text | None:
    """How to review the run's commits and merge them, with the real branch names."""
    if not ev.branch or not any(t.get("commit") for t in ev.tasks):
        return None
    base = ev.base or "<your branch>"
    lines = Text("review: ", style="bold")
    lines.append(f"git diff {base}...{ev.branch}")
    lines.append("\ntake it: ", style="bold")
    lines.append(f"git switch {base} && git merge {ev.branch}")
    return lines


def report(ev: RunDone, state: RunState) -> list[RenderableType]:
    """The final report: per task what the harness observed, totals, the model's words, next."""
    parts: list[RenderableType] = [Text(), _report_tasks(ev)]
    if state.final_gate is not None:
        parts.append(Text(verify_line(state.final_gate)))
    parts.append(Text(f"{ev.steps} steps, {ev.prompt_tokens:,} prompt + "
                      f"{ev.completion_tokens:,} completion tokens, {cost_text(ev.cost_usd)}"))
    if state.summaries:
        parts.append(_summaries(state))
    message = f": {clean(ev.message)}" if ev.message else ""
    parts.append(Text(f"\nrun {ev.run_id} {ev.status} (exit code {ev.exit_code}){message}",
                      style="bold"))
    parts.append(take_it(ev) or Text(f"branch: {ev.branch} (nothing committed on it)"
                                     if ev.branch else ""))
    return parts


def _local_time(stamp: object) -> str:
    """`2026-11-30 20:15` in local time from an ISO 8601 stamp ("" when there is none)."""
    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return ""


def runs_table(rows: list[dict], width: int) -> Table:
    """`agent runs`: one line per run, the goal cut between words to fit `width` columns."""
    cells = [[str(r.get("run_id", "")), _local_time(r.get("started_at", "")),
              str(r.get("status", "")), str(r.get("steps", 0))] for r in rows]
    heads = ["run", "started", "status", "steps"]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    room = max(width - sum(widths) - 3 * len(widths), 10)  # 3: padding and divider
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 2, 0, 0))
    for head in heads:
        table.add_column(head, no_wrap=True, justify="right" if head == "steps" else "left",
                         min_width=widths[heads.index(head)])
    table.add_column("goal", no_wrap=True, max_width=room)
    for r, c in zip(rows, cells):
        table.add_row(*c, short(r.get("goal", ""), room))
    return table
