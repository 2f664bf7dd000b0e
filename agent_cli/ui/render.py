"""What the console draws: the log's lines, the plan table, the escalation block, the report.

Everything the model or a tool wrote is shown as a rich `Text` (never parsed as markup) with
escape and control codes stripped, so it can neither break the layout nor colour a log. The
same renderables serve a terminal and a log file; without colour their styles simply vanish.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent_cli.core.events import (
    BudgetExhausted,
    Escalated,
    Event,
    FinalSummary,
    HintGiven,
    HookRan,
    LoopDetected,
    Notice,
    PlanMade,
    PlannedTask,
    PlanRevised,
    RunDone,
    RunStarted,
    TaskDone,
    TaskReport,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolRan,
    Verified,
)
from agent_cli.core.text import clean, short, some
from agent_cli.ui.progress import (
    RunState,
    arg_summary,
    budget_line,
    cost_text,
    edit_size,
    no_exit_code,
    same_failure_before,
    same_output,
    verify_line,
)

if TYPE_CHECKING:
    from agent_cli.memory.longterm.records import Result

STACKED_BELOW = 100  # narrower terminals get one header line per item, its text below


class Hanging:
    """`text` wrapped to the width: its first line after `first`, the others under it."""

    def __init__(self, first: str, text: Text) -> None:
        self.first, self.text = first, text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        indent = len(self.first)
        lines = self.text.wrap(console, max(options.max_width - indent, 10))
        out = Text()
        for i, line in enumerate(lines):
            out.append("\n" if i else self.first)
            if i:
                out.append(" " * indent)
            out.append_text(line)
        yield out


class ByWidth:
    """Drawn by `stacked` below STACKED_BELOW columns and by `table` from there on."""

    def __init__(
        self,
        stacked: Callable[[int], RenderableType],
        table: Callable[[int], RenderableType],
    ) -> None:
        self.stacked, self.table = stacked, table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        yield (self.stacked if width < STACKED_BELOW else self.table)(width)


def stacked_item(head: Text, text: Text, width: int) -> RenderableType:
    """One item of a stacked layout: its header line (cut at the width), its text indented."""
    head.truncate(width, overflow="ellipsis")
    return Group(head, Hanging("    ", text))


MODEL_SUMMARIES = "The model's summaries (not verified by the harness)"
CLOSING_SUMMARY = "Summary of the run, in the model's words (not checked by the harness)"
DIFF_LINES = 80  # --verbose shows at most this many lines of one edit's diff
_STATUS_STYLE = {
    "pending": "dim",
    "running": "bold yellow",
    "verified": "bold green",
    "rejected": "bold red",
    "skipped": "bold magenta",
    "failed": "red",
    "nothing_to_do": "dim",
    "unfinished": "yellow",
}


def _tool_name(name: str) -> str:
    """A tool's name as the model sent it (an unknown tool's can be anything) on one line and
    without escape sequences, which could move the cursor and rewrite the lines above."""
    return short(name, 80)


def tool_line(call: ToolCalled | None, result: ToolRan) -> Text:
    """`step 4 run: pytest -q -> exit 1` for a tool call and its result."""
    line = Text(f"step {result.step} ", style="dim")
    line.append(_tool_name(result.name), style="bold")
    line.append(":")
    arg = arg_summary(call.arguments) if call is not None and call.step == result.step else ""
    if arg:
        line.append(f" {arg}")
    outcome = edit_size(result.diff) if result.diff else short(result.summary, 120)
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
        style = (
            "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "cyan"
            if line.startswith("@@")
            else "dim"
        )
        out.append(f"      {line}\n", style=style)
    if len(lines) > DIFF_LINES:
        out.append(f"      … {len(lines) - DIFF_LINES} more lines\n", style="dim")
    out.rstrip()
    return out


def _task_done(ev: TaskDone, state: RunState) -> Text:
    commit = f" (commit {ev.commit[:10]})" if ev.commit else ""
    tries = "attempt" if ev.attempts == 1 else "attempts"
    line = Text(f"[{state.label(ev.index)}] ", style="bold")
    line.append(ev.status, style=_STATUS_STYLE.get(ev.status, ""))
    line.append(f" after {ev.attempts} {tries}{commit}")
    if ev.proof:
        line.append(f"; proof: {ev.proof}")
    if ev.check_changed:
        line.append(f"; it changed its own check: {_listed(ev.check_changed)}", style="yellow")
    for stat in clean(ev.diff_stat).splitlines():
        line.append(f"\n    {stat.strip()}", style="dim")
    return line


def event_line(ev: Event, state: RunState) -> Text | None:
    """The log line of an event (None for the events shown as blocks or not at all)."""
    match ev:
        case RunStarted():
            how = "resuming run" if ev.resumed else "run"
            base = f" (from {ev.base})" if ev.base else ""
            return Text(
                f"{how} {ev.run_id} on branch {ev.branch}{base} in {ev.repo}\n"
                f"goal: {clean(ev.goal)}"
            )
        case TaskStarted():
            return Text(
                f"[{state.label(ev.index)}] attempt {ev.attempt}: {short(ev.goal, 200)}",
                style="bold",
            )
        case ToolRan():
            return Text("  ").append_text(tool_line(state.last_call, ev))
        case Verified():
            line = Text("  " + verify_line(ev), style="green" if ev.passed else "yellow")
            if not ev.passed and (same := same_failure_before(state, ev)) is not None:
                line.append(
                    f"\n    (the same output as verify attempt {same.attempt})", style="dim"
                )
            elif not ev.passed:
                for tail in ev.reason.splitlines()[-12:]:
                    line.append(f"\n    {clean(tail)}", style="dim")
            return line
        case TaskDone():
            return _task_done(ev, state)
        case BudgetExhausted():
            return Text(budget_line(ev), style="yellow")
        case Notice():
            return Text(f"-- {clean(ev.text)}", style="dim")
        case PlanRevised():
            return Text(revision_text(ev))
        case HintGiven():
            return Text(
                f"[{state.label(ev.index)}] your hint goes to attempt {ev.attempt}: "
                f"{short(ev.text, 200)}"
            )
        case TaskSkipped():
            left = (
                f"; its changes stay uncommitted: {short(', '.join(ev.left_files), 200)}"
                if ev.left_files
                else "; it left no changes"
            )
            return Text(f"[{state.label(ev.index)}] skipped{left}", style="bold")
        case HookRan() if ev.outcome != "ok":
            return Text("  " + hook_line(ev), style="yellow")
        case LoopDetected():
            what = "the attempt ends" if ev.stopped else "the model is told to change approach"
            return Text(
                f"  loop: the same {_tool_name(ev.name)} call and result {ev.repeats} times in a "
                f"row; {what}",
                style="yellow",
            )
    return None


def hook_line(ev: HookRan) -> str:
    """`hook pre_tool `python guard.py` blocked write_file: no writes under migrations/`."""
    what = {
        "blocked": "blocked " + (_tool_name(ev.tool) or "the task's verification"),
        "timed_out": "timed out" + (f", blocking {_tool_name(ev.tool)}" if ev.blocks else ""),
        "failed": "failed",
    }.get(ev.outcome, ev.outcome)
    reason = next((line for line in ev.message.splitlines() if line.strip()), "")
    return f"hook {ev.hook} `{short(ev.command, 80)}` {what}: {short(reason, 160)}".rstrip(": ")


def revision_text(ev: PlanRevised) -> str:
    """The plan revision: who asked, why, and the tasks that replace the remaining ones."""
    if ev.asked_by == "recheck":  # tasks added after the plan, none replaced
        lines = [f"an earlier task's check fails now: {short(ev.reason, 300)}; added:"]
    else:
        who = "at your request" if ev.asked_by == "human" else "after a verified task"
        replaced = ", ".join(short(t.get("goal", ""), 60) for t in ev.old) or "(none)"
        lines = [f"plan revised {who}: {short(ev.reason, 300)}", f"  replaced: {replaced}"]
    lines += [
        f"  {ev.start + i + 1}. {short(t.get('goal', ''), 120)} "
        + (f"[check: {clean(cmd)}]" if (cmd := t.get("acceptance_cmd")) else "[no command]")
        for i, t in enumerate(ev.new)
    ]
    if not ev.new:
        lines.append("  (no tasks remain)")
    return "\n".join(lines)


def closing_block(ev: FinalSummary, *, plain: bool) -> RenderableType:
    """The model's closing summary, under its own heading, apart from the report."""
    body = Text(clean(ev.text.strip()), style="" if plain else "italic")
    if plain:
        return Group(Text(f"\n{CLOSING_SUMMARY}:"), body)
    return Panel(body, title=CLOSING_SUMMARY, title_align="left", border_style="cyan")


