"""What the console draws: one-line event texts, the plan table, the escalation block, the report.

Everything the model or a tool wrote is shown as a rich `Text` (never parsed as markup) with
escape and control codes stripped, so it can neither break the layout nor colour a log.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent_cli.events import (BudgetExhausted, Escalated, Event, Notice, PlanMade, RunDone,
                              RunStarted, TaskDone, TaskStarted, ToolCalled, ToolRan, Verified)
from agent_cli.memory.records import one_line

MODEL_SUMMARIES = "The model's summaries (not verified by the harness)"
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
_ARG_KEYS = ("cmd", "path", "pattern", "query", "text", "summary")
_STATUS_STYLE = {"pending": "dim", "running": "bold yellow", "verified": "bold green",
                 "rejected": "bold red"}


def clean(text: object) -> str:
    """Text with terminal escape sequences and control characters removed."""
    return _CONTROL.sub("", str(text)).replace("\t", "    ")


def short(text: object, limit: int = 80) -> str:
    """One cleaned line of at most `limit` characters."""
    line = " ".join(clean(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


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


@dataclass
class RunState:
    """What the events so far say: the plan with statuses, the current step, the running cost."""

    run_id: str = ""
    goal: str = ""
    branch: str = ""
    tasks: list[dict] = field(default_factory=list)
    current: int | None = None
    attempt: int = 0
    step: int = 0
    last_call: ToolCalled | None = None
    last_result: ToolRan | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    summaries: list[tuple[int, str]] = field(default_factory=list)
    final_gate: Verified | None = None

    def task(self, index: int) -> dict:
        """The task at `index`, created as a placeholder if the plan did not list it."""
        while len(self.tasks) <= index:
            self.tasks.append({"goal": f"task {len(self.tasks) + 1}", "status": "pending",
                               "attempts": 0, "acceptance_cmd": None, "exit_code": None})
        return self.tasks[index]

    def label(self, index: int) -> str:
        """`task i/n` for a 0-based index."""
        return f"task {index + 1}/{max(len(self.tasks), index + 1)}"

    def apply(self, ev: Event) -> None:
        """Fold one event into the state."""
        match ev:
            case RunStarted():
                self.run_id, self.goal, self.branch = ev.run_id, ev.goal, ev.branch
            case PlanMade():
                self.goal = ev.goal
                self.tasks = [{"goal": t.get("goal", ""), "acceptance": t.get("acceptance", ""),
                               "acceptance_cmd": t.get("acceptance_cmd"), "exit_code": None,
                               "status": t.get("status", "pending"),
                               "attempts": t.get("attempts", 0)} for t in ev.tasks]
            case TaskStarted():
                self.task(ev.index).update(status="running", attempts=ev.attempt)
                self.current, self.attempt, self.last_call, self.last_result = (
                    ev.index, ev.attempt, None, None)
            case ToolCalled():
                self.step, self.last_call = ev.step, ev
            case ToolRan():
                self.step, self.last_result = ev.step, ev
                self.prompt_tokens += ev.prompt_tokens
                self.completion_tokens += ev.completion_tokens
                self.cost_usd += ev.cost_usd
            case Verified():
                if ev.index < 0:
                    self.final_gate = ev
                else:
                    self.task(ev.index)["exit_code"] = ev.exit_code
            case TaskDone():
                self.task(ev.index).update(status=ev.status, attempts=ev.attempts)
                self.current = None
                if ev.summary.strip():
                    self.summaries.append((ev.index, ev.summary))
            case RunDone():
                self.prompt_tokens, self.completion_tokens = ev.prompt_tokens, ev.completion_tokens
                self.cost_usd, self.step = ev.cost_usd, ev.steps


def tool_line(call: ToolCalled | None, result: ToolRan) -> str:
    """`step 4 run: pytest -q -> exit 1` for a tool call and its result."""
    what = f" {arg_summary(call.arguments)}" if call and call.step == result.step else ""
    arrow = "->" if result.ok else "-> FAILED:"
    return f"step {result.step} {result.name}:{what} {arrow} {short(result.summary, 120)}"


def verify_line(ev: Verified) -> str:
    """One line for a verification: what ran, its exit code, and the verdict."""
    verdict = "passed" if ev.passed else "did not pass"
    who = "final check" if ev.index < 0 else f"verify attempt {ev.attempt}"
    if ev.judge == "command" and ev.command:
        code = "not run" if ev.exit_code is None else f"exit {ev.exit_code}"
        return f"{who}: `{short(ev.command, 100)}` -> {code}: {verdict}"
    return f"{who} ({ev.judge} judge): {verdict}"


def budget_line(ev: BudgetExhausted) -> str:
    """Which budget ran out and how much of it was used, with the flag that raises it."""
    if ev.budget == "max_steps":
        return (f"budget ran out: {ev.used:.0f} of {ev.limit:.0f} tool calls used "
                "(raise --max-steps, then `agent run --resume`)")
    return (f"budget ran out: ${ev.used:.4f} of ${ev.limit:.2f} spent "
            "(raise --budget-usd, then `agent run --resume`)")


def event_line(ev: Event, state: RunState) -> str | None:
    """The plain one-line rendering of an event (None for the events shown as blocks)."""
    match ev:
        case RunStarted():
            how = "resuming run" if ev.resumed else "run"
            return f"{how} {ev.run_id} on branch {ev.branch} in {ev.repo}\ngoal: {clean(ev.goal)}"
        case TaskStarted():
            return f"[{state.label(ev.index)}] attempt {ev.attempt}: {short(ev.goal, 200)}"
        case ToolRan():
            return "  " + tool_line(state.last_call, ev)
        case Verified():
            reason = "".join(f"\n    {clean(line)}" for line in ev.reason.splitlines()[-12:])
            return "  " + verify_line(ev) + ("" if ev.passed else reason)
        case TaskDone():
            commit = f" (commit {ev.commit[:10]})" if ev.commit else ""
            tries = "attempt" if ev.attempts == 1 else "attempts"
            proof = f"; proof: {ev.proof}" if ev.proof else ""
            return f"[{state.label(ev.index)}] {ev.status} after {ev.attempts} {tries}{commit}{proof}"
        case BudgetExhausted():
            return budget_line(ev)
        case Notice():
            return f"-- {clean(ev.text)}"
    return None


def plan_table(tasks: list[dict], *, plain: bool, status: bool = False) -> Table:
    """The plan: index, task goal, acceptance command (and status and attempts when asked)."""
    table = Table(box=box.ASCII if plain else box.SIMPLE_HEAD)
    table.add_column("#", justify="right")
    table.add_column("Task", ratio=3)
    table.add_column("Acceptance command", ratio=2)
    if status:
        table.add_column("Status")
        table.add_column("Tries", justify="right")
    for i, t in enumerate(tasks):
        cmd = t.get("acceptance_cmd")
        check = Text(clean(cmd)) if cmd else Text(
            f"(none; the model judges: {clean(t.get('acceptance') or 'the goal')})", style="dim")
        row = [Text(str(i + 1)), Text(clean(t.get("goal", ""))), check]
        if status:
            st = str(t.get("status", "pending"))
            row += [Text(st, style=_STATUS_STYLE.get(st, "")), Text(str(t.get("attempts", 0)))]
        table.add_row(*row)
    return table


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


_PROOF_WORDS = {"red-green": "red-green (its check failed before the task and passes after)",
                "regression-only": "regression-only (its check already passed before the task)"}


def proof_lines(tasks: list[dict]) -> str:
    """What each verified task's check proves, one line per task judged by a command."""
    lines = [f"task {i + 1}: {_PROOF_WORDS[t['proof']]}" for i, t in enumerate(tasks)
             if t.get("proof") in _PROOF_WORDS]
    return "proof: " + "; ".join(lines) if lines else ""


