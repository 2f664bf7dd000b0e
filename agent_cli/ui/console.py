"""The run's console: a log that stays (with a spinner on a terminal), or JSON lines; prompts.

On a terminal and in a log file the run reads the same: one line per tool call as it
completes, the checks, a diff stat under each verified task, and one report at the end. A
terminal adds colour, a spinner for what is running now (erased when it ends, so nothing
stale stays in the scrollback) and the model's words as they stream in. What it draws is in
`render.py`; this module decides where and when, and asks the user.
"""

from __future__ import annotations

import io
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Literal

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.padding import Padding
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text

from agent_cli.core.events import (
    Escalated,
    Event,
    FinalSummary,
    Notice,
    PlanMade,
    Planning,
    RunDone,
    TaskStarted,
    ToolCalled,
    ToolRan,
)
from agent_cli.core.text import clean, short, typed
from agent_cli.ui import stopping
from agent_cli.ui.entered import TTY_LINE, Entry, read_entry
from agent_cli.ui.piped import PipedConsole
from agent_cli.ui.progress import RunState, arg_summary
from agent_cli.ui.render import (
    closing_block,
    diff_text,
    escalation_block,
    event_line,
    plan_heading,
    plan_table,
    report,
    runs_view,
)
from agent_cli.ui.shown import kept_event, shown_event, shown_text

Mode = Literal["live", "plain", "json"]
MAX_ASKS = 5
CUT_LINE = (
    f"filled the {TTY_LINE} bytes a terminal keeps of a typed line, so its end was cut: "
    'type a shorter hint, or q and then `agent run --resume --hint "$(cat FILE)"`'
)
STREAM_INDENT = "    "


def pick_mode(json_flag: bool, stream: IO[str] | None = None) -> Mode:
    """json with --json; plain off a terminal or with NO_COLOR / TERM=dumb; live otherwise."""
    if json_flag:
        return "json"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return "plain"
    return "live" if _isatty(sys.stdout if stream is None else stream) else "plain"


def make_console(
    mode: Mode,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    *,
    stdin: IO[str] | None = None,
    console: Console | None = None,
    verbose: bool = False,
    secrets: tuple[str, ...] = (),
) -> RunConsole:
    """A RunConsole for `mode`; `console` replaces the rich Console its text and prompts use."""
    if mode not in ("live", "plain", "json"):
        raise ValueError(f"unknown console mode {mode!r}")
    return RunConsole(
        mode,
        out or sys.stdout,
        err or sys.stderr,
        stdin=stdin,
        console=console,
        verbose=verbose,
        secrets=secrets,
    )


def command_console(markup: bool = False, soft_wrap: bool = False) -> Console:
    """A console for a command's own output on stdout (doctor, recall, memory)."""
    return PipedConsole(highlight=False, markup=markup, soft_wrap=soft_wrap, width=_pipe_width())


def _pipe_width() -> int | None:
    """120 columns for a pipe or a file (rich would use 80); a terminal or COLUMNS decides else."""
    return None if _isatty(sys.stdout) or os.environ.get("COLUMNS") else 120


def print_out(*renderables: RenderableType) -> None:
    """Print what `render` drew for a command, on stdout."""
    console = command_console()
    for renderable in renderables:
        console.print(renderable)


def stdin_is_terminal() -> bool:
    """Whether a human can answer prompts on this process's standard input."""
    return sys.stdin is not None and _isatty(sys.stdin)


def can_ask() -> bool:
    """Whether a human can read a question and answer it: stdin is a terminal, and so is
    stdout, stderr, or (both sent to a file: `agent run ... > run.log 2>&1`) the controlling
    terminal the question is then written to."""
    if not stdin_is_terminal():
        return False
    if _isatty(sys.stdout) or _isatty(sys.stderr):
        return True
    tty = _controlling_terminal()
    if tty is None:
        return False
    tty.close()
    return True


def _controlling_terminal() -> IO[str] | None:
    """The process's controlling terminal (`/dev/tty`) opened to write a question on; None
    when it has none."""
    try:
        return open("/dev/tty", "w", encoding="utf-8", errors="replace")
    except OSError:
        return None