def plan_table(
    tasks: Sequence[PlannedTask], *, plain: bool, accept_cmds: Sequence[str] = ()
) -> Table:
    """The plan: index, task goal, and what judges the task: its acceptance command, else the
    user's `--accept` commands when there are any, else the model by the task's criteria (a
    task with none is judged by nothing: it cannot pass). A word too long for its column is
    folded onto the next line, never cut: approving the plan approves these commands as they
    are shown."""
    table = Table(box=box.ASCII if plain else box.SIMPLE_HEAD)
    table.add_column("#", justify="right")
    table.add_column("Task", ratio=3, overflow="fold")
    table.add_column("Acceptance command", ratio=2, overflow="fold")
    yours = "; ".join(accept_cmds)
    for i, t in enumerate(tasks):
        cmd = t.get("acceptance_cmd")
        if cmd:
            check = Text(clean(cmd))
        elif yours:
            check = Text(f"{clean(yours)} (your --accept)")
        elif criteria := str(t.get("acceptance") or "").strip():
            check = Text(f"(none; the model judges: {clean(criteria)})", style="dim")
        else:  # as the verifier: no claim is trusted
            check = Text("(none; nothing judges it: it cannot pass)", style="dim")
        table.add_row(Text(str(i + 1)), Text(clean(t.get("goal", ""))), check)
    return table


