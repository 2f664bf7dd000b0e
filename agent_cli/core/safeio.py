"""Files the agent reads or appends to where someone else may have put something else.

A state directory, a recording or an import may hold a symlink to a file elsewhere, a FIFO
that blocks for ever, a device that never ends, or a file too large to read. Each is opened
without following a link, without blocking, must be a regular file, and is read only up
to a bound; anything else is an UnsafeFile (a ValueError) that says what was found.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from agent_cli.core import strictjson

MiB = 1024 * 1024
DEFAULT_MAX_BYTES = 64 * MiB
_MODES = {"r": os.O_RDONLY, "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT}
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class UnsafeFile(ValueError):
    """A file that is not a regular file, is a symlink, is too large, or is not UTF-8."""


def open_regular(path: str | Path, mode: str = "r", max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """A descriptor on `path` ("r" to read, "a" to append, created 0644), never via a link.

    UnsafeFile when `path` is a symlink, not a regular file, or larger than `max_bytes`;
    FileNotFoundError (an OSError) when a file to read is missing."""
    flags = _MODES[mode] | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafeFile(f"{path} is a symbolic link; it is not followed") from None
        if e.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise UnsafeFile(f"{path} is a FIFO, not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise UnsafeFile(f"{path} is {kind}, not a regular file")
        if info.st_size > max_bytes:
            raise UnsafeFile(f"{path} holds {info.st_size:,} bytes (at most {max_bytes:,})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The whole of the regular file `path`, at most `max_bytes` (a file growing meanwhile too)."""
    fd = open_regular(path, "r", max_bytes)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeFile(f"{path} holds more than {max_bytes:,} bytes")
    return data


def read_text(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """`read_bytes` decoded as UTF-8; UnsafeFile naming the offset of the first bad byte."""
    data = read_bytes(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeFile(f"{path} is not UTF-8 text (byte {e.start})") from None


def read_json(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """The JSON value in `path`, parsed by `strictjson` (bounded nesting); UnsafeFile or ValueError."""
    text = read_text(path, max_bytes)
    try:
        return strictjson.loads(text)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def append_bytes(path: str | Path, data: bytes, *, durable: bool) -> None:
    """Append `data` in one write() loop to the regular file `path` (created when missing)."""
    fd = open_regular(path, "a", max_bytes=2**63 - 1)
    size = os.fstat(fd).st_size
    try:
        while data:
            data = data[os.write(fd, data) :]
        if durable:
            os.fsync(fd)
    except OSError:
        _truncate_quietly(fd, size)  # a full disk must not leave half a line behind
        raise
    finally:
        os.close(fd)


def _truncate_quietly(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass
