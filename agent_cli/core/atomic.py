"""Crash-safe file writes: whole files replaced atomically, JSONL lines appended durably."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from agent_cli.core import safeio

_NEW_FILE_MODE = 0o644


def write_atomic(path: str | Path, data: str | bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a part.

    `durable` flushes the file and the rename to the disk before returning, so the new file
    outlives a power cut too; without it a killed process still leaves a whole file."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
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
    # Never through a link, never into a FIFO: the file must be a regular one (safeio).
    safeio.append_bytes(path, (text + "\n").encode("utf-8"), durable=durable)


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