def plan_heading(ev: PlanMade) -> Text:
    """`plan: 2 tasks for: GOAL`."""
    n = len(ev.tasks)
    return Text(f"plan: {n} task{'s' if n != 1 else ''} for: {clean(ev.goal)}", style="bold")


def escalation_block(
    ev: Escalated, *, plain: bool, state: RunState | None = None
) -> RenderableType:
    """The "Needs you" block: what failed (once), what each attempt changed, the choices."""
    if ev.index < 0:  # the final gate: every task passed its own check, the run's did not
        body = Text("Every task passed its own check, but the final check did not: ")
        body.append(clean(ev.goal.removeprefix("the final gate: ")), style="bold")
        return _needs_you(
            body,
            [("Why it did not pass:", _failure(ev, state)), ("What to do next:", ev.next_steps)],
            plain,
        )
    tries = "twice" if ev.attempts in (0, 2) else f"{ev.attempts} times"
    body = Text(f"I tried {tries} and couldn't finish this myself: ")
    body.append(clean(ev.goal), style="bold")
    sections = [("Your hints so far:", "\n".join(f"- {h}" for h in ev.hints))] if ev.hints else []
    sections += [
        ("The model's summary of its last attempt (its words, not verified):", ev.summary),
        ("Why it did not pass (the harness's check):", _failure(ev, state)),
    ]
    changed = _attempt_changes(ev, state)
    if changed:
        sections.append(("What each attempt changed:", changed))
    if ev.diff_stat or not changed:
        sections.append(("Changes it left uncommitted:", ev.diff_stat or "none"))
    sections.append(("What to do next:", _next_steps(ev)))
    return _needs_you(body, sections, plain)


def _needs_you(body: Text, sections: list[tuple[str, str]], plain: bool) -> RenderableType:
    """`body` and its sections, framed as the "Needs you" block."""
    for heading, text in sections:
        body.append(f"\n\n{heading}\n", style="bold")
        body.append(clean(text.strip() or "(nothing)"))
    if plain:
        rule = "=" * 30
        return Group(Text(f"{rule} Needs you {rule}"), body, Text("=" * 71))
    return Panel(body, title="Needs you", title_align="left", border_style="yellow")


def _failure(ev: Escalated, state: RunState | None) -> str:
    """The check's failure; only its first line when the log above shows the same output."""
    shown = (
        [f for f in state.failures.get(ev.index, []) if same_output(f.reason, ev.reason)]
        if state
        else []
    )
    if not shown or "\n" not in ev.reason.strip():
        return ev.reason
    first = ev.reason.strip().splitlines()[0]
    return f"{first}\n(its output is above, under verify attempt {shown[0].attempt})"


