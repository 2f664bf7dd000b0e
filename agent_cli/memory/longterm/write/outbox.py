"""What a run meant to keep in long-term memory while its server was down, kept for later.

A run whose memory server cannot be reached goes on without it (fallback.py). The writes
it makes meanwhile (its episode, procedures, notes, facts) are appended to the outbox,
`<state>/memory-outbox.jsonl`, one JSON line each, secrets masked, with the store they
were meant for. The next run that reaches that store sends them first, oldest first, and
the outbox keeps only what did not go (nothing, when all did). An entry for another store
(memory_url changed since) waits for that store. A line that cannot be read, or a write
the store refuses, is dropped: it would fail the same way every time. A dropped line is kept
aside, as it was, in `<outbox>.rejected` for the user to look at. The outbox is opened
without following a link and must be a regular file of at most MAX_BYTES (`atomic.open_regular`).

Runs sharing a state directory share its outbox: appending takes a shared flock on
`<outbox>.lock` and sending an exclusive one, so no line appended while another run sends is
lost in its rewrite; a run that finds another sending leaves the sending to it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_cli.core import atomic, strictjson
from agent_cli.core.atomic import append_line, write_atomic
from agent_cli.core.errors import AgentError, MemoryUnavailable, StorageError
from agent_cli.core.models import Episode
from agent_cli.core.protocols import LongTermStore
from agent_cli.core.redact import redact_all

WRITES = ("add_episode", "add_fact", "add_procedure", "curate")
MAX_BYTES = 32 * atomic.MiB


class Outbox:
    """The writes waiting for the store named `store` (its URL or path), in `path`."""

    def __init__(self, path: Path, store: str, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        self.store = store
        self.secrets = secrets
        self._had_rejected = False  # the last read set lines aside: the outbox is rewritten

    def keep(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Append one write (`op` is one of WRITES) to send later."""
        if op not in WRITES:
            raise ValueError(f"not a long-term memory write: {op}")
        args = tuple(a.model_dump(mode="json") if isinstance(a, Episode) else a for a in args)
        entry = {"store": self.store, "op": op, "args": list(args), "kwargs": kwargs}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._locked(fcntl.LOCK_SH):
                line = json.dumps(redact_all(entry, self.secrets), ensure_ascii=False)
                append_line(self.path, line)
        except atomic.UnsafeFile as e:
            raise StorageError(
                f"the memory outbox cannot be written: {e}", f"move {self.path} aside"
            ) from None

    @property
    def lock_path(self) -> Path:
        """The file whose flock keeps appending and sending apart."""
        return self.path.with_name(self.path.name + ".lock")

    @contextmanager
    def _locked(self, how: int) -> Iterator[bool]:
        """Hold the outbox's flock (`how`: LOCK_SH, or LOCK_EX | LOCK_NB: whether it was had)."""
        fd = atomic.open_regular(self.lock_path, "a", 4096)
        try:
            try:
                fcntl.flock(fd, how)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # closing it gives the lock up

    @property
    def rejected_path(self) -> Path:
        """Where lines that cannot be read are kept aside."""
        return self.path.with_name(self.path.name + ".rejected")

    def _entries(self) -> list[dict[str, Any]]:
        try:
            data = atomic.read_bytes(self.path, MAX_BYTES)
        except FileNotFoundError:
            return []
        except (OSError, atomic.UnsafeFile) as e:
            raise StorageError(
                f"the memory outbox cannot be read: {e}", f"move {self.path} aside"
            ) from None
        out, rejected = [], []
        for raw in data.splitlines():
            entry = _entry(raw)
            if entry is None:
                if raw.strip():
                    rejected.append(raw)
            else:
                out.append(entry)
        self._had_rejected = bool(rejected)
        if rejected:
            self._set_aside(rejected)
        return out

    def _set_aside(self, lines: list[bytes]) -> None:
        """Keep unreadable lines for the user, and out of the outbox from now on."""
        atomic.append_bytes(self.rejected_path, b"".join(x + b"\n" for x in lines), durable=True)

    def send(self, memory: LongTermStore) -> int:
        """Make every write waiting for this store on `memory`, oldest first; how many went.
        A write the store refuses (or that cannot be read back) is dropped; when the store
        cannot be reached, the writes not yet made stay and MemoryUnavailable is raised. Nothing
        is sent while another run sends."""
        if not self.path.exists() and not self.path.is_symlink():
            return 0
        try:
            with self._locked(fcntl.LOCK_EX | fcntl.LOCK_NB) as mine:
                return self._send(memory) if mine else 0
        except atomic.UnsafeFile as e:
            raise StorageError(
                f"the memory outbox cannot be read: {e}", f"move {self.lock_path} aside"
            ) from None

    def _send(self, memory: LongTermStore) -> int:
        entries = self._entries()
        mine = [e for e in entries if e.get("store") == self.store]
        if not mine:
            if self._had_rejected:
                self._rewrite(entries)
            return 0  # nothing to send, nothing to rewrite
        others = [e for e in entries if e.get("store") != self.store]
        done = sent = 0
        try:
            for entry in mine:
                try:
                    _make(memory, entry)
                    sent += 1
                except MemoryUnavailable:
                    raise
                except (AgentError, ValueError, TypeError):
                    pass  # it would fail the same way every time
                done += 1
        finally:
            self._rewrite(others + mine[done:])
        return sent

    def _rewrite(self, entries: list[dict[str, Any]]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        write_atomic(self.path, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries))


def _entry(raw: bytes) -> dict[str, Any] | None:
    """One outbox line as a write to make, or None when it cannot be read as one."""
    try:
        entry = strictjson.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(entry, dict) or entry.get("op") not in WRITES:
        return None
    if not isinstance(entry.get("args", []), list) or not isinstance(entry.get("kwargs", {}), dict):
        return None
    return entry


def _make(memory: LongTermStore, entry: dict[str, Any]) -> None:
    args = list(entry.get("args") or [])
    if entry["op"] == "add_episode" and args:
        args[0] = Episode.model_validate(args[0])
    getattr(memory, entry["op"])(*args, **dict(entry.get("kwargs") or {}))
