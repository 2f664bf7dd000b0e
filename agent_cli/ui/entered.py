"""What a human entered at a question: the line typed, or every line of a paste at once.

A terminal in its line mode hands a program one line per read, and a paste of several lines
arrives at once. Read a line at a time, a paste's first line answered the question, each later
line a later question (a blank one stopping the run), and what no question took was left to
the shell once `agent` exited, to run there. So on a terminal, once the first line is read,
whatever is already waiting is read with it, and whatever follows within PASTE_GAP (a long
paste comes in parts, as the program takes them): one entry, which a question takes or
refuses whole.

That input is read with the terminal out of its line mode for the moment: in line mode a
paste's last line without a newline would stay in the terminal, unread until Enter. The line
mode is put back before anything else happens, a signal included (`stopping.held`).
Bracketed paste (the terminal marking a paste with `ESC[200~` and `ESC[201~`) is not used: a
terminal in line mode echoes the marks as keys (`^[[200~`), and a run killed before it could
switch them off would leave the terminal marking the pastes of whatever reads it next.
"""

from __future__ import annotations

import contextlib
import os
import select
import termios
from dataclasses import dataclass
from typing import IO

from agent_cli.ui import stopping

TTY_LINE = 4095  # the bytes a Linux terminal keeps of one line being typed (N_TTY_BUF_SIZE - 1)
PASTE_GAP = 0.1  # seconds: how soon the next part of a paste comes after the last one read


@dataclass(frozen=True)
class Entry:
    """The lines entered at one question, each without its line end."""

    lines: tuple[str, ...]
    ended: bool  # the last line ended with a newline (else the cursor is still after it)
    cut: bool  # a line from a terminal filled TTY_LINE bytes: the terminal dropped its end

    @property
    def text(self) -> str:
        """The lines joined by newlines, as they were entered."""
        return "\n".join(self.lines)

    @property
    def pasted(self) -> bool:
        """Whether more than one line came at once."""
        return len(self.lines) > 1


def read_entry(stream: IO[str]) -> Entry | None:
    """The next line of `stream` and, on a terminal, what came with it; None at the end of
    input. What was waiting is read as bytes, those that are not UTF-8 as lone surrogates."""
    line = stream.readline()
    if not line:
        return None
    fd = _terminal(stream)
    text = line if fd is None else line + _waiting(fd, getattr(stream, "encoding", None) or "utf-8")
    lines = tuple(text.removesuffix("\n").split("\n"))
    cut = fd is not None and any(
        len(x.encode("utf-8", "surrogateescape")) >= TTY_LINE for x in lines
    )
    return Entry(lines, text.endswith("\n"), cut)


def _terminal(stream: IO[str]) -> int | None:
    """The file descriptor of `stream` when it is a terminal."""
    try:
        fd = stream.fileno()
        return fd if os.isatty(fd) else None
    except (OSError, ValueError):  # no file behind it (a StringIO), or closed
        return None


def _waiting(fd: int, encoding: str) -> str:
    """What is waiting on terminal `fd`, and what follows within PASTE_GAP of it."""
    got = bytearray()
    with stopping.held():
        try:
            line_mode, now = termios.tcgetattr(fd), termios.tcgetattr(fd)
        except (OSError, termios.error):
            return ""
        now[3] &= ~termios.ICANON
        now[6][termios.VMIN], now[6][termios.VTIME] = 0, 0
        try:
            termios.tcsetattr(fd, termios.TCSANOW, now)
            while select.select([fd], [], [], PASTE_GAP)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                got += chunk
        except (OSError, termios.error):  # the terminal closed: what came is all there is
            pass
        finally:
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, line_mode)
    return got.decode(encoding, "surrogateescape")