def _attempt_changes(ev: Escalated, state: RunState | None) -> str:
    """`attempt 1: edited calc/stats.py` per attempt the log showed; "" when it showed none."""
    edits = state.edits.get(ev.index, {}) if state else {}
    return "\n".join(
        f"attempt {n}: " + (f"edited {', '.join(files)}" if files else "edited no files")
        for n, files in sorted(edits.items())
    )


def _next_steps(ev: Escalated) -> str:
    """The choices when the human is asked now; else how to answer with `agent run --resume`."""
    if not ev.asks:
        return ev.next_steps
    hints = (
        f"(one more attempt with your advice; {ev.hints_left} hint{'s' if ev.hints_left != 1 else ''} left)"
        if ev.hints_left
        else "(no hints left for this task)"
    )
    look = f"{ev.next_steps.strip()}\n" if ev.diff_stat else ""
    return (
        f"{look}- type a hint {hints}\n"
        "- s: skip this task (its changes stay uncommitted)\n"
        "- r [NOTE]: re-plan the remaining work\n"
        "- q: stop here (`agent run --resume` continues later)"
    )


_PROOF_WORDS = {
    "red-green": "red-green (its check failed before the task and passes after)",
    "regression-only": "regression-only (its check already passed before the task)",
}


def proof_lines(tasks: Sequence[TaskReport]) -> str:
    """What each verified task's check proves, one line per task judged by a command (and
    the files of the check itself the task changed: review those)."""
    lines = [
        f"task {i + 1}: {_PROOF_WORDS[proof]}"
        + (
            f", but the task changed its own check: {_listed(changed)}; review them"
            if (changed := t.get("check_changed"))
            else ""
        )
        for i, t in enumerate(tasks)
        if (proof := t.get("proof")) is not None and proof in _PROOF_WORDS
    ]
    return "proof: " + "; ".join(lines) if lines else ""


def _listed(paths: Sequence[str]) -> str:
    return some([clean(p) for p in paths], 3)


def _report_tasks(ev: RunDone, state: RunState) -> RenderableType:
    """Per task: its goal, then what the harness observed, wrapped under the goal."""
    parts: list[RenderableType] = [Text("Run report", style="bold")]
    for i, t in enumerate(ev.tasks):
        st, code, cmd = str(t.get("status", "")), t.get("exit_code"), t.get("acceptance_cmd")
        tries = t.get("attempts", 0)
        lines = Text(f"{clean(t.get('goal', ''))}\n")
        lines.append(st, style=_STATUS_STYLE.get(st, ""))
        lines.append(f", {tries} attempt{'' if tries == 1 else 's'}; ")
        lines.append(
            f"`{clean(cmd)}` -> {_no_code(state, i) if code is None else f'exit {code}'}"
            if cmd
            else "no acceptance command"
        )
        if cmd and code == 0 and st not in ("verified", "nothing_to_do", "skipped"):
            # its command passed: a task_verified hook refused it, or the run stopped first
            # (its commit refused, say); a hook is named only when this session saw it refuse
            failed = state.failures.get(i, [])
            refused = bool(failed) and failed[-1].judge == "hook"
            lines.append(", then refused by a task_verified hook" if refused else ", not verified")
        parts.append(Hanging(f"  {i + 1}. ", lines))
    return Group(*parts)


def _no_code(state: RunState, index: int) -> str:
    """What the check of task `index`, which gave no exit code, did (`no_exit_code`): its last
    failed check's reason says."""
    failed = state.failures.get(index)
    return no_exit_code(failed[-1].reason if failed else "")


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


def role_usage(ev: RunDone) -> str:
    """`by role: planner gpt-4o 1,200 + 80 tokens, $0.0040; executor …` when the roles used
    different models ("" when one model played every role)."""
    roles = ev.usage_by_role
    if len({str(u.get("model", "")) for u in roles.values()}) < 2:
        return ""
    return "by role: " + "; ".join(
        f"{role} {clean(str(u.get('model', '')))} {int(u.get('prompt_tokens', 0)):,} + "
        f"{int(u.get('completion_tokens', 0)):,} tokens, {cost_text(float(u.get('cost_usd', 0)))}"
        for role, u in roles.items()
    )


