"""One agent run per repository: a lock file holding the owner's pid and start time."""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from agent_cli.errors import WorkspaceError

# The kernel gives process start times in clock ticks after a boot time rounded to the second.
_START_TIME_SLACK_S = 2.0


class RunLock:
    """An exclusive lock file; a lock left by a dead process is taken over."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._token: str | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._token is not None

    def acquire(self) -> None:
        """Take the lock, or raise WorkspaceError naming the live run that holds it."""
        if self.held:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._guard():
            holder = self.holder()
            if holder is not None and _alive(holder):
                raise _held_error(self.path, holder)
            _unlink_quietly(self.path)  # absent, unreadable, or left by a dead process
            token = uuid.uuid4().hex
            self._create(token)
            self._token = token

    def release(self) -> None:
        """Give the lock up; a lock that another run has since taken over is left alone."""
        if not self.held:
            return
        with self._guard():
            holder = self.holder()
            if holder is not None and holder.get("token") == self._token:
                _unlink_quietly(self.path)
        self._token = None

    def holder(self) -> dict | None:
        """The lock file's contents (pid, started, token), or None when absent or unreadable."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
            return None
        return data

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _create(self, token: str) -> None:
        record = {"pid": os.getpid(), "started": time.time(), "token": token}
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, json.dumps(record).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Serialise check-and-take-over between processes with a flock on the lock's directory."""
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _held_error(path: Path, holder: dict) -> WorkspaceError:
    pid = holder["pid"]
    since = ""
    if isinstance(holder.get("started"), (int, float)):
        since = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(holder["started"]))
    return WorkspaceError(
        f"another agent run (pid {pid}) is running in this repository{since}",
        f"wait for it to finish or stop it (kill {pid}); a lock left by a run that died "
        f"is taken over automatically ({path})",
    )


def _alive(holder: dict) -> bool:
    """Whether the process that wrote the lock still runs (not exited, not a zombie, pid not reused)."""
    pid = holder["pid"]
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc to look deeper; trust the signal check
    state, started_at = stat
    if state == "Z":
        return False
    locked_at = holder.get("started")
    if isinstance(locked_at, (int, float)) and started_at > locked_at + _START_TIME_SLACK_S:
        return False  # this pid belongs to a newer process than the one that took the lock
    return True


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """The process state letter and its start time (epoch seconds) from /proc, if readable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
    except (OSError, StopIteration):
        return None
    fields = raw.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    ticks = int(fields[19])
    return fields[0], int(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