def report(ev: RunDone, state: RunState, *, plain: bool) -> list[RenderableType]:
    """The final report: what the harness observed per task, totals, then the model's words."""
    table = Table(title="Run report", box=box.ASCII if plain else box.SIMPLE_HEAD)
    for name in ("#", "Task", "Status", "Attempts", "Acceptance command", "Exit code"):
        table.add_column(name, justify="right" if name in ("#", "Attempts", "Exit code") else "left")
    for i, t in enumerate(ev.tasks):
        st, code, cmd = str(t.get("status", "")), t.get("exit_code"), t.get("acceptance_cmd")
        table.add_row(Text(str(i + 1)), Text(clean(t.get("goal", ""))),
                      Text(st, style=_STATUS_STYLE.get(st, "")), Text(str(t.get("attempts", 0))),
                      Text(clean(cmd) if cmd else "(none)"),
                      Text("not run" if code is None else str(code)))
    parts: list[RenderableType] = [table]
    proofs = proof_lines(ev.tasks)
    if proofs:
        parts.append(Text(proofs))
    if state.final_gate is not None:
        parts.append(Text(verify_line(state.final_gate)))
    parts.append(Text(f"{ev.steps} steps, {ev.prompt_tokens:,} prompt + "
                      f"{ev.completion_tokens:,} completion tokens, ${ev.cost_usd:.4f}"))
    if ev.branch:
        parts.append(Text(f"branch: {ev.branch}"))
    if state.summaries:
        lines = Text(f"\n{MODEL_SUMMARIES}", style="bold")
        for index, summary in state.summaries:
            goal = ev.tasks[index].get("goal", "") if index < len(ev.tasks) else ""
            lines.append(f"\n  task {index + 1} ({short(goal, 60)}): ")
            lines.append(clean(summary.strip()).replace("\n", "\n    "), style="italic")
        parts.append(lines)
    message = f": {clean(ev.message)}" if ev.message else ""
    parts.append(Text(f"\nrun {ev.run_id} {ev.status} (exit code {ev.exit_code}){message}",
                      style="bold"))
    return parts