def report(ev: RunDone, state: RunState) -> list[RenderableType]:
    """The final report: per task what the harness observed, totals, the model's words, next."""
    parts: list[RenderableType] = [Text(), _report_tasks(ev, state)]
    proofs = proof_lines(ev.tasks)
    if proofs:
        parts.append(Text(proofs))
    if state.final_gate is not None:
        parts.append(Text(verify_line(state.final_gate)))
    cached = f" ({ev.cached_tokens:,} cached)" if ev.cached_tokens else ""
    parts.append(
        Text(
            f"{_steps(ev.steps)}, {ev.prompt_tokens:,} prompt{cached} + "
            f"{ev.completion_tokens:,} completion tokens, {cost_text(ev.cost_usd)}"
        )
    )
    roles = role_usage(ev)
    if roles:
        parts.append(Text(roles))
    if state.summaries:
        parts.append(_summaries(state))
    parts.append(Text(f"\n{outcome_line(ev)}", style="bold"))
    parts.append(
        take_it(ev) or Text(f"branch: {ev.branch} (nothing committed on it)" if ev.branch else "")
    )
    return parts


def outcome_line(ev: RunDone) -> str:
    """`run ID verified (exit code 0): why`, without saying the status twice."""
    message = clean(ev.message) if ev.message else ""
    status = "" if message.split(" ", 1)[0].strip(":;,") == ev.status else f" {ev.status}"
    return f"run {ev.run_id}{status} (exit code {ev.exit_code})" + (
        f": {message}" if message else ""
    )


def _local_time(stamp: object) -> str:
    """`2026-11-30 20:15` in local time from an ISO 8601 stamp ("" when there is none)."""
    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return ""


def runs_view(rows: list[dict[str, Any]]) -> RenderableType:
    """`agent runs` for the width: stacked when narrow, else one table line per run. A live
    run's status is `live` in its line (`starting` while it plans, with no id yet); where it
    is (pid, task, step, spend, its worktree) follows on a line of its own, wrapped, so that
    no column gives way to it."""

    def stacked(width: int) -> RenderableType:
        items = []
        for r in rows:  # the status on a wrapped line of its own: never cut at the width
            run_id, status, where = _id_and_status(r)
            head = Text(run_id, style="cyan")
            head.append(f"  {_local_time(r.get('started_at', ''))}")
            steps = _steps(int(r.get("steps", 0) or 0))
            if status != "starting":  # a run still planning has taken no step to count
                status = f"{status}, {steps}"
            body = Text(status + (f": {where}" if where else ""))
            body.append("\n" + clean(str(r.get("goal", ""))))
            items.append(stacked_item(head, body, width))
        return Group(*items)

    def table(width: int) -> RenderableType:
        lives = [
            Text.assemble(Text(run_id, style="cyan"), f" {state}: {where}")
            for run_id, state, where in map(_id_and_status, rows)
            if where
        ]
        return Group(runs_table(rows, width), *lives) if lives else runs_table(rows, width)

    return ByWidth(stacked, table)


def _id_and_status(row: dict[str, Any]) -> tuple[str, str, str]:
    """A run's id, its status (`live` or `starting` for a live run) and where a live run is
    (else ""), each on one line without escape sequences: read from disk (the directory's
    name, state.json), which a command the model ran can write anything to."""
    run_id, status = (" ".join(clean(row.get(k) or "").split()) for k in ("run_id", "status"))
    for state in ("live", "starting"):
        if status.startswith(f"{state}: "):
            return run_id, state, status.removeprefix(f"{state}: ")
    return run_id, status, ""


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def runs_table(rows: list[dict[str, Any]], width: int) -> Table:
    """`agent runs`: one line per run, the goal cut between words to fit `width` columns (a
    live run's status is `live`: runs_view says where it is below the table)."""
    cells = [
        [run_id, _local_time(r.get("started_at", "")), status, str(r.get("steps", 0))]
        for r in rows
        for run_id, status, _ in [_id_and_status(r)]
    ]
    heads = ["run", "started", "status", "steps"]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    # each column is followed by its padding (2) and a divider (1); the goal by its padding
    room = max(width - sum(widths) - 3 * len(widths) - 2, 10)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 2, 0, 0))
    for head in heads:
        table.add_column(
            head,
            no_wrap=True,
            justify="right" if head == "steps" else "left",
            min_width=widths[heads.index(head)],
        )
    table.add_column("goal", no_wrap=True, max_width=room)
    for r, c in zip(rows, cells, strict=False):
        table.add_row(*c, short(r.get("goal", ""), room))
    return table


