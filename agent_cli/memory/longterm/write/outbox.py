"""What a run meant to keep in long-term memory while its server was down, kept for later.

A run whose memory server cannot be reached goes on without it (fallback.py). The writes
it makes meanwhile (its episode, procedures, notes, facts) are appended to the outbox,
`<state>/memory-outbox.jsonl`, one JSON line each, secrets masked, with the store they
were meant for. The next run that reaches that store sends them first, oldest first, and
the outbox keeps only what did not go (nothing, when all did). An entry for another store
(memory_url changed since) waits for that store. A write the store fails to make (a server's
own error such as a locked database, a rate limit, a server that cannot be reached) stays,
with every write after it, for the next run. A line that cannot be read, or a write the store
refuses for what it holds (`place.Refused`: a record its validation rejects), would fail the
same way every time: it leaves the outbox and is kept aside, as it was, in
`<outbox>.rejected` for the user to look at. What a send did (`Sent`) is said in one line
each. The outbox is opened without following a link and must be a regular file of at most
MAX_BYTES (`atomic.open_regular`).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_cli.core import atomic, strictjson
from agent_cli.core.atomic import append_line, write_atomic
from agent_cli.core.errors import AgentError, EmbedderMismatch, MemoryUnavailable, StorageError
from agent_cli.core.models import Episode
from agent_cli.core.protocols import LongTermStore
from agent_cli.core.redact import redact_all
from agent_cli.memory.longterm.place import Refused

WRITES = ("add_episode", "add_fact", "add_procedure", "curate")
MAX_BYTES = 32 * atomic.MiB


@dataclass(frozen=True)
class Sent:
    """What one send of the outbox did: writes made; lines set aside in `aside` (`unreadable`
    ones, and writes the store `refused`, the first for `refused_why`); writes `kept` in
    `path` for a later run because the store failed to make them (`kept_why`)."""

    path: Path
    aside: Path
    sent: int = 0
    unreadable: int = 0
    refused: int = 0
    refused_why: str = ""
    kept: int = 0
    kept_why: str = ""

    def notices(self) -> list[str]:
        """One line for the user on each thing this send did."""
        said = []
        if self.sent:
            said.append(
                f"long-term memory: sent {self.sent} write(s) kept by an earlier run while "
                "it was unreachable"
            )
        if self.kept:
            said.append(
                f"long-term memory: {self.kept} write(s) kept by an earlier run stay in "
                f"{self.path} for the next run, as the store failed to make them: {self.kept_why}"
            )
        if self.refused:
            said.append(
                f"long-term memory: {self.refused} write(s) kept by an earlier run cannot be "
                f"made, so they were set aside in {self.aside}: {self.refused_why}"
            )
        if self.unreadable:
            said.append(
                f"long-term memory: {self.unreadable} line(s) of {self.path} cannot be read "
                f"and were set aside in {self.aside}"
            )
        return said


class Outbox:
    """The writes waiting for the store named `store` (its URL or path), in `path`."""

    def __init__(self, path: Path, store: str, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        self.store = store
        self.secrets = secrets

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
        """Where lines that cannot be read, and writes the store refuses, are kept aside."""
        return self.path.with_name(self.path.name + ".rejected")

    def _entries(self) -> tuple[list[dict[str, Any]], int]:
        """The outbox's writes, and how many lines that cannot be read were set aside."""
        try:
            data = atomic.read_bytes(self.path, MAX_BYTES)
        except FileNotFoundError:
            return [], 0
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
        if rejected:
            self._set_aside(rejected)
        return out, len(rejected)

    def _set_aside(self, lines: list[bytes]) -> None:
        """Keep lines for the user, and out of the outbox from now on."""
        atomic.append_bytes(self.rejected_path, b"".join(x + b"\n" for x in lines), durable=True)

    def send(self, memory: LongTermStore) -> Sent:
        """Make every write waiting for this store on `memory`, oldest first (see `Sent`). A
        write the store refuses (or a line that cannot be read) is set aside; one the store
        fails to make stays, with those after it; when the store cannot be reached (or was
        embedded with another embedder), the writes not yet made stay and the error is
        raised. Nothing is sent while another run sends."""
        nothing = Sent(self.path, self.rejected_path)
        if not self.path.exists() and not self.path.is_symlink():
            return nothing
        try:
            with self._locked(fcntl.LOCK_EX | fcntl.LOCK_NB) as mine:
                return self._send(memory) if mine else nothing
        except atomic.UnsafeFile as e:
            raise StorageError(
                f"the memory outbox cannot be read: {e}", f"move {self.lock_path} aside"
            ) from None

    def _send(self, memory: LongTermStore) -> Sent:
        entries, unreadable = self._entries()
        mine = [e for e in entries if e.get("store") == self.store]
        if not mine:
            if unreadable:
                self._rewrite(entries)
            return Sent(self.path, self.rejected_path, unreadable=unreadable)
        others = [e for e in entries if e.get("store") != self.store]
        done = sent = 0
        refused: list[tuple[dict[str, Any], str]] = []  # each with why
        kept_why = ""
        try:
            for entry in mine:
                try:
                    _make(memory, entry)
                    sent += 1
                except (MemoryUnavailable, EmbedderMismatch):
                    raise  # the store, not this write: every write not yet made stays
                except StorageError as e:
                    if not isinstance(e, Refused):  # the store failed: next time it may not
                        kept_why = e.one_line()
                        break
                    refused.append((entry, e.one_line()))
                except (AgentError, ValueError, TypeError) as e:  # refused every time alike
                    refused.append((entry, _said(e)))
                done += 1
        finally:
            if refused:  # kept aside before it leaves the outbox
                self._set_aside([_line(entry).encode() for entry, _ in refused])
            self._rewrite(others + mine[done:])
        return Sent(
            self.path,
            self.rejected_path,
            sent=sent,
            unreadable=unreadable,
            refused=len(refused),
            refused_why=refused[0][1] if refused else "",
            kept=len(mine) - done,
            kept_why=kept_why,
        )

    def _rewrite(self, entries: list[dict[str, Any]]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        write_atomic(self.path, "".join(_line(e) + "\n" for e in entries))


def _line(entry: dict[str, Any]) -> str:
    """One outbox line."""
    return json.dumps(entry, ensure_ascii=False)


def _said(e: Exception) -> str:
    """Why a write was refused, in one line."""
    if isinstance(e, AgentError):
        return e.one_line()
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


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
