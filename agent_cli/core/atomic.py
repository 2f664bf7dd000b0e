"""Files on disk: whole files replaced atomically, lines appended, files from outside read safely.

A state directory, a recording or an import may hold a symlink to a file elsewhere, a FIFO
that blocks for ever, a device that never ends, or a file too large to read. Such files are
opened without following a link, without blocking, must be regular files, and are read only
up to a bound (`open_regular`, `read_bytes`, `read_text`, `read_json`); anything else is an
UnsafeFile (a ValueError) that says what was found.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from agent_cli.core import strictjson

_NEW_FILE_MODE = 0o644


def write_atomic(path: str | Path, data: str | bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a part.

    `durable` flushes the file and the rename to the disk before returning, so the new file
    outlives a power cut too; without it a killed process still leaves a whole file."""
    with replacing(path, durable=durable) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextmanager
def replacing(path: str | Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A new file, written through the stream yielded, that replaces `path` whole when the
    block ends without an error (a symlink at `path` is replaced, its target left alone);
    after an error `path` is as it was and nothing is left behind. A `path` that is (or links
    to) a directory, a device, a FIFO or a socket is an OSError and left alone: replacing
    `/dev/null` or a pipe with a file breaks whatever uses it."""
    path = Path(path)
    _check_replaceable(path)
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


def append_line(path: str | Path, line: str, *, durable: bool = True) -> None:
    """Append one line (a JSONL record) to `path`, flushed to the disk when `durable`."""
    text = line.rstrip("\n")
    if "\n" in text:
        raise ValueError("append_line takes a single line; the text holds a newline")
    # One write() on an O_APPEND descriptor: concurrent appenders never interleave inside a line.
    # Never through a link, never into a FIFO: the file must be a regular one (open_regular).
    append_bytes(path, (text + "\n").encode("utf-8"), durable=durable)


MiB = 1024 * 1024
DEFAULT_MAX_BYTES = 64 * MiB
_MODES = {
    "r": os.O_RDONLY,
    "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
    "rw": os.O_RDWR | os.O_CREAT,
}
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
    """A descriptor on `path` ("r" to read, "a" to append, "rw" to read and write; created
    0644 but to read), never via a link.

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


def _check_replaceable(path: Path) -> None:
    """OSError when `path` exists and is, or links to, something other than a regular file."""
    try:
        info = os.stat(path)  # through a link: what it points at
    except OSError:
        return  # nothing there, or a dangling link: the new file takes its place
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise OSError(errno.EEXIST, f"it is {kind}, not a file to replace", str(path))


def _mode_for(path: Path) -> int:
    """The permission bits the new file gets: the old file's, or rw-r--r-- for a new one."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return _NEW_FILE_MODE


def _fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename itself is done
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
