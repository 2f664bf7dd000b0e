"""A real pseudo-terminal for a child process, and a small screen that replays what it drew.

`Screen` understands what rich writes to a terminal (text, CR, LF, cursor up, erase line,
colours, cursor visibility), enough to tell what stays on screen and in the scrollback after
a spinner erased itself.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time

CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b[@-_]")
SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Screen:
    """Lines of text with a cursor; with `columns`, text wraps there as a terminal wraps it."""

    def __init__(self, columns: int | None = None) -> None:
        self.lines: list[list[str]] = [[]]
        self.row = self.col = 0
        self.columns = columns

    def feed(self, data: str) -> Screen:
        pos = 0
        for m in CSI.finditer(data):
            self._text(data[pos : m.start()])
            self._control(m.group(1) or "", m.group(2) or "")
            pos = m.end()
        self._text(data[pos:])
        return self

    def _text(self, text: str) -> None:
        for ch in text:
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self.row, self.col = self.row + 1, 0
                while len(self.lines) <= self.row:
                    self.lines.append([])
            elif ch >= " ":
                if self.columns and self.col >= self.columns:  # the terminal wraps the line
                    self._text("\n")
                line = self.lines[self.row]
                line.extend(" " * (self.col + 1 - len(line)))
                line[self.col] = ch
                self.col += 1

    def _control(self, args: str, code: str) -> None:
        n = int(args) if args.isdigit() else None
        if code == "A":
            self.row = max(self.row - (n or 1), 0)
        elif code == "K":
            line = self.lines[self.row]
            if n == 2:
                line.clear()
            elif not n:
                del line[self.col :]
        elif code == "G":
            self.col = (n or 1) - 1

    def text(self) -> str:
        """Everything on screen and in the scrollback, trailing blanks removed."""
        return "\n".join("".join(line).rstrip() for line in self.lines).rstrip() + "\n"


# `[sys.executable, *CONTROLLING, "-m", "agent_cli", ...]`: Python makes the pty on its stdin
# the controlling terminal of its new session (as a login shell's is), then runs the program
CONTROLLING = [
    "-c",
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])",
]


def run_on_pty(
    argv: list[str],
    *,
    cwd,
    env: dict[str, str],
    columns: int = 200,
    timeout: float = 120,
    answers: list[tuple[str, str]] = (),
    stdout=None,
    stderr=None,
) -> tuple[int, str]:
    """Run `argv` with a pseudo-terminal as stdin, stdout and stderr; (exit code, raw output).

    `answers` are (prompt, keys) pairs in order: the keys are typed once the prompt shows.
    `stdout`, an open file, takes the child's standard output instead (`agent run > run.log`),
    and `stderr` its standard error (`2>&1`). The pty is not the child's controlling terminal
    unless `argv` makes it so (`CONTROLLING` before a Python program's arguments).
    """
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in env.items() if k != "NO_COLOR"} | {
        "TERM": "xterm-256color",
        "COLUMNS": str(columns),
        "LINES": "50",
    }
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=slave if stdout is None else stdout,
        stderr=slave if stderr is None else stderr,
        start_new_session=True,
    )
    os.close(slave)
    chunks, deadline, typed, answers = [], time.monotonic() + timeout, 0, list(answers)
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 0.5)[0]:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
        if answers and answers[0][0] in b"".join(chunks).decode("utf-8", "replace")[typed:]:
            typed = len(b"".join(chunks).decode("utf-8", "replace"))
            os.write(master, answers[0][1].encode())
            answers = answers[1:]
    else:
        proc.kill()
    code = proc.wait(timeout=30)
    os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")
