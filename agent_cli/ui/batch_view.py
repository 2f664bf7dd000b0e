"""A batch on the terminal: a live table of its runs, one line per finished run off a terminal,
and the summary table at the end."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rich.live import Live
from rich.table import Table

from agent_cli.core.text import clean, short
from agent_cli.ui.piped import PipedConsole


@dataclass(frozen=True)
class BatchRow:
    """What the table shows of one run of the batch."""

    index: int
    goal: str
    status: str
    task: int
    tasks: int
    steps: int
    cost_usd: float
    run_id: str = ""
    note: str = ""  # the kept worktree, or how to resume
    killed: str = ""  # how its process was killed by a signal ("" when it exited)


def batch_table(rows: list[BatchRow], title: str, notes: bool = False) -> Table:
    """The runs of a batch as a table (with the run ids when `notes`; what to do next with
    each is said below it, by `next_lines`)."""
    table = Table(title=title, title_justify="left", expand=False)
    for name in ("#", "goal", "status", "task", "steps", "cost"):
        table.add_column(name, justify="right" if name in ("#", "steps", "cost") else "left")
    if notes:
        table.add_column("run", no_wrap=True, min_width=20)  # whole: it is to be copied
    for r in rows:
        task = f"{r.task}/{r.tasks}" if r.tasks else "-"
        cells = [str(r.index), short(clean(r.goal), 48), r.status, task, str(r.steps)]
        cells.append(f"${r.cost_usd:.4f}")
        if notes:
            cells.append(r.run_id or "-")
        table.add_row(*cells)
    return table


def next_lines(rows: list[BatchRow]) -> list[str]:
    """What to do next with each run that says so, one wrapped line each (a command to copy
    is never cut by a column's width)."""
    return [f"{r.index}. {clean(r.note)}" for r in rows if r.note]


class BatchView:
    """The table, redrawn in place on a terminal; a line per finished run elsewhere."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.terminal = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        # a terminal's width (or COLUMNS); off one, wide enough for the run ids and what next
        width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
        self.console = PipedConsole(highlight=False, markup=False, emoji=False, width=width)
        self._live: Live | None = None
        self._said: set[int] = set()

    def update(self, rows: list[BatchRow]) -> None:
        """Show the runs as they are now."""
        if self.terminal:
            if self._live is None:
                self._live = Live(
                    batch_table(rows, self.title), console=self.console, refresh_per_second=4
                )
                self._live.start()
            else:
                self._live.update(batch_table(rows, self.title))
            return
        for r in rows:
            if r.index not in self._said and r.status not in ("waiting", "starting", "running"):
                self._said.add(r.index)
                print(
                    f"[{r.index}/{len(rows)}] {r.status}: {short(clean(r.goal), 60)}"
                    + (f" (run {r.run_id})" if r.run_id else "")
                    + (f": {r.killed}" if r.killed else ""),
                    flush=True,
                )

    def summary(self, rows: list[BatchRow], headline: str, warnings: Sequence[str] = ()) -> None:
        """The final table, what to do next with each run, `warnings` (runs whose merges may
        conflict) and the one line that says how the batch ended."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self.console.print(batch_table(rows, self.title, notes=True))
        for line in next_lines(rows):
            self.console.print(line, overflow="fold")
        for line in warnings:
            self.console.print(f"note: {line}", overflow="fold")
        self.console.print(headline)
