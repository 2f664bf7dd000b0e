"""Command output as a terminal leaves it on the screen, read as it arrives.

A command run for the model writes for a terminal: colours and cursor moves as escape
sequences, progress bars redrawn in place after a carriage return (pip, tqdm, npm, cargo,
curl). Kept as written they are noise to the model, and thousands of redraws of one line
spend the output's budget before the lines that matter arrive. So escape sequences and
control characters are dropped, a line ending CRLF ends LF, a line redrawn after a
carriage return keeps only its last drawing, and a backspace moves back over the character
before it, which what follows writes over. Output comes in chunks that may cut an escape
sequence or a CRLF in two, so what may still change (the line being drawn, an escape cut
short) is held until the next chunk, within a bound: a line that runs on without a newline
is passed on once it is longer than MAX_LINE_HELD characters.
"""

from __future__ import annotations

import re

MAX_LINE_HELD = 4096
_MAX_ESCAPE_HELD = 2048  # an OSC hyperlink carries its address
# CSI (colours, cursor moves), OSC ended by BEL or ST (a title, a hyperlink), two-character
# escapes and charset selections (not `ESC [` or `ESC ]`, which begin the first two)
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-Z\\^-~]"
)
# what is left of an escape sequence at the end of a chunk that cut it short
_CUT_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[ -/]*)\Z")
# control characters but tab, newline and carriage return (a bell, backspaces, a stray ESC)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class Screen:
    """Turns chunks of decoded output into the text a terminal would show of them."""

    def __init__(self) -> None:
        self.escape = ""  # an escape sequence the last chunk ended inside
        self.line = ""  # the line being drawn: no newline yet, so a carriage return may redraw it

    def feed(self, text: str) -> str:
        """The text that is final once `text` arrived; what may still change is held."""
        text = self.escape + text
        self.escape = ""
        if "\x1b" in text:  # (the checks with `in` keep plain output as fast as it comes)
            text = _ESCAPE.sub("", text)
            cut = _CUT_ESCAPE.search(text, max(0, len(text) - _MAX_ESCAPE_HELD))
            if cut:
                self.escape, text = text[cut.start() :], text[: cut.start()]
        text = self.line + text
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        end = text.rfind("\n") + 1
        done, self.line = text[:end], _last_drawing(text[end:])
        if "\r" in done:
            done = "\n".join(_last_drawing(line.rstrip("\r")) for line in done.split("\n"))
        if len(self.line) > MAX_LINE_HELD:
            done, self.line = done + self.line, ""
        return _backspaced(done) if "\b" in done else done

    def finish(self) -> str:
        """What is held when the output ends: the last drawing of an unended line."""
        line, self.line, self.escape = self.line, "", ""
        return _backspaced(_last_drawing(line.rstrip("\r")))


def without_escapes(text: str) -> str:
    """`text` without the escape sequences a terminal acts on (colours, cursor moves, titles),
    for text read whole that may still hold them (a check's output read for its summary)."""
    return _ESCAPE.sub("", text) if "\x1b" in text else text


def without_controls(text: str) -> str:
    """`text` without control characters but tab, newline and carriage return (a bell,
    backspaces, an ESC no sequence followed): applied to the output kept, not to every chunk."""
    return _CONTROL.sub("", text)


def _backspaced(text: str) -> str:
    """`text` with each backspace taking the cursor one character back on its line, so that
    what follows is written over what it passed (a spinner's `|\\b/\\b-` leaves `-`)."""
    lines = []
    for line in text.split("\n"):
        out: list[str] = []
        at = 0
        for char in line:
            if char == "\b":
                at = max(0, at - 1)
                continue
            if at < len(out):
                out[at] = char
            else:
                out.append(char)
            at += 1
        lines.append("".join(out))
    return "\n".join(lines)


def _last_drawing(line: str) -> str:
    """A line (no newline) as the last carriage return in it leaves it; one at its very end
    is kept, since a newline may follow it in the next chunk (CRLF)."""
    cr = line.rfind("\r", 0, len(line) - 1)
    return line[cr + 1 :] if cr != -1 else line
