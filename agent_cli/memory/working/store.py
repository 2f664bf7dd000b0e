"""The cold zone: where evicted items wait to be recalled.

Store protocol (implementations do not inherit; `WorkingMemory` uses only these):

    put(record)              insert or replace the record with record["id"]
    get(id)                  the record, or None
    delete(id)               forget a record (absent ids are fine)
    manifest()               [{"id", "kind", "summary", "symbols", "step_evicted"}], oldest first
    recent(limit)            the same entries, most recently put first
    by_symbol(names, folded) [(id, name)] of records defining one of `names`
                             (folded=True compares lower-cased names)
    vectors()                [(id, step_evicted, vector)] of records that have a vector
    count()                  how many records
    max_number()             the largest N of the ids "mN" stored, 0 if none
    close()

`Item`, the hot form, is defined here beside the record it becomes when evicted.
A record is `Item.to_dict()` plus `step_evicted` (the step it went cold) and `seen` (how many
items had mentioned each name it defines by then, so later mentions can still be counted).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import urllib.parse
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cli.core.errors import StorageError
from agent_cli.core.protocols import ColdStore
from agent_cli.core.redact import redact_all
from agent_cli.core.text import ELLIPSIS

MANIFEST_KEYS = ("id", "kind", "summary", "symbols", "step_evicted")
ONE_LINE_CHARS = 240  # a text this short, on one line, is rendered on its header's line


@dataclass(slots=True)
class Item:
    """One piece of working memory; `origin_id` is set when it is a view of a cold record."""

    id: str
    kind: str
    text: str
    summary: str
    tokens: int
    pinned: bool
    step: int
    symbols: tuple[str, ...]
    touched: int
    refs: int = 0
    origin_id: str | None = None
    vector: tuple[float, ...] | None = None
    cost: int = 0  # tokens it takes in assemble(): header, text and separators
    # identical results merged into this item; not in the header, which stays the same so that
    # the memory block keeps its cached prefix (the tool message of a repeat says the count)
    repeats: int = 1
    exact: bool = False  # tokens and cost are exact counts, not add-time estimates
    goal: float = field(default=0.0, repr=False)
    static: float = field(default=0.0, repr=False)  # the score without recency

    def header(self, summary: bool = True) -> str:
        """The line that introduces the item in the context (without its summary if not `summary`)."""
        flag = ""
        if self.pinned:
            flag = " pinned"
        elif self.origin_id and self.kind != "recalled":
            flag = " cold"  # the stub of an item too large for the budget
        said = f" {self.summary}" if summary else ""
        return f"[{self.kind} {self.id}{flag}]{said}"

    def one_line(self) -> bool:
        """Whether the item is rendered once, on its header's line: a short one-line text that
        the summary only repeats the start of."""
        text = self.text.strip()
        if "\n" in text or len(text) > ONE_LINE_CHARS:
            return False
        start = self.summary.removesuffix(ELLIPSIS).strip()
        return " ".join(text.split()).startswith(start)

    def render(self) -> str:
        """The header, the text and a closing newline; a one-line item on its header's line."""
        if self.one_line():
            return f"{self.header(summary=False)} {self.text.strip()}\n"
        return f"{self.header()}\n{self.text}\n"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict that from_dict() turns back into an equal item."""
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "summary": self.summary,
            "tokens": self.tokens,
            "pinned": self.pinned,
            "step": self.step,
            "symbols": list(self.symbols),
            "touched": self.touched,
            "refs": self.refs,
            "origin_id": self.origin_id,
            "cost": self.cost,
            "repeats": self.repeats,
            "exact": self.exact,
            "vector": list(self.vector) if self.vector is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Item:
        """The item to_dict() described."""
        vector = data.get("vector")
        return cls(
            id=data["id"],
            kind=data["kind"],
            text=data["text"],
            summary=data["summary"],
            tokens=data["tokens"],
            pinned=data["pinned"],
            step=data["step"],
            symbols=tuple(data["symbols"]),
            touched=data["touched"],
            refs=data["refs"],
            origin_id=data.get("origin_id"),
            cost=data.get("cost", 0),
            repeats=data.get("repeats", 1),
            exact=data.get("exact", True),
            vector=tuple(vector) if vector is not None else None,
        )


Store = ColdStore  # the name working memory and recall know it by


def id_number(item_id: str) -> int:
    """N of an id "mN", 0 for anything else."""
    digits = item_id[1:]
    return int(digits) if item_id[:1] == "m" and digits.isdigit() else 0


class InMemStore:
    """A cold store in a dict, for tests and throwaway sessions."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        self._names: dict[str, set[str]] = {}
        self._folded: dict[str, set[str]] = {}
        self._max = 0

    def put(self, record: dict[str, Any]) -> None:
        """Insert or replace; a replaced record counts as the most recent."""
        item_id = record["id"]
        if item_id in self._records:
            self.delete(item_id)
        self._records[item_id] = dict(record)
        names, folded = self._names, self._folded
        for name in record["symbols"]:
            ids = names.get(name)
            if ids is None:
                ids = names[name] = set()
            ids.add(item_id)
            lower = name.lower()
            ids = folded.get(lower)
            if ids is None:
                ids = folded[lower] = set()
            ids.add(item_id)
        number = id_number(item_id)
        if number > self._max:
            self._max = number

    def get(self, item_id: str) -> dict[str, Any] | None:
        """A shallow copy of the record, or None."""
        record = self._records.get(item_id)
        return dict(record) if record is not None else None

    def delete(self, item_id: str) -> None:
        """Forget the record and its symbols."""
        record = self._records.pop(item_id, None)
        if record is None:
            return
        for name in record["symbols"]:
            self._names.get(name, set()).discard(item_id)
            self._folded.get(name.lower(), set()).discard(item_id)

    def manifest(self) -> list[dict[str, Any]]:
        """Every record's manifest entry, oldest first."""
        return [_entry(r) for r in sorted(self._records.values(), key=lambda r: id_number(r["id"]))]

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """Manifest entries of the most recently put records."""
        out: list[dict[str, Any]] = []
        for item_id in reversed(self._records):
            if len(out) >= limit:
                break
            out.append(_entry(self._records[item_id]))
        return out

    def by_symbol(self, names: Iterable[str], folded: bool = False) -> list[tuple[str, str]]:
        """(id, name) for records defining one of `names`."""
        index = self._folded if folded else self._names
        found: list[tuple[str, str]] = []
        for name in names:
            key = name.lower() if folded else name
            found.extend((item_id, name) for item_id in index.get(key, ()))
        return found

    def vectors(self) -> list[tuple[str, int, list[float]]]:
        """(id, step_evicted, vector) of records that have a vector."""
        return [
            (r["id"], r["step_evicted"], r["vector"])
            for r in self._records.values()
            if r.get("vector")
        ]

    def count(self) -> int:
        """How many records."""
        return len(self._records)

    def max_number(self) -> int:
        """The largest N among ids "mN" ever put."""
        return self._max

    def close(self) -> None:
        """Nothing to release."""