def live_view(state: RunState) -> RenderableType:
    """The live region: plan with statuses, current task and step, last tool call, cost."""
    head = Text.assemble(("agent ", "bold"), state.run_id, "  ", (state.branch, "cyan"))
    head.append("\n" + short(state.goal, 200))
    if state.current is None:
        now = Text("between tasks" if state.tasks else "planning...", style="dim")
    else:
        now = Text(f"{state.label(state.current)}, attempt {state.attempt}, step {state.step}: ",
                   style="bold")
        now.append(short(state.task(state.current).get("goal", ""), 100), style="")
    last = Text("-", style="dim")
    if state.last_result is not None:
        last = Text("last: " + tool_line(state.last_call, state.last_result), style="dim")
    elif state.last_call is not None:
        last = Text(f"calling {state.last_call.name}: {arg_summary(state.last_call.arguments)}",
                    style="dim")
    cost = Text(f"{state.prompt_tokens:,} prompt + {state.completion_tokens:,} completion "
                f"tokens, ${state.cost_usd:.4f}", style="dim")
    return Group(head, plan_table(state.tasks, plain=False, status=True), now, last, cost)


def memory_table(title: str) -> Table:
    """A borderless table with a title, for the memory commands."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                 show_edge=False, padding=(0, 1, 0, 0))


def recall_table(results: list) -> Table:
    """What `agent recall` found: score, kind, id, date, and the gist with its source."""
    table = memory_table("Recalled from long-term memory")
    for name in ("score", "kind", "id", "date", "gist and source"):
        table.add_column(name, style="cyan" if name == "id" else None,
                         no_wrap=name != "gist and source",
                         overflow="fold" if name == "gist and source" else "ellipsis")
    for r in results:
        cell = Text(one_line(r.gist or r.text, 200))
        cell.append(f"\n{one_line(r.source, 80)}", style="dim")
        table.add_row(f"{r.score:.2f}", r.kind, r.id, r.date[:10], cell)
    return table


def working_memory_view(report: dict) -> list[RenderableType]:
    """`agent memory show`: the hot zone with score terms, the cold zone, long-term counts."""
    counts = report["counts"]
    shown: list[RenderableType] = []
    if report["run_id"] is None:
        shown.append(Text("No run has recorded working memory yet."))
    else:
        shown += [_hot_table(report), Text(""), _cold_table(report), Text("")]
    shown.append(Text(f"Long-term memory: {counts['episodes']} episode(s), {counts['facts']} "
                      f"fact(s), {counts['archive']} archived item(s)."))
    return shown


def _hot_table(report: dict) -> Table:
    stats = report["stats"]
    hot = memory_table(f"Hot zone of run {report['run_id']} (step {stats.get('step')}, "
                       f"{stats.get('tokens')} tokens; * pinned)")
    terms = [t for t in (report["hot"][0]["score"] if report["hot"] else {}) if t != "total"]
    short = {"kind": "weight", "recency": "recent"}
    for col in ["id", "kind", "score", *(short.get(t, t) for t in terms), "tokens", "summary"]:
        hot.add_column(col, overflow="fold" if col == "summary" else "ellipsis",
                       no_wrap=col != "summary", min_width=12 if col == "summary" else None)
    for item in report["hot"]:
        s = item["score"]
        hot.add_row(item["id"], item["kind"] + ("*" if item["pinned"] else ""),
                    f"{s.get('total', 0):.2f}", *(f"{s[t]:.2f}" for t in terms),
                    str(item["tokens"]), one_line(item["summary"], 80))
    return hot


def _cold_table(report: dict) -> Table:
    cold = memory_table(f"Cold zone: {len(report['cold'])} item(s)")
    for col in ("id", "kind", "evicted at step", "summary"):
        cold.add_column(col, overflow="fold" if col == "summary" else "ellipsis",
                        no_wrap=col != "summary")
    for e in report["cold"]:
        cold.add_row(e["id"], e.get("kind", ""), str(e.get("step_evicted", "")),
                     one_line(e.get("summary", ""), 80))
    return cold