def confirmed(question: str) -> bool:
    """Ask `question` on the terminal; whether the line typed was y or yes. The end of input
    (Ctrl-D) is a no, as is any line that is no text (bytes that are not UTF-8), and a paste
    of several lines, read whole (`entered.py`). With stdout sent to a file and stderr a
    terminal, the question goes to stderr, where the human reads; with both sent to a file,
    to the controlling terminal."""
    tty = None
    if _isatty(sys.stdout):
        out: IO[str] = sys.stdout
    elif _isatty(sys.stderr):
        out = sys.stderr
    else:
        out = tty = _controlling_terminal() or sys.stdout
    try:
        _undecodable_as_surrogates(sys.stdin)
        out.write(f"{question} [y/N] ")
        out.flush()
        entry = read_entry(sys.stdin)
        if entry is None or not entry.ended:
            out.write("\n")  # the question's line ends where Ctrl-D (or a paste) left it
            out.flush()
    finally:
        if tty is not None and tty is not sys.stdout:
            tty.close()
    return entry is not None and not entry.pasted and entry.text.strip().lower() in ("y", "yes")


def _isatty(stream: IO[str]) -> bool:
    """Whether `stream` is a terminal (False for closed or file-less streams)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def print_runs(rows: list[dict[str, Any]]) -> None:
    """`agent runs` laid out for the terminal's width (120 columns off a terminal)."""
    console = PipedConsole(highlight=False, markup=False, emoji=False, width=_pipe_width())
    console.print(runs_view(rows))


def stream_view(text: str) -> RenderableType:
    """The model's streamed words: dim, indented, wrapped to the width under the log."""
    return Padding(Text(clean(text).strip("\n"), style="dim"), (0, 0, 0, len(STREAM_INDENT)))


