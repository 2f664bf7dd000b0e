"""One agent run per repository: an flock on the lock file, held for the whole run.

The kernel drops an flock when its holder dies, however it dies, so a lock left by a
killed run is simply free: nothing has to guess from pids whether its holder still lives.
Whether a run is live is asked of the lock itself (`live_holder` tries to take it for a
moment); the pid and start time written into the file only name the holder, in the refusal
and in `agent runs`, with the run's id once it has one. A pid is never evidence: a killed
run's may belong to another process by now.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from agent_cli.core.atomic import UnsafeFile, open_regular, read_text
from agent_cli.core.errors import StorageError, WorkspaceError

# Waits between tries at an flock another process holds: a probe's lasts a moment, a run's lasts.
PROBE_RETRIES_S = (0.01, 0.02, 0.04, 0.0)
MAX_HOLDER_BYTES = 64 * 1024  # the holder's few fields
GOAL_CHARS = 1000  # of a new run's goal, in its lock: well within MAX_HOLDER_BYTES as JSON


class RunLock:
    """An exclusive, non-blocking flock on `path`; the file is removed on release."""

    def __init__(self, path: str | Path, repo: str = "") -> None:
        self.path = Path(path)
        self.repo = repo  # the repository the run is of, named in the file (a shared `home`)
        self._fd: int | None = None
        self._started = 0.0

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def check(self) -> None:
        """Refuse now when another run holds the lock, creating nothing."""
        if self.held:
            return
        try:
            fd = open_regular(self.path, "r")
        except FileNotFoundError:
            return
        except NotADirectoryError:
            raise _file_on_the_way(self.path) from None
        except (OSError, UnsafeFile) as e:
            raise _unusable(self.path, e) from None
        try:
            _flock_or_refuse(fd, self)
        finally:
            os.close(fd)  # closing it drops the probe's lock

    def acquire(self) -> None:
        """Take the lock, or raise WorkspaceError naming the run that holds it."""
        while not self.held:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = open_regular(self.path, "rw")  # never through a link, never a FIFO's wait
            except UnsafeFile as e:
                raise _unusable(self.path, e) from None
            except (NotADirectoryError, FileExistsError):
                raise _file_on_the_way(self.path) from None
            except OSError as e:
                raise StorageError(
                    f"cannot write {self.path}: {e.strerror or e}",
                    "make the state directory writable",
                ) from None
            try:
                _flock_or_refuse(fd, self)
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, self.path):  # else a releasing run unlinked it meanwhile: again
                self._fd, self._started = fd, time.time()
                _write_holder(fd, self._holder())
            else:
                os.close(fd)

    def release(self) -> None:
        """Remove the lock file and give the lock up; a file that cannot be removed (a state
        directory made read-only meanwhile) stays, unlocked, which is as free as no file."""
        # given up before the close: a Ctrl-C taken right after it (a second one while the run
        # stops) leaves no number to close again, which may be another file's by then
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still holding it, so no one waits on it
        except OSError:
            pass
        finally:
            os.close(fd)

    def name(self, run_id: str, goal: str = "") -> None:
        """Write the run's id beside the holder's pid (a new run gets its id after the lock),
        and its `goal` when given, cut at GOAL_CHARS, for `agent runs` to show while the run
        has saved nothing yet (the caller masks what it must)."""
        if self._fd is not None:
            said = {"goal": goal[:GOAL_CHARS]} if goal else {}
            _write_holder(self._fd, {**self._holder(), "run_id": run_id, **said})

    def _holder(self) -> dict[str, Any]:
        holder: dict[str, Any] = {"pid": os.getpid(), "started": self._started}
        return {**holder, "repo": self.repo} if self.repo else holder

    def holder(self) -> dict[str, Any] | None:
        """The pid and start time of the holder written in the file, or None."""
        try:
            data = json.loads(read_text(self.path, MAX_HOLDER_BYTES))
        except (OSError, ValueError):  # UnsafeFile too: a link, a FIFO, not UTF-8
            return None
        return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _flock_or_refuse(fd: int, lock: RunLock) -> None:
    if not _flock(fd, fcntl.LOCK_EX):
        raise _held_error(lock.path, lock.holder())


def _flock(fd: int, mode: int) -> bool:
    """Take an flock of `mode` on `fd` without waiting on a holder; False when one holds it.

    Another process's `live_holder` holds the lock shared for a moment: a few short retries
    tell that probe from a run that holds it."""
    for delay in PROBE_RETRIES_S:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(delay)
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _write_holder(fd: int, holder: dict[str, Any]) -> None:
    data = json.dumps(holder).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def live_holder(path: str | Path) -> dict[str, Any] | None:
    """The holder written in the lock file at `path` while someone holds its flock, else None.

    A run that ends releases the lock and removes the file; one that was killed leaves the
    file behind, unlocked, naming a pid that is gone or, later, another process's. The probe
    takes the lock shared and drops it at once, so two probes never see each other."""
    lock = RunLock(path)
    try:
        fd = open_regular(lock.path, "r")
    except (OSError, UnsafeFile):  # no file: no run; one that cannot be read names no one either
        return None
    try:
        if _flock(fd, fcntl.LOCK_SH):
            return None
    finally:
        os.close(fd)  # closing it drops the probe's lock
    return lock.holder() or {"pid": 0}


def _unusable(path: Path, why: Exception) -> StorageError:
    """The refusal of a lock path that is no regular file of its own (a link, a FIFO, a
    directory): the lock would write through it, or wait on it for ever."""
    return StorageError(
        f"cannot take the run lock: {why}",
        "remove it (the agent makes the lock file itself)",
    )


def _file_on_the_way(path: Path) -> StorageError:
    """The refusal of a lock path that a file above it makes impossible (another tool's
    `~/.agent` under `home`): that file is what to move, not the lock file, which is not there."""
    blocking = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
    if blocking is None:  # gone meanwhile: say the path as it was refused
        return StorageError(
            f"cannot take the run lock {path}: a part of its path is not a directory",
            "make the state directory a directory, or set home to another directory",
        )
    return StorageError(
        f"cannot take the run lock {path}: {blocking} is a file, not a directory",
        f"move {blocking} aside, or set home to another directory",
    )


def _held_error(path: Path, holder: dict[str, Any] | None) -> WorkspaceError:
    if holder is None:
        return WorkspaceError(
            "another agent run is running in this repository",
            f"wait for it to finish ({path} is locked)",
        )
    pid = holder["pid"]
    since = ""
    if isinstance(holder.get("started"), (int, float)):
        since = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(holder["started"]))
    return WorkspaceError(
        f"another agent run (pid {pid}) is running in this repository{since}",
        f"wait for it to finish or stop it (kill {pid}); the lock is the "
        f"kernel's and goes when that process ends ({path})",
    )
