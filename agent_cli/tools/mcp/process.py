"""A stdio server's own process, found by the stderr pipe it was given, and whether it runs.

The SDK starts the server in a session of its own and keeps the process to itself. A server
that dies while a child of its own still holds its stdout never closes the connection, so
its end is seen here instead: the process that is this one's child, leads its own session
and writes its stderr to the connection's pipe is the server (or the bubblewrap around it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerProcess:
    """A process, told apart from a later one given the same pid by when it started."""

    pid: int
    started: int


def find(stderr_inode: int) -> ServerProcess | None:
    """The child of this process that leads its own session with its stderr on the pipe
    `stderr_inode`; None when there is none (not Linux, or it is gone already)."""
    me, pipe = os.getpid(), f"pipe:[{stderr_inode}]"
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat(int(name))
        if fields is None or int(fields[1]) != me or fields[3] != name:
            continue
        try:
            if os.readlink(f"/proc/{name}/fd/2") == pipe:
                return ServerProcess(int(name), int(fields[19]))
        except OSError:
            continue
    return None


def running(process: ServerProcess) -> bool:
    """Whether `process` still runs (a zombie has ended)."""
    fields = _stat(process.pid)
    return fields is not None and fields[0] != "Z" and int(fields[19]) == process.started


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name: state, parent, group, session…"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return fields if len(fields) > 19 else None