def _entry(record: dict[str, Any]) -> dict[str, Any]:
    """The manifest entry of a record."""
    return {key: (list(record[key]) if key == "symbols" else record[key]) for key in MANIFEST_KEYS}


# Ordered, named migrations; each runs once, in one transaction, and is recorded in `migrations`.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_items",
        """
        CREATE TABLE items (
            id TEXT PRIMARY KEY,
            num INTEGER NOT NULL,
            kind TEXT NOT NULL,
            summary TEXT NOT NULL,
            symbols TEXT NOT NULL,
            step_evicted INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            record TEXT NOT NULL,
            vector BLOB
        );
        CREATE INDEX items_seq ON items (seq);
        CREATE INDEX items_num ON items (num);
    """,
    ),
    (
        "002_symbols",
        """
        CREATE TABLE symbols (
            name TEXT NOT NULL,
            folded TEXT NOT NULL,
            id TEXT NOT NULL,
            PRIMARY KEY (name, id)
        ) WITHOUT ROWID;
        CREATE INDEX symbols_folded ON symbols (folded);
        CREATE INDEX symbols_id ON symbols (id);
    """,
    ),
]

_CORRUPT_HINT = (
    "it is not a readable SQLite database; it was left untouched: move it aside "
    "to start with an empty cold store"
)
_LOCKED_HINT = "another process holds a write lock on it; wait for it to finish, then retry"


