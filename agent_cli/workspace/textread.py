"""A repository file's text as the model reads it: opened without ever blocking, told binary
by a NUL in its first bytes, UTF-16 with a byte order mark decoded whole, text that is not
UTF-8 (Latin-1, say) shown with its other bytes as \\xNN, and lines read in chunks and
clipped, so that a file of one huge line costs bounded memory."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import IO, Any

from agent_cli.core.errors import ToolError

_BINARY_SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000
_KEPT_LINE_BYTES = 4 * MAX_LINE_CHARS + 4  # UTF-8 enough for MAX_LINE_CHARS characters, and more
_READ_CHUNK_BYTES = 1 << 20
_CONTINUATION = bytes(range(0x80, 0xC0))  # the bytes inside a UTF-8 character, not its first
MAX_WHOLE_BYTES = 5_000_000  # past this a file is neither decoded whole nor searched
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
BINARY = "a binary file"
BOM = "\ufeff"  # a UTF-8 byte order mark, decoded: some editors start files with it


def open_regular(real: Path, text: bool = False, errors: str = "strict") -> IO[Any]:
    """`real` opened for reading without ever blocking; ToolError unless it is a regular file."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError(f"cannot open {real.name}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(
            f"{real.name} is not a regular file (a FIFO, socket or device); it is not opened"
        )
    if text:
        return open(fd, encoding="utf-8", errors=errors, newline="\n")
    return open(fd, "rb")


def looks_binary(real: Path) -> bool:
    with open_regular(real) as f:
        return b"\0" in f.read(_BINARY_SNIFF_BYTES)


def read_range(real: Path, start: int, end: int, errors: str = "strict") -> tuple[list[str], int]:
    """Lines start..end (1-based, inclusive) of a UTF-8 file, each clipped, and its total line
    count. Read in chunks, keeping at most _KEPT_LINE_BYTES of a line: a file of one huge line
    (a minified bundle, a data dump) or of millions of lines costs bounded memory."""
    shown: list[str] = []
    line = 1  # the number of the line the next byte belongs to
    kept, cut = bytearray(), 0  # the line's first bytes, and how many characters past them
    trailing = 0  # the CRs the line ends with so far
    ends_line = True  # whether the file so far ends with a newline
    with open_regular(real) as f:
        while chunk := f.read(_READ_CHUNK_BYTES):
            ends_line, pos = chunk.endswith(b"\n"), 0
            while pos < len(chunk):
                if line > end:  # past the range: only counted
                    line += chunk.count(b"\n", pos)
                    break
                if line < start:  # before it: skipped a chunk at a time where it can be
                    skip = min(start - line, chunk.count(b"\n", pos))
                    for _ in range(skip):
                        pos = chunk.index(b"\n", pos) + 1
                    line += skip
                    if line < start:
                        break
                    continue
                newline = chunk.find(b"\n", pos)
                piece = chunk[pos : len(chunk) if newline == -1 else newline]
                room = max(0, _KEPT_LINE_BYTES - len(kept))
                kept += piece[:room]
                cut += len(piece[room:].translate(None, _CONTINUATION))  # characters, not bytes
                crs = len(piece) - len(piece.rstrip(b"\r"))  # a line's CRs at its end are not shown
                trailing = trailing + crs if crs == len(piece) else crs
                if newline == -1:
                    break
                shown.append(_line_text(kept, cut, trailing, errors))
                kept, cut, trailing, line, pos = bytearray(), 0, 0, line + 1, newline + 1
    if ends_line:  # an empty file, or one whose last line ended: `line` has not begun
        return shown, line - 1
    if start <= line <= end:
        shown.append(_line_text(kept, cut, trailing, errors))
    return shown, line


def _line_text(kept: bytearray, cut: int, trailing: int, errors: str) -> str:
    """A line read as its first bytes and the number of characters past them (the last
    `trailing` of the line's characters are CRs, not shown), clipped to MAX_LINE_CHARS;
    UnicodeDecodeError when the bytes kept are not UTF-8."""
    if len(kept) < _KEPT_LINE_BYTES:  # the whole line
        return clip(bytes(kept).rstrip(b"\r").decode("utf-8", errors), MAX_LINE_CHARS)
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    text = decoder.decode(bytes(kept))  # kept may end inside a character: it counts as cut
    length = len(text) + (1 if decoder.getstate()[0] else 0) + cut - trailing
    if length <= MAX_LINE_CHARS:
        return text[:length]
    return f"{text[:MAX_LINE_CHARS]} [... {length - MAX_LINE_CHARS} characters cut]"


def lines_of(text: str, start: int, end: int) -> tuple[list[str], int]:
    """Lines start..end (1-based, inclusive) of `text`, each clipped, and its line count."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    shown = [clip(line.rstrip("\r"), MAX_LINE_CHARS) for line in lines[start - 1 : end]]
    return shown, len(lines)


def utf16_text(real: Path) -> str | None:
    """The text of a file that starts with a UTF-16 byte order mark (Windows resource files,
    PowerShell scripts) and decodes as UTF-16; None for any other file, or one too large."""
    with open_regular(real) as f:
        mark = f.read(4)
        if mark[:2] not in _UTF16_MARKS or mark == b"\xff\xfe\0\0":  # UTF-32 starts so
            return None
        if os.fstat(f.fileno()).st_size > MAX_WHOLE_BYTES:
            return None
        data: bytes = mark + f.read()
    try:
        text = data.decode("utf-16")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def not_text(real: Path) -> str:
    """What a file that is not UTF-8 text is, for a message."""
    if utf16_text(real) is not None:
        return "a UTF-16 text file"
    return BINARY if looks_binary(real) else "a file that is not UTF-8 text"


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"