def memory_table(title: str) -> Table:
    """A borderless table with a title, for the memory commands."""
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )


def recall_table(results: list[Result], repos: Sequence[str] | None = None) -> RenderableType:
    """What `agent recall` found, for the width: stacked when narrow, else a table; with
    `repos` (`--all-repos`), each item's repository as well, in the results' order."""

    def stacked(width: int) -> RenderableType:
        items: list[RenderableType] = [Text("Recalled from long-term memory", style="italic")]
        for n, r in enumerate(results):
            head = Text(f"{r.score:.2f}  {clean(r.kind)}  ")  # stored, so anyone's: cleaned
            head.append(clean(r.id), style="cyan")
            head.append(f"  trust {r.trust:.1f}  hits {r.hit_count}  {clean(r.date[:10])}")
            body = Text(clean(r.gist or r.text))
            stale = "; stale: a file it names changed since" if r.stale else ""
            repo = f"; repository {clean(repos[n])}" if repos is not None else ""
            body.append(f"\n{clean(r.source)}{repo}{stale}", style="dim")
            items.append(stacked_item(head, body, width))
        return Group(*items)

    return ByWidth(stacked, lambda width: _recall_columns(results, repos))


def _recall_columns(results: list[Result], repos: Sequence[str] | None) -> Table:
    """What `agent recall` found: score, kind, id, (repository,) trust, hits, date, the gist
    with its source."""
    table = memory_table("Recalled from long-term memory")
    names = ("score", "kind", "id", *(("repository",) if repos is not None else ()))
    for name in (*names, "trust", "hits", "date", "gist and source"):
        table.add_column(
            name,
            style="cyan" if name == "id" else None,
            no_wrap=name != "gist and source",
            overflow="fold" if name == "gist and source" else "ellipsis",
        )
    for n, r in enumerate(results):
        cell = Text(short(r.gist or r.text, 200))
        stale = "; stale: a file it names changed since" if r.stale else ""
        cell.append(f"\n{short(r.source, 80)}{stale}", style="dim")
        repo = [Text(clean(repos[n]))] if repos is not None else []
        table.add_row(  # an id, a kind or a date an import or a shared server gave: cleaned
            f"{r.score:.2f}",
            Text(clean(r.kind)),
            Text(clean(r.id)),
            *repo,
            f"{r.trust:.1f}",
            str(r.hit_count),
            Text(clean(r.date[:10])),
            cell,
        )
    return table


SCORE_TERMS = ("weight", "refs", "goal", "recent", "size")
SCORE_LEGEND = "score = weight + refs + goal + recent − size"


def working_memory_view(report: dict[str, Any], width: int) -> list[RenderableType]:
    """`agent memory show`: the hot zone with score terms, the cold zone, long-term counts."""
    counts = report["counts"]
    shown: list[RenderableType] = []
    if report["run_id"] is None:
        shown.append(Text("No run has recorded working memory yet."))
    else:
        cold = (
            _cold_table(report, width)
            if report["cold"]
            else Text("Cold zone: empty (nothing was evicted)")
        )
        if width < STACKED_BELOW:
            shown += [_hot_stacked(report, width), Text(""), _cold_stacked(report, width)]
            shown.append(Text(""))
        else:
            shown += [_hot_table(report, width), Text(""), cold, Text("")]
    shown.append(
        Text(
            f"Long-term memory: {counts['episodes']} episode(s), {counts['facts']} "
            f"fact(s), {counts.get('notes', 0)} note(s), "
            f"{counts.get('procedures', 0)} procedure(s), "
            f"{counts['archive']} archived item(s)."
        )
    )
    return shown


def _fitted(
    title: str, heads: tuple[str, ...], rows: list[list[str]], summaries: list[str], width: int
) -> Table:
    """A memory table whose last column, the summary, is cut between words to fit `width`."""
    table = memory_table(title)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]
    room = max(width - sum(widths) - 2 * len(heads) - 1, 10)  # padding and divider
    for head in (*heads, "summary"):
        table.add_column(
            head, no_wrap=True, justify="left" if head in ("id", "kind", "summary") else "right"
        )
    for row, summary in zip(rows, summaries, strict=False):
        table.add_row(*row, short(summary, room))
    return table