def _unwritable_hint(path: Path) -> str | None:
    """The hint for a store SQLite cannot write beside (a read-only filesystem, a directory
    without write permission), or None when its directory can be written."""
    folder = path.parent
    if not folder.is_dir() or os.access(folder, os.W_OK):
        return None
    return (
        f"{folder} cannot be written (a read-only filesystem, or its permissions), and SQLite "
        "writes beside the database; the file was left untouched"
    )


def _check_own_file(path: Path) -> None:
    """StorageError when `path` is a link (SQLite would write through it, into whatever file
    it names) or anything but a regular file; nothing there is fine (it is created)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(f"the memory store {path} cannot be opened: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        what = "a symbolic link, which is not followed" if stat.S_ISLNK(mode) else "not a file"
        raise StorageError(
            f"the memory store {path} is {what}", "move it aside to start with an empty cold store"
        )


def _open_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection that only reads `path`. Where its folder can be written, an ordinary one
    with `query_only` set: as the last to close it, it folds the WAL back and removes the
    files SQLite keeps beside the database, which a read-only connection would leave. Where
    it cannot, a read-only one, or, when SQLite cannot make the WAL's shared-memory file
    there, an immutable one: what is still in a WAL file there is not seen, but nothing can
    change the file either."""
    if not path.is_file():
        raise StorageError(f"the memory store {path} does not exist")
    if os.access(path.parent, os.W_OK):
        return _reading(str(path), timeout, uri=False)
    uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?mode=ro"
    try:
        return _reading(uri, timeout)
    except sqlite3.OperationalError:
        return _reading(uri + "&immutable=1", timeout)


