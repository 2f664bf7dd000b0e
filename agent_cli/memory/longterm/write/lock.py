"""One writer at a time for an embedded store that several runs share: a file lock, and who wrote last.

Chroma's embedded store (a PersistentClient) keeps its vector index in each process's memory
and saves it from there: two processes writing at once, or one writing from an index loaded
before another's write, leave an index that no longer matches the database ("Error finding
id"). So every change to the store happens while holding an exclusive flock on
`<store>/write.lock`, and the holder writes a new generation token into it as it lets go. A
process whose client was opened at another generation opens it again before it reads or
writes (chroma.py does that), so nobody works from an index that predates someone's write.

A read holds the lock shared (`shared`): Chroma's reads write too (a query first applies to
the process's index what the log holds beyond it, and saves the index), so a read made while
another process writes can save an index over the one being written: the store's
`link_lists.bin` then grows until the disk is full, or the reading process dies of a
segmentation fault in Chroma's query. Readers share the lock with each other, never with a
writer.

The lock file is opened without following a link and must be a regular file
(`atomic.open_regular`). Waiting is bounded: past `wait_s`, StoreBusy (a MemoryUnavailable,
so a run goes on and its writes wait in the outbox for the next run). The kernel drops an
flock when its holder dies, so a killed writer never leaves the store locked.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_cli.core import atomic
from agent_cli.core.errors import MemoryUnavailable, StorageError

FILE = "write.lock"
WAIT_S = 30.0  # a run's whole write phase (episode, procedures, notes, facts, snapshot) fits
POLL_S = 0.02
MAX_BYTES = 4096


class StoreBusy(MemoryUnavailable):
    """Another process kept the store's write lock for longer than this one could wait."""


class WriteLock:
    """The exclusive flock on `<store>/write.lock`, re-entrant in one object, and the
    generation token its last holder left."""

    def __init__(self, store: Path, wait_s: float = WAIT_S) -> None:
        self.path = Path(store) / FILE
        self.wait_s = wait_s
        self._fd: int | None = None
        self._depth = 0
        self._sharing = 0  # nested shared holds of this object
        self._wrote = False  # a hold that changed the store leaves a new generation
        self.current = ""  # the generation as this object last held the lock, or left it

    def generation(self) -> str:
        """The token the last writer left ("" when nobody has written under the lock yet)."""
        try:
            return atomic.read_bytes(self.path, MAX_BYTES).decode("ascii", "replace").strip()
        except FileNotFoundError:
            return ""
        except (OSError, atomic.UnsafeFile) as e:
            raise self._unusable(e) from None

    @contextmanager
    def held(self, writes: bool = True) -> Iterator[str]:
        """Hold the lock (waiting at most `wait_s`), yielding the generation found; a hold that
        `writes` leaves a new one on the way out. Nested uses in one object share the outer hold."""
        if self._depth == 0:
            self._acquire()
        self._depth += 1
        self._wrote |= writes
        try:
            if self._depth == 1:
                self.current = self.generation()
            yield self.current
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._release()

    @contextmanager
    def shared(self) -> Iterator[str]:
        """Hold the lock shared, to read: no other process writes meanwhile (waiting at most
        `wait_s` for one that does), while other readers may. Yields the generation. Within a
        hold of this object's (shared or exclusive) it holds nothing more; an exclusive hold
        is never taken within a shared one (it would wait for this very hold)."""
        if self._depth or self._sharing:
            self._sharing += 1
            try:
                yield self.generation()
            finally:
                self._sharing -= 1
            return
        fd = self._wait_for(fcntl.LOCK_SH)
        self._sharing = 1
        try:
            yield self.generation()
        finally:
            self._sharing = 0
            os.close(fd)  # closing it gives the lock up

    def _acquire(self) -> None:
        if self._sharing:
            raise AssertionError("an exclusive hold within a shared one waits for itself")
        self._fd = self._wait_for(fcntl.LOCK_EX)

    def _wait_for(self, mode: int) -> int:
        """The lock file's descriptor, once it holds the flock `mode` (exclusive or shared)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = self._descriptor(shared=mode == fcntl.LOCK_SH)
        except (OSError, atomic.UnsafeFile) as e:
            raise self._unusable(e) from None
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreBusy(
                        f"memory store at {self.path.parent} is busy: another run kept writing "
                        f"to it for more than {self.wait_s:g}s",
                        "try again once it has written (a run keeps what it learns in its "
                        "outbox meanwhile); if no other agent runs, move the store aside",
                    ) from None
                time.sleep(POLL_S)
            except BaseException:
                os.close(fd)
                raise

    def _descriptor(self, shared: bool) -> int:
        """The lock file, opened to append (a writer leaves its token there); to read when
        it is held shared and exists: flock needs no more, and a store on a read-only
        filesystem is then refused by Chroma with the hint that fits (place.storage_error)."""
        if shared:
            try:
                return atomic.open_regular(self.path, "r", MAX_BYTES)
            except FileNotFoundError:
                pass
        return atomic.open_regular(self.path, "a", MAX_BYTES)

    @property
    def holding(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def mark_written(self) -> None:
        """The current hold changed the store after all: it leaves a new generation."""
        if self._depth:
            self._wrote = True

    def _release(self) -> None:
        fd, self._fd = self._fd, None
        wrote, self._wrote = self._wrote, False
        if fd is None:
            return
        try:
            if not wrote:
                return
            token = secrets.token_hex(8)
            os.ftruncate(fd, 0)  # the descriptor appends: the token is then the whole file
            os.write(fd, (token + "\n").encode("ascii"))
            self.current = token
        finally:
            os.close(fd)  # closing it gives the lock up

    def _unusable(self, e: Exception) -> StorageError:
        """The lock cannot be opened: moving it aside is the way out, unless its directory
        cannot be written (a read-only filesystem, or its permissions), where no lock can be
        made nor moved: then the store is to be used from a copy."""
        store = self.path.parent
        if store.is_dir() and not os.access(store, os.W_OK):  # EROFS too, even for root
            why = e.strerror if isinstance(e, OSError) and e.strerror else e
            return StorageError(
                f"memory store at {store} cannot be written (a read-only filesystem, or its "
                f"permissions), so its write lock cannot be taken: {why}",
                "copy the state directory somewhere writable and point AGENT_HOME at the copy",
            )
        return StorageError(
            f"the memory store's write lock cannot be used: {e}", f"move {self.path} aside"
        )