def _hot_title(report: dict[str, Any]) -> str:
    stats = report["stats"]
    return (
        f"Hot zone of run {report['run_id']} (step {stats.get('step')}, "
        f"{stats.get('tokens')} tokens; * pinned)\n{SCORE_LEGEND}"
    )


def _hot_stacked(report: dict[str, Any], width: int) -> RenderableType:
    """The hot zone, one header line per item (id, kind, score and its terms), then its text."""
    items: list[RenderableType] = [Text(_hot_title(report))]
    for i in report["hot"]:
        head = Text(i["id"], style="cyan")
        weight, refs, goal, recent, size = (f"{i[t]:.2f}" for t in SCORE_TERMS)
        head.append(
            f"  {i['kind']}{'*' if i['pinned'] else ''}  score {i['score']:.2f} = {weight} + "
            f"{refs} + {goal} + {recent} − {size}  {i['tokens']} tokens"
        )
        items.append(stacked_item(head, Text(clean(i["summary"])), width))
    return Group(*items)


def _cold_stacked(report: dict[str, Any], width: int) -> RenderableType:
    """The cold zone, one header line per item (id, kind, when evicted), then its text."""
    if not report["cold"]:
        return Text("Cold zone: empty (nothing was evicted)")
    items: list[RenderableType] = [Text(f"Cold zone: {len(report['cold'])} item(s)")]
    for e in report["cold"]:
        head = Text(e["id"], style="cyan")
        head.append(f"  {e.get('kind', '')}  evicted at step {e.get('step_evicted', '')}")
        items.append(stacked_item(head, Text(clean(e.get("summary", ""))), width))
    return Group(*items)


def _hot_table(report: dict[str, Any], width: int) -> Table:
    heads = ("id", "kind", "score", *SCORE_TERMS, "tokens")
    rows = [
        [
            i["id"],
            i["kind"] + ("*" if i["pinned"] else ""),
            *(f"{i[c]:.2f}" for c in ("score", *SCORE_TERMS)),
            str(i["tokens"]),
        ]
        for i in report["hot"]
    ]
    return _fitted(
        _hot_title(report),
        heads,
        rows,
        [i["summary"] for i in report["hot"]],
        width,
    )


def _cold_table(report: dict[str, Any], width: int) -> Table:
    rows = [[e["id"], e.get("kind", ""), str(e.get("step_evicted", ""))] for e in report["cold"]]
    return _fitted(
        f"Cold zone: {len(report['cold'])} item(s)",
        ("id", "kind", "step evicted"),
        rows,
        [e.get("summary", "") for e in report["cold"]],
        width,
    )


def heading(title: str) -> Text:
    """A section heading of a command's output."""
    return Text(title, style="bold")


def settings_view(
    values: dict[str, Any], sources: dict[str, str], unread: bool = False
) -> list[Text]:
    """`agent doctor`'s settings: every key, its value (`(not set)` for none), where it came
    from; `unread`: the settings could not be read, so what is listed is the keys' defaults."""
    keys = " (keys for ~/.agentrc and <repo>/.agentrc; environment: AGENT_<KEY>)"
    if unread:
        keys = " not read (see the settings check below); the keys and their defaults:"
    lines = [Text.assemble(heading("settings"), (keys, "dim"))]
    width = max((len(key) for key in values), default=0)
    for key, value in values.items():
        if isinstance(value, bool):  # as the TOML of an .agentrc spells it
            value = "true" if value else "false"
        elif isinstance(value, list):
            value = ", ".join(map(str, value)) if value else "(none)"
        shown = "(not set)" if value is None else clean(value)
        lines.append(
            Text.assemble(
                f"  {key:<{width}} {shown:<40} ", (f"({sources.get(key, 'default')})", "dim")
            )
        )
    return lines


def check_line(name: str, passed: bool, text: str) -> Text:
    """One of `agent doctor`'s checks: ok or FAIL, its name, what it found."""
    mark = ("ok  ", "green") if passed else ("FAIL", "red")
    return Text.assemble("  ", mark, f" {name:<12} {clean(text)}")