def _reading(target: str, timeout: float, uri: bool = True) -> sqlite3.Connection:
    """A connection to `target` that writes nothing and has read the migrations table."""
    conn = sqlite3.connect(target, uri=uri, timeout=timeout, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT name FROM migrations LIMIT 1").fetchall()
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class SqliteStore:
    """A cold store in one SQLite file (WAL mode, one transaction per change); what it
    writes is redacted (`secrets` and the known key shapes).

    `read_only` opens an existing file only to read it (what `agent memory show` does): nothing
    is created, migrated or written, and a file on a read-only filesystem, where SQLite cannot
    make the WAL's shared-memory file beside it, is read as immutable (nothing can change it
    there)."""

    def __init__(
        self,
        path: str | Path,
        timeout: float = 5.0,
        secrets: tuple[str, ...] = (),
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.secrets = secrets
        _check_own_file(self.path)
        conn: sqlite3.Connection | None = None
        try:
            with self._guard("opened"):
                if read_only:
                    conn = self._conn = _open_read_only(self.path, timeout)
                    self._check_version(read_only=True)
                    return
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
                self._conn = conn
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
                conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate()
        except StorageError:
            if conn is not None:
                conn.close()
            raise

    def _migrate(self) -> None:
        """Apply the migrations this file has not seen yet, in order."""
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        applied = self._check_version(read_only=False)
        for name, sql in MIGRATIONS:
            if name in applied:
                continue
            with self._transaction():
                for statement in filter(str.strip, sql.split(";")):
                    self._conn.execute(statement)
                self._conn.execute("INSERT INTO migrations VALUES (?, datetime('now'))", (name,))

    def _check_version(self, read_only: bool) -> set[str]:
        """The migrations the file has seen; StorageError when a newer version wrote it, or,
        to be read only, when it still needs a migration (which would write)."""
        applied = {row[0] for row in self._conn.execute("SELECT name FROM migrations")}
        unknown = applied - {name for name, _ in MIGRATIONS}
        if unknown:
            raise StorageError(
                f"the memory store {self.path} was written by a newer version "
                f"(migrations {', '.join(sorted(unknown))})",
                "upgrade agent, or point AGENT_HOME elsewhere",
            )
        if read_only and len(applied) < len(MIGRATIONS):
            raise StorageError(
                f"the memory store {self.path} was written by an older version of agent",
                "a run in this repository upgrades it (`agent run --resume` for its run)",
            )
        return applied

    @contextlib.contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """Turn sqlite3 and OS errors into StorageError naming the file."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            locked = "locked" in str(exc) or "busy" in str(exc)
            hint = _LOCKED_HINT if locked else _unwritable_hint(self.path) or _CORRUPT_HINT
            raise StorageError(
                f"the memory store {self.path} could not be {doing}: {exc}", hint
            ) from exc
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(
                f"the memory store {self.path} could not be {doing}: {exc}", _CORRUPT_HINT
            ) from exc

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def put(self, record: dict[str, Any]) -> None:
        """Insert or replace a record and its symbols in one transaction."""
        item_id = record["id"]
        vector = array("d", record["vector"]).tobytes() if record.get("vector") else None
        body = redact_all({k: v for k, v in record.items() if k != "vector"}, self.secrets)
        symbols = list(body["symbols"])
        with self._guard("written"), self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?, ?, ?, "
                "(SELECT COALESCE(MAX(seq), 0) + 1 FROM items), ?, ?)",
                (
                    item_id,
                    id_number(item_id),
                    body["kind"],
                    body["summary"],
                    json.dumps(symbols),
                    record["step_evicted"],
                    json.dumps(body),
                    vector,
                ),
            )
            conn.execute("DELETE FROM symbols WHERE id = ?", (item_id,))
            conn.executemany(
                "INSERT OR IGNORE INTO symbols VALUES (?, ?, ?)",
                [(name, name.lower(), item_id) for name in symbols],
            )

    def get(self, item_id: str) -> dict[str, Any] | None:
        """The record, or None."""
        with self._guard("read"):
            row = self._conn.execute(
                "SELECT record, vector FROM items WHERE id = ?", (item_id,)
            ).fetchone()
        if row is None:
            return None
        record: dict[str, Any] = json.loads(row[0])
        record["vector"] = array("d", row[1]).tolist() if row[1] is not None else None
        return record

    def delete(self, item_id: str) -> None:
        """Forget the record and its symbols in one transaction."""
        with self._guard("written"), self._transaction() as conn:
            conn.execute("DELETE FROM items WHERE id = ?", (item_id,))
            conn.execute("DELETE FROM symbols WHERE id = ?", (item_id,))

    def _entries(self, sql: str, params: tuple[int, ...] = ()) -> list[dict[str, Any]]:
        """Manifest entries from a SELECT of id, kind, summary, symbols, step_evicted."""
        with self._guard("read"):
            rows = self._conn.execute(sql, params).fetchall()
        return [
            {
                "id": r[0],
                "kind": r[1],
                "summary": r[2],
                "symbols": json.loads(r[3]),
                "step_evicted": r[4],
            }
            for r in rows
        ]

    def manifest(self) -> list[dict[str, Any]]:
        """Every record's manifest entry, oldest first."""
        return self._entries(
            "SELECT id, kind, summary, symbols, step_evicted FROM items ORDER BY num"
        )

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """Manifest entries of the most recently put records."""
        return self._entries(
            "SELECT id, kind, summary, symbols, step_evicted FROM items ORDER BY seq DESC LIMIT ?",
            (limit,),
        )

    def by_symbol(self, names: Iterable[str], folded: bool = False) -> list[tuple[str, str]]:
        """(id, name) for records defining one of `names`."""
        wanted = sorted({n.lower() for n in names} if folded else set(names))[:500]
        if not wanted:
            return []
        column = "folded" if folded else "name"
        marks = ", ".join("?" * len(wanted))
        with self._guard("read"):
            rows = self._conn.execute(
                f"SELECT id, {column} FROM symbols WHERE {column} IN ({marks})", wanted
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def vectors(self) -> list[tuple[str, int, list[float]]]:
        """(id, step_evicted, vector) of records that have a vector."""
        with self._guard("read"):
            rows = self._conn.execute(
                "SELECT id, step_evicted, vector FROM items WHERE vector IS NOT NULL ORDER BY num"
            ).fetchall()
        return [(r[0], r[1], array("d", r[2]).tolist()) for r in rows]

    def count(self) -> int:
        """How many records."""
        with self._guard("read"):
            count: int = self._conn.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        return count

    def max_number(self) -> int:
        """The largest N among stored ids "mN"."""
        with self._guard("read"):
            number: int = self._conn.execute("SELECT COALESCE(MAX(num), 0) FROM items").fetchone()[
                0
            ]
        return number

    def close(self) -> None:
        """Close the connection."""
        with self._guard("closed"):
            self._conn.close()