class Tail:
    """The last lines of a renderable that fit the terminal, under a dim line saying how many
    are above: a preview taller than the terminal shows its newest words (rich's Live would cut
    it at the bottom, and a preview that scrolled could not be erased)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options.update(height=None), pad=False)
        room = max(2, (options.height or console.height) - 1)  # a row for the cursor
        if len(lines) > room:
            above = len(lines) - room + 1
            lines = lines[-(room - 1) :]
            yield Text(f"{STREAM_INDENT}… {above} more lines above", style="dim")
        for line in lines:
            yield from line
            yield Segment.line()


def whole_words(text: str) -> str:
    """`text` up to its last whitespace: a word still streaming in (maybe the start of a key,
    not yet recognisable) is not shown before it is whole."""
    cut = max(text.rfind(c) for c in " \n\t")
    return text[: cut + 1] if cut >= 0 else ""


def streamed_once(streamed: str, text: str) -> bool:
    """Whether `text` is what was just streamed, or its start (a run keeps the first
    closing.MAX_CHARS characters of a longer summary), so it needs drawing only once."""
    words, kept = " ".join(streamed.split()), " ".join(text.split())
    return bool(kept) and words.startswith(kept)


class Activity:
    """The spinner line: what is running now and for how long."""

    def __init__(self, label: str) -> None:
        self.label, self.started = label, time.monotonic()
        self.spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        elapsed = int(time.monotonic() - self.started)
        text = Text(short(self.label, max(options.max_width - 12, 20)), style="dim")
        if elapsed:
            text.append(f" ({elapsed}s)", style="dim")
        self.spinner.text = text
        yield self.spinner.render(console.get_time())


def activity(ev: Event, state: RunState) -> str | None:
    """What runs after `ev` until the next event, for the spinner; None when nothing does."""
    match ev:
        case Planning():
            return "planning: the model is writing the plan"
        case TaskStarted():
            return f"{state.label(ev.index)}: the model is working"
        case ToolCalled():
            return f"{ev.name} {arg_summary(ev.arguments)}"
        case ToolRan() if ev.name == "finish":
            cmd = state.task(ev.index).get("acceptance_cmd")
            return f"checking: {cmd}" if cmd else "checking the task"
        case ToolRan():
            return f"{state.label(ev.index)}: the model is working"
    return None


class RunConsole:
    """Receives every run event and shows it in one of three modes; also asks the user.

    Everything it shows, in every mode, is redacted first (`core/redact.py`): each event's
    strings at any depth, the model's streamed words, and what a prompt quotes; off `--json`,
    again as it shows (`shown.py`): without the escape sequences that could split a key, a
    tool call's arguments decoded. `secrets` are the configured values to mask beside the
    known key shapes; the wiring sets them once the settings are read."""

    def __init__(
        self,
        mode: Mode,
        out: IO[str],
        err: IO[str],
        *,
        stdin: IO[str] | None = None,
        console: Console | None = None,
        verbose: bool = False,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.mode, self.out, self.err, self.stdin = mode, out, err, stdin
        self.verbose = verbose
        self.secrets = secrets
        self.state = RunState()
        self._reader_gone = False
        self._live: Live | None = None
        self._activity: Activity | None = None
        self._streamed = ""  # the model's words streamed since the last event
        self._stream_live: Live | None = None  # their preview, erased when the next event comes
        self._shown_plan: PlanMade | None = None
        # the notices since the human answered an escalation (None once anything else came)
        self._since_answer: list[Notice] | None = None
        # answers typed ahead: lines that came at once with the answer to a yes/no question,
        # each an answer of that question, which the next yes/no questions take in turn
        self._ahead: list[str] = []
        if console is None:
            file = err if mode == "json" else out
            # logs and pipes get wide lines (rich would wrap at 80); a terminal keeps its width
            wide = None if _isatty(file) or os.environ.get("COLUMNS") else 120
            console = (
                PipedConsole(file=file, highlight=False, markup=False, emoji=False)
                if mode == "live"
                else PipedConsole(
                    file=file,
                    highlight=False,
                    markup=False,
                    emoji=False,
                    force_terminal=False,
                    color_system=None,
                    width=wide,
                )
            )
        self.console = console
        # Where the questions go: with the log in a file or a pipe (`agent run > run.log`,
        # `| tee run.log`) and stderr a terminal, there, where the human reads, instead of
        # into the log; with stderr sent there too (`> run.log 2>&1`) and stdin a terminal,
        # to the controlling terminal; and what they ask about too (the plan, the rejected
        # task), unless a pipe may be showing the log (tee, a pager). The log records each
        # question answered.
        self.asker, self._log_unseen = self.console, False
        self._tty: IO[str] | None = None
        logged = self.console.file
        if mode != "live" and not _isatty(logged):
            if mode == "plain" and _isatty(err):
                self.asker = PipedConsole(file=err, highlight=False, markup=False, emoji=False)
            elif _isatty(stdin if stdin is not None else sys.stdin):
                self._tty = _controlling_terminal()
            if self._tty is not None:
                self.asker = PipedConsole(
                    file=self._tty, highlight=False, markup=False, emoji=False
                )
            self._log_unseen = self.asker is not self.console and not _is_pipe(logged)

    def emit(self, ev: Event) -> None:
        """Show one event, redacted.

        When what reads the output is gone (a closed pipe: the `agent batch` that started the
        run was killed, `| head` has read enough), the run stops as if interrupted, its state
        saved to resume, and shows nothing more."""
        if self._reader_gone:
            return
        try:
            lines = self.mode == "json"  # JSON lines carry the text as it came (kept_event)
            self._emit(kept_event(ev, self.secrets) if lines else shown_event(ev, self.secrets))
        except BrokenPipeError:
            self._reader_gone = True
            _to_devnull(self.out)  # nothing left to flush at exit either
            raise KeyboardInterrupt from None

    def _emit(self, ev: Event) -> None:
        self.state.apply(ev)
        if self._since_answer is not None:
            self._since_answer = self._since_answer + [ev] if isinstance(ev, Notice) else None
        if self.mode == "json":
            self.out.write(ev.model_dump_json() + "\n")
            self.out.flush()
            return
        now = activity(ev, self.state) if self.mode == "live" else None
        keep = isinstance(ev, Notice) and self._activity is not None  # a retry: still running
        if now is None and not keep:
            self._stop_spinner()
        shown = shown_text(self._streamed, self.secrets)
        kept = not (isinstance(ev, FinalSummary) and streamed_once(shown, ev.text))
        self._end_stream(keep=kept)  # a streamed closing summary is drawn once: in its box
        self._show(ev)
        if now is not None:
            self._spin(now)

    def stream_text(self, delta: str) -> None:
        """Show a piece of the model's reply as it streams in (on a terminal only)."""
        if self.mode != "live" or not delta:
            return
        self._stop_spinner()
        self._streamed += delta
        view = Tail(stream_view(shown_text(whole_words(self._streamed), self.secrets)))
        if self._stream_live is None:
            # transient: the preview is erased when the next event decides where the words stay
            self._stream_live = Live(view, console=self.console, auto_refresh=False, transient=True)
            self._stream_live.start(refresh=True)
        else:
            self._stream_live.update(view, refresh=True)

    def drop_stream(self) -> None:
        """Forget the words streamed since the last event, their preview erased: the request
        that streamed them failed and is sent again, and only the reply that counts is kept."""
        self._end_stream(keep=False)

    def close(self) -> None:
        """Take the spinner off the screen and end any streamed line."""
        self._stop_spinner()
        self._end_stream()
        if self._tty is not None:
            self._tty.close()
            self._tty, self.asker = None, self.console

    def approve_plan(self, plan_event: PlanMade) -> bool:
        """Show the plan with every acceptance command and ask whether to run it."""
        plan_event = shown_event(plan_event, self.secrets)
        with self._paused():
            if self._shown_plan != plan_event:
                self._show_plan(plan_event)
            if self._log_unseen:
                self._show_plan(plan_event, to=self.asker)
            return (
                self._ask(
                    "Run this plan? [y/N] ", {"y": "y", "yes": "y", "n": "n", "no": "n", "": "n"}
                )
                == "y"
            )

    def approve_command(self, cmd: str) -> str:
        """Ask whether to run `cmd`: "y", "n" or "a" (always allow this exact command)."""
        answers = {"y": "y", "yes": "y", "n": "n", "no": "n", "a": "a", "always": "a"}
        with self._paused():
            question = Text("Run `")
            question.append(shown_text(cmd, self.secrets), style="bold")
            question.append("`? [y]es / [n]o / [a]lways this command ")
            return self._ask(question, answers)

    def approve_tool(self, call: str) -> str:
        """Ask whether to run a tool of an MCP server: "y", "n" or "a" (always this tool)."""
        answers = {"y": "y", "yes": "y", "n": "n", "no": "n", "a": "a", "always": "a"}
        with self._paused():
            question = Text("Call `")
            question.append(shown_text(call, self.secrets), style="bold")
            question.append("`? [y]es / [n]o / [a]lways this tool of this server ")
            return self._ask(question, answers)

    def ask_escalation(self, ev: Escalated) -> str:
        """Ask what to do about a rejected task; the line as typed ("q" at the end of input,
        or after MAX_ASKS lines that are no text: a NUL, bytes that are not UTF-8, which
        could be neither saved with the run nor sent to the model).

        The keys a terminal sends as escape sequences (an arrow, Home, Esc: this prompt has
        no line editing) and other control characters are taken out of the line, so a hint
        is saved and sent as the human sees it echoed; a line of nothing else (an Up arrow
        then Enter, hoping for the last answer) is asked again, not taken as a hint.

        A paste of several lines is one answer, its lines as pasted (a hint, or `r` and a
        note): what came with the first line is read with it (`entered.py`), so no line of it
        is left to answer a later question or to reach the shell after the run.

        A terminal holds at most TTY_LINE bytes of a line being typed and drops the rest, so a
        line that long from a terminal was cut (a long hint pasted in): it is asked again, with
        the way to give such a hint whole, rather than sent cut short.

        With the log where the human does not read it, the notices since the last answer (why
        the question is asked again: the model kept the plan, the task's hints are spent) are
        shown where the question is, before it."""
        hint = "type a hint, " if ev.hints_left else "(no hints left for this task) "
        question = Text(f"What now? {hint}s, r [NOTE] or q: ", style="bold")
        ev = shown_event(ev, self.secrets)
        told, self._since_answer = self._since_answer or [], None
        with self._paused():
            if self._ahead:  # yes/no answers are no hint: they answer nothing here
                self.asker.print(
                    Text(f"{len(self._ahead)} answer(s) typed ahead are not taken for this one")
                )
                self._ahead = []
            if self._log_unseen:
                self._print(escalation_block(ev, plain=True, state=self.state), to=self.asker)
                for notice in told:
                    if (said := event_line(notice, self.state)) is not None:
                        self._print(said, to=self.asker)
            for _ in range(MAX_ASKS):
                entry = self._entry(question, eof="q")
                if entry is None:
                    return "q"
                words, why = typed(entry.text)
                if not why and entry.cut:
                    line = "a line of that paste" if entry.pasted else "that line"
                    self.asker.print(Text(f"{line} {CUT_LINE}"), soft_wrap=True)
                    continue
                if not why:
                    self._since_answer = []
                    return words
                entered = "that paste" if entry.pasted else "that line"
                self.asker.print(Text(f"{entered} {why}: type it again as plain UTF-8 text"))
            return "q"

    # -- drawing --------------------------------------------------------------------------
    def _print(self, *renderables: RenderableType, to: Console | None = None) -> None:
        for r in renderables:
            (to or self.console).print(r, soft_wrap=isinstance(r, Text) and self.mode != "live")

    def _show(self, ev: Event) -> None:
        if isinstance(ev, PlanMade):
            if self._shown_plan != ev:
                self._show_plan(ev)
        elif isinstance(ev, Escalated):
            self._print(escalation_block(ev, plain=self.mode != "live", state=self.state))
        elif isinstance(ev, FinalSummary):
            self._print(closing_block(ev, plain=self.mode != "live"))
        elif isinstance(ev, RunDone):
            if ev.run_id:  # without a run (planning failed) the error line says it all
                self._print(*report(ev, self.state))
        elif (line := event_line(ev, self.state)) is not None:
            self._print(line)
            if self.verbose and isinstance(ev, ToolRan) and ev.diff:
                self._print(diff_text(ev.diff))

    def _show_plan(self, ev: PlanMade, to: Console | None = None) -> None:
        table = plan_table(ev.tasks, plain=self.mode != "live", accept_cmds=ev.accept_cmds)
        self._print(plan_heading(ev), table, to=to)
        if ev.success_criteria:
            self._print(Text(f"success when: {clean(ev.success_criteria)}"), to=to)
        for cmd in ev.accept_cmds:
            self._print(Text(f"and always checked at the end: {clean(cmd)}"), to=to)
        if to is None:
            self._shown_plan = ev

    def _end_stream(self, keep: bool = True) -> None:
        """Take the preview off the screen and, if `keep`, print the streamed words for good."""
        live, text, self._stream_live, self._streamed = self._stream_live, self._streamed, None, ""
        if live is None:
            return
        live.stop()
        if keep and text.strip():
            self.console.print(stream_view(shown_text(text, self.secrets)))

    # -- the spinner ----------------------------------------------------------------------
    def _spin(self, label: str) -> None:
        if self._live is not None and self._activity is not None:
            if self._activity.label != label:
                self._activity = Activity(label)
                self._live.update(self._activity, refresh=True)
            return
        self._activity = Activity(label)
        # transient: the spinner is erased when it stops, so only the log stays on screen
        self._live = Live(
            self._activity,
            console=self.console,
            refresh_per_second=8,
            transient=True,
            redirect_stdout=True,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)

    def _stop_spinner(self) -> None:
        live, self._live, self._activity = self._live, None, None
        if live is not None:
            live.stop()

    @contextmanager
    def _paused(self) -> Iterator[None]:
        """Take the spinner off the screen while the user answers, then bring it back.

        Not after Ctrl-C at the prompt: the spinner would say the command asked about runs
        while the run stops, and, drawn on the line the `^C` ended, erase the question from
        the log when it went. That line is ended instead, and the run's last words follow."""
        label = self._activity.label if self._activity is not None else None
        self._stop_spinner()
        self._end_stream()
        try:
            yield
        except KeyboardInterrupt:
            self.asker.print()
            raise
        if label is not None:
            self._spin(label)

    def _entry(self, question: str | Text, eof: str) -> Entry | None:
        """`question`, then what was entered (`entered.py`); None at the end of input (a
        newline ends the question's line), which the log records as the answer `eof`."""
        stream = self.stdin if self.stdin is not None else sys.stdin
        _undecodable_as_surrogates(stream)
        # A question is printed whole before Ctrl-C stops what asked it: rich empties its
        # buffer after writing it, so a KeyboardInterrupt raised between the two left the
        # question in the buffer, and the next thing printed (the line that ends the `^C`)
        # printed it again.
        with stopping.held((signal.SIGINT,)):
            self.asker.print(question, end="", soft_wrap=True)
            self.asker.file.flush()
        entry = read_entry(stream)
        logged = self.asker is not self.console  # the log says what was asked and answered
        if entry is None:
            self.asker.print()
            if logged:
                self.console.print(Text.assemble(question, f"{eof} (end of input)"))
            return None
        if not entry.ended:  # a paste's last line had no newline: the cursor is after it
            self.asker.print()
        if logged:
            answer = shown_text(entry.text, self.secrets).rstrip()
            self.console.print(Text.assemble(question, answer))
        return entry

    def _ask(self, question: str | Text, answers: dict[str, str]) -> str:
        """Ask until an answer in `answers` (at most MAX_ASKS times); EOF or no answer is "n".

        Several lines at once that are each an answer word (`TYPED_AHEAD`: `y`, `n`, `a`, ...)
        are answers typed ahead: the first answers this question, the next ones the next yes/no
        questions in turn (an escalation question drops them). Any other lines at once (a
        paste) answer nothing: they are dropped whole and the question is asked again, so that
        no line of a paste approves a command or a plan, nor is left to answer the next
        question."""
        choices = " or ".join(k for k in answers if len(k) == 1)
        for _ in range(MAX_ASKS):
            if self._ahead:
                entry: Entry | None = self._typed_ahead(question)
            else:
                entry = self._entry(question, eof="n")
            if entry is None:
                return "n"
            keys = [line.strip().lower() for line in entry.lines]
            if entry.pasted and all(key in TYPED_AHEAD for key in keys):
                self._ahead = list(entry.lines[1:])  # answers typed ahead, not a paste
                keys = keys[:1]
            elif entry.pasted:
                self.asker.print(
                    Text(f"{len(entry.lines)} lines came at once (a paste): answer {choices}")
                )
                continue
            answer = answers.get(keys[0])
            if answer is not None:
                return answer
            self.asker.print(Text(f"please answer {choices}"))
        return "n"

    def _typed_ahead(self, question: str | Text) -> Entry:
        """The next answer typed ahead, shown after `question` as if typed there (and logged
        with it where the log is not the terminal)."""
        line = self._ahead.pop(0)
        self.asker.print(Text.assemble(question, line))
        if self.asker is not self.console:
            self.console.print(Text.assemble(question, shown_text(line, self.secrets)))
        return Entry((line,), ended=True, cut=False)


# The words that answer the yes/no questions: lines of nothing else that come at once are
# answers typed ahead (each answers a question in turn), not a paste.
TYPED_AHEAD = frozenset(("y", "yes", "n", "no", "a", "always"))


def _undecodable_as_surrogates(stream: IO[str]) -> None:
    """Have `stream` hand bytes that are not UTF-8 over as lone surrogates rather than raise.

    Python reads a terminal that way in the C locale, but strictly under a UTF-8 one such as
    en_US.UTF-8, where one stray byte typed at a prompt (a Latin-1 key, a pasted binary)
    ended the run with an internal error; as surrogates the line is refused and asked again
    like any other answer that is no text."""
    if getattr(stream, "errors", None) != "strict" or not isinstance(stream, io.TextIOWrapper):
        return
    try:
        stream.reconfigure(errors="surrogateescape")
    except (OSError, ValueError):  # a closed stream: the read that follows says so
        pass


def _is_pipe(stream: IO[str]) -> bool:
    """Whether `stream` is a pipe or a socket (something may show what it carries)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _to_devnull(out: IO[str]) -> None:
    """Point `out`'s file descriptor at /dev/null (a closed pipe's writes and flushes fail)."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
