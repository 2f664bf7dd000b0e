"""The run's console: a live view on a terminal, plain lines otherwise, or JSON lines; prompts.

What it draws is in `render.py`; this module decides where and when, and asks the user.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import IO, Iterator, Literal

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from agent_cli.events import Escalated, Event, PlanMade, RunDone, TaskStarted, ToolCalled, ToolRan
from agent_cli.render import (RunState, clean, escalation_block, event_line,
                              live_view, plan_table, report)

Mode = Literal["live", "plain", "json"]
MAX_ASKS = 5


def pick_mode(json_flag: bool, stream: IO[str] | None = None) -> Mode:
    """json with --json; plain off a terminal or with NO_COLOR / TERM=dumb; live otherwise."""
    if json_flag:
        return "json"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return "plain"
    return "live" if _isatty(sys.stdout if stream is None else stream) else "plain"


def make_console(mode: Mode, out: IO[str] | None = None, err: IO[str] | None = None, *,
                 stdin: IO[str] | None = None, console: Console | None = None) -> "RunConsole":
    """A RunConsole for `mode`; `console` replaces the rich Console its text and prompts use."""
    if mode not in ("live", "plain", "json"):
        raise ValueError(f"unknown console mode {mode!r}")
    return RunConsole(mode, out or sys.stdout, err or sys.stderr, stdin=stdin, console=console)


def command_console(markup: bool = False, soft_wrap: bool = False) -> Console:
    """A console for a command's own output on stdout (doctor, recall, memory)."""
    return Console(highlight=False, markup=markup, soft_wrap=soft_wrap)


def print_out(*renderables: RenderableType) -> None:
    """Print what `render` drew for a command, on stdout."""
    console = command_console()
    for renderable in renderables:
        console.print(renderable)


def stdin_is_terminal() -> bool:
    """Whether a human can answer prompts on this process's standard input."""
    return sys.stdin is not None and _isatty(sys.stdin)


def _isatty(stream: IO[str]) -> bool:
    """Whether `stream` is a terminal (False for closed or file-less streams)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class RunConsole:
    """Receives every run event and shows it in one of three modes; also asks the user."""

    def __init__(self, mode: Mode, out: IO[str], err: IO[str], *,
                 stdin: IO[str] | None = None, console: Console | None = None) -> None:
        self.mode, self.out, self.err, self.stdin = mode, out, err, stdin
        self.state = RunState()
        self._live: Live | None = None
        self._shown_plan: PlanMade | None = None
        if console is None:
            file = err if mode == "json" else out
            # logs and pipes get wide lines (rich would wrap at 80); a terminal keeps its width
            wide = None if _isatty(file) or os.environ.get("COLUMNS") else 120
            plain = {} if mode == "live" else {"force_terminal": False, "color_system": None,
                                               "width": wide}
            console = Console(file=file, highlight=False, markup=False, emoji=False, **plain)
        self.console = console

    def emit(self, ev: Event) -> None:
        """Show one event."""
        self.state.apply(ev)
        if self.mode == "json":
            self.out.write(ev.model_dump_json() + "\n")
            self.out.flush()
        elif self.mode == "plain":
            self._emit_plain(ev)
        else:
            self._emit_live(ev)

    def close(self) -> None:
        """Stop the live view, leaving its last frame on screen."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def approve_plan(self, plan_event: PlanMade) -> bool:
        """Show the plan with every acceptance command and ask whether to run it."""
        with self._paused():
            if self._shown_plan != plan_event:
                self._show_plan(plan_event)
            return self._ask("Run this plan? [y/N] ", {"y": "y", "yes": "y", "n": "n",
                                                        "no": "n", "": "n"}) == "y"

    def approve_command(self, cmd: str) -> str:
        """Ask whether to run `cmd`: "y", "n" or "a" (always allow this exact command)."""
        answers = {"y": "y", "yes": "y", "n": "n", "no": "n", "a": "a", "always": "a"}
        with self._paused():
            question = Text("Run `")
            question.append(clean(cmd), style="bold")
            question.append("`? [y]es / [n]o / [a]lways this command ")
            return self._ask(question, answers)

    def _print(self, *renderables: RenderableType) -> None:
        for r in renderables:
            self.console.print(r, soft_wrap=isinstance(r, Text) and self.mode != "live")

    def _show_plan(self, ev: PlanMade) -> None:
        n = len(ev.tasks)
        self._print(Text(f"plan: {n} task{'s' if n != 1 else ''} for: {clean(ev.goal)}"),
                    plan_table(ev.tasks, plain=self.mode != "live"))
        if ev.success_criteria:
            self._print(Text(f"success when: {clean(ev.success_criteria)}"))
        for cmd in ev.accept_cmds:
            self._print(Text(f"and always checked at the end: {clean(cmd)}"))
        self._shown_plan = ev

    def _emit_plain(self, ev: Event) -> None:
        if isinstance(ev, PlanMade):
            self._show_plan(ev)
        elif isinstance(ev, Escalated):
            self._print(escalation_block(ev, plain=True))
        elif isinstance(ev, RunDone):
            self._print(*report(ev, self.state, plain=True))
        elif (line := event_line(ev, self.state)) is not None:
            self._print(Text(line))

    def _emit_live(self, ev: Event) -> None:
        if isinstance(ev, RunDone):
            if self._live is not None:
                self._live.update(live_view(self.state), refresh=True)
            self.close()
            self._print(*report(ev, self.state, plain=False))
            return
        if isinstance(ev, PlanMade) and self._live is None:
            self._show_plan(ev)
        elif isinstance(ev, Escalated):
            self._print(escalation_block(ev, plain=False))
        elif not isinstance(ev, (ToolCalled, ToolRan)):
            line = event_line(ev, self.state)
            if line is not None:
                self._print(Text(line, style="bold" if isinstance(ev, TaskStarted) else ""))
        if self._live is None and isinstance(ev, TaskStarted):
            self._start_live()
        if self._live is not None:
            self._live.update(live_view(self.state), refresh=True)

    def _start_live(self) -> None:
        self._live = Live(live_view(self.state), console=self.console, refresh_per_second=4,
                          transient=False, redirect_stdout=True, redirect_stderr=False)
        self._live.start(refresh=True)

    @contextmanager
    def _paused(self) -> Iterator[None]:
        """Take the live view off the screen while the user answers, then bring it back."""
        live, self._live = self._live, None
        if live is not None:
            live.transient = True
            live.stop()
        try:
            yield
        finally:
            if live is not None:
                self._start_live()  # a fresh Live: a restarted one would erase the prompt

    def _ask(self, question: str | Text, answers: dict[str, str]) -> str:
        """Ask until an answer in `answers` (at most MAX_ASKS times); EOF or no answer is "n"."""
        stream = self.stdin if self.stdin is not None else sys.stdin
        choices = " or ".join(k for k in answers if len(k) == 1)
        for _ in range(MAX_ASKS):
            self.console.print(question, end="", soft_wrap=True)
            self.console.file.flush()
            line = stream.readline()
            if not line:
                self.console.print()
                return "n"
            answer = answers.get(line.strip().lower())
            if answer is not None:
                return answer
            self.console.print(Text(f"please answer {choices}"))
        return "n"
