"""Where long-term memory lives: a Chroma directory on disk, or a Chroma server a team shares.

No chromadb here: these checks run before the (slow) chromadb import, so a store another
process locks, or a server that is down, is reported at once with a plain message.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from agent_cli.core.errors import MemoryUnavailable, StorageError

DEFAULT_TENANT = "default_tenant"  # Chroma's own defaults, so a plain `chroma run` works as is
DEFAULT_DATABASE = "default_database"
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 120.0
OPEN_CALLS = 3  # the client's own requests while it is made (identity, tenant, database)
T = TypeVar("T")


@dataclass(frozen=True)
class ChromaServer:
    """A Chroma server reached over HTTP (`chroma run`), with an optional bearer token."""

    url: str
    tenant: str = DEFAULT_TENANT
    database: str = DEFAULT_DATABASE
    token: str | None = field(default=None, repr=False)
    timeout_s: float = CONNECT_TIMEOUT_S  # connecting, and each of the probe's requests
    call_timeout_s: float = CALL_TIMEOUT_S  # the silence any one request of the client may meet

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "localhost"

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 8000)

    @property
    def ssl(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    def headers(self) -> dict[str, str]:
        """The token in both headers Chroma's token authentication accepts."""
        if not self.token:
            return {}
        return {"Authorization": f"Bearer {self.token}", "X-Chroma-Token": self.token}

    def __str__(self) -> str:
        return f"{self.url.rstrip('/')} (tenant {self.tenant}, database {self.database})"


def probe(where: Path | ChromaServer, wait_s: float, reading: bool = False) -> None:
    """Refuse a store that cannot be used (to read only, when `reading`), before chromadb is
    imported."""
    if isinstance(where, ChromaServer):
        probe_server(where, create=not reading)
    else:
        probe_dir(where, wait_s, reading)


def probe_server(server: ChromaServer, create: bool = True) -> None:
    """Check the server answers and takes the token; create its tenant and database when missing.

    Creating them on first use mirrors the embedded store, which the first run creates;
    `agent doctor` names the tenant and database, so a mistyped name is visible there. To read
    only (`create` false) nothing is created: a missing database is NoMemoryYet, so that a
    command that only reads never leaves a mistyped database behind on the server.
    """
    status, body = _answer(server, "GET", "/api/v2/heartbeat")
    if status != 200 or not _heartbeat(body):
        why = "no /api/v2/heartbeat" if status != 200 else "its /api/v2/heartbeat is not Chroma's"
        raise MemoryUnavailable(
            f"memory server {server.url} does not answer like a Chroma server ({why})",
            "point memory_url at a `chroma run` server (Chroma 0.5 or later)",
        )
    tenant = f"/api/v2/tenants/{quote(server.tenant, safe='')}"
    if _call(server, "GET", f"{tenant}/databases/{quote(server.database, safe='')}") == 404:
        if not create:
            raise NoMemoryYet(f"{server} has no such database", "`agent run` creates it")
        for path, name in (
            ("/api/v2/tenants", server.tenant),
            (f"{tenant}/databases", server.database),
        ):
            if _call(server, "POST", path, {"name": name}) not in (200, 409):  # 409: it exists
                raise StorageError(
                    f"memory server {server.url} could not create {name!r}",
                    "create the tenant and database on the server, or fix their names",
                )


def _heartbeat(body: bytes) -> bool:
    """Whether `body` is Chroma's answer to a heartbeat: a JSON object holding the server's
    clock (`{"nanosecond heartbeat": N}`). Any web server may answer 200 to any path (a web
    application's catch-all page, a proxy's sign-in page); chromadb's client would then fail
    on its first answer with a message about JSON that names nothing the user can fix."""
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and isinstance(answer.get("nanosecond heartbeat"), int)


def _call(server: ChromaServer, method: str, path: str, body: dict[str, Any] | None = None) -> int:
    """The HTTP status of one request to the server's REST API; MemoryUnavailable when unreachable."""
    return _answer(server, method, path, body)[0]


def _answer(
    server: ChromaServer, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, bytes]:
    """The HTTP status and the body (its first 64 KiB) of one request to the server's REST
    API; MemoryUnavailable when unreachable."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {**server.headers(), "Content-Type": "application/json"}
    request = urllib.request.Request(server.url + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=server.timeout_s) as reply:
            return int(reply.status), reply.read(65536)
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise MemoryUnavailable(
                f"memory server {server.url} refused the token (HTTP {e.code})",
                "set AGENT_MEMORY_TOKEN to a token the server accepts",
            ) from None
        if e.code in (404, 409):
            return e.code, b""
        why = f"HTTP {e.code} for {method} {path}"
    except urllib.error.URLError as e:
        why = str(e.reason)
    except (OSError, ValueError) as e:  # timeouts, resets
        why = str(e) or type(e).__name__
    raise MemoryUnavailable(
        f"memory server {server.url} cannot be reached ({why})",
        "start it (`chroma run --path DIR --port PORT`) or unset memory_url "
        "to use the embedded store",
    )


def within(server: ChromaServer, seconds: float, action: str, work: Callable[[], T]) -> T:
    """`work()` (which talks to `server`), or MemoryUnavailable once it has run `seconds`.

    For what sets no timeout of its own (chromadb's client makes its first requests while
    it is built, before a timeout can be given to it): left running on a daemon thread, it
    holds a connection to a server that does not answer, and nothing else.
    """
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as e:  # raised again in the caller's thread
            failure.append(e)

    worker = threading.Thread(target=run, daemon=True, name=f"memory-server-{action}")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise MemoryUnavailable(
            f"memory server {server.url} did not answer within {seconds:g} s ({action})",
            "check the server (it answered its heartbeat, then stopped), or unset memory_url",
        )
    if failure:
        raise failure[0]
    return result[0]


# What a Chroma server answers when a client searches a collection whose vector index another
# client's writes have not yet put on its disk (chroma-core/chroma#4212): it holds for a moment.
INDEX_NOT_READY = "Error creating hnsw segment reader"


# What Chroma answers a search when a vector index names ids its records lack, or lacks
# those they hold: a segment directory deleted, damaged or from another copy of the store.
INDEX_ASTRAY = "Error finding id"


class NoMemoryYet(StorageError):
    """What is opened to read only holds no agent memory yet (and is not created for a read)."""


class IndexNotReady(StorageError):
    """The memory server has not yet written the index a search needs; made again, it answers."""


class CollectionGone(StorageError):
    """The memory server no longer has the collection the client looked up (another client's
    `agent memory reindex` replaced it, or the server started again with no data): the
    collection of that name is to be looked up again."""


class Refused(StorageError):
    """The store refused a request for what it asked (a record its validation rejects, an item
    of another shape in the place of the one written): asked again, it is refused again."""


# What Chroma answers a record whose vector has another length than the collection's: not the
# record's fault, every record is refused until the collection is re-embedded.
OTHER_DIMENSIONS = "expecting embedding with dimension"
REFUSALS = (400, 409, 413, 422)  # Chroma's errors that refuse what was asked, not the server's


def _of(e: object, module: str) -> bool:
    """Whether `e` is an error of `module` (named without importing it)."""
    return type(e).__module__.split(".")[0] == module


def _refused(e: Exception) -> bool:
    """Whether `e` refuses what was asked, so that asking again is refused again: chromadb's
    client validating a record (a ValueError), or Chroma's own error with a status of
    REFUSALS; not its server failing (InternalError, 500), a rate limit, a token or a
    collection of other dimensions."""
    if OTHER_DIMENSIONS in str(e):
        return False
    code = getattr(e, "code", None)
    if _of(e, "chromadb") and callable(code):
        return code() in REFUSALS
    return isinstance(e, ValueError) and not _of(e, "orjson")


def not_chromas(e: BaseException) -> str:
    """What a server answered, in a few words, when `e` is how chromadb's client reports an
    answer that is not Chroma's ("" for any other error).

    Chroma's own errors come as chromadb's error types. An error answer whose body is not
    Chroma's JSON (a proxy's 502 page, another web server's 404) comes as a plain Exception
    that holds the whole body, raised while chromadb handles httpx's HTTPStatusError
    (`BaseHTTPClient._raise_chroma_error`), so httpx's error is its context; a success answer
    that is not JSON comes as orjson's JSONDecodeError.
    """
    context = e.__context__
    if type(e) is Exception and _of(context, "httpx"):
        status = getattr(getattr(context, "response", None), "status_code", None)
        if type(context).__name__ == "HTTPStatusError" and isinstance(status, int):
            return f"{_status(status)} with a body that is not Chroma's"
    if _of(e, "orjson") and isinstance(e, ValueError):
        return "a body that is not JSON"
    return ""


def _status(code: int) -> str:
    """`HTTP 502 Bad Gateway`: the status with its standard phrase (not the server's words)."""
    try:
        return f"HTTP {code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


def _gone(e: Exception) -> bool:
    """Whether `e` is the server's answer about a collection it does not have (any more)."""
    text = str(e)
    return "Collection" in text and "does not exist" in text


def storage_error(where: Path | ChromaServer, action: str, e: Exception) -> StorageError:
    """Our error for a failure of the store at `where`, with a hint that fits a directory or a server."""
    if not isinstance(where, ChromaServer):
        hint = "check the directory (permissions, free space) or move it aside"
        if INDEX_ASTRAY in str(e):  # the records are whole: moving them aside loses them
            hint = (
                "its vector index no longer matches its records (an index directory in it is "
                "missing or damaged): `agent memory reindex` builds the index again from them"
            )
        elif where.is_dir() and not os.access(where, os.W_OK):  # EROFS too, even for root
            hint = (
                f"{where} cannot be written (a read-only filesystem, or its permissions), and "
                "Chroma writes to its directory even to read it: copy the state directory "
                "somewhere writable and point AGENT_HOME at the copy"
            )
        kind = Refused if _refused(e) else StorageError
        return kind(f"memory store at {where}: {action} failed: {e}", hint)
    answer = not_chromas(e)
    if answer:  # a proxy whose backend is down, another program on the port: as if it were down
        return MemoryUnavailable(
            f"memory server {where.url}: {action} failed: it answered {answer}",
            "check that the Chroma server (and any proxy in front of it) is running, "
            "or unset memory_url",
        )
    if type(e).__module__.startswith("httpx") or "could not connect" in str(e).lower():
        return MemoryUnavailable(
            f"memory server {where.url}: {action} failed: {e or type(e).__name__}",
            "check that the server is running, or unset memory_url",
        )
    kind = (
        IndexNotReady
        if INDEX_NOT_READY in str(e)
        else CollectionGone
        if _gone(e)
        else Refused
        if _refused(e)
        else StorageError
    )
    if kind is StorageError and _server_failed(e):  # it may answer the next run: as if down
        return MemoryUnavailable(
            f"memory server {where.url}: {action} failed: {e}",
            "see the server's log; it may answer again later",
        )
    return kind(f"memory server {where}: {action} failed: {e}", "see the server's log")


def _server_failed(e: Exception) -> bool:
    """Whether `e` is Chroma's server failing for itself (a 5xx such as InternalError's
    "database is locked", or too many requests), not for what was asked."""
    code = getattr(e, "code", None)
    return _of(e, "chromadb") and callable(code) and (code() >= 500 or code() == 429)


def probe_dir(path: Path, wait_s: float, reading: bool = False) -> None:
    """Refuse a path that is not a directory, a corrupt database, or one another process locks
    (for writing; for `reading`, one in the middle of a commit for longer than `wait_s`)."""
    if path.is_symlink() and not path.exists():  # creating the store there would fail
        raise StorageError(
            f"memory store at {path} is a link to {os.readlink(path)}, which does not exist",
            "create the directory it names, or remove the link",
        )
    if path.exists() and not path.is_dir():
        raise StorageError(f"memory store at {path} is not a directory", "move it aside")
    db = path / "chroma.sqlite3"
    if not db.exists():
        return
    check_database(path)
    try:
        mode = "ro" if reading else "rw"
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode={mode}", uri=True, timeout=wait_s)
        try:
            if reading:  # a reader waits for no writer, only for a commit in progress
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            else:
                con.execute("BEGIN IMMEDIATE")
                con.rollback()
        finally:
            con.close()
    except sqlite3.Error as e:
        locked = "locked" in str(e) or "busy" in str(e)
        what = "is locked by another process" if locked else f"cannot be opened ({e})"
        hint = (
            "wait for the other agent to finish" if locked else "nothing was changed; move it aside"
        )
        raise StorageError(f"memory store at {path} {what}", hint) from None


_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_database(path: Path) -> None:
    """Refuse a store whose database file no SQLite could have written: empty, not SQLite, or
    shorter than its own header says (cut short by a copy or a full disk). SQLite would take
    an empty file for a new database and Chroma would write a new store into it, and a recall
    snapshot beside a damaged file would answer as if the store were whole; so every opening
    and every read from the snapshot checks this first. Only its first 100 bytes and its size
    are read; nothing is written, and no file is missing here."""
    db = path / "chroma.sqlite3"
    if not path.is_dir():
        return  # `probe_dir` says what is there instead
    try:
        fd = os.open(db, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(
            f"memory store at {path}: {db.name} cannot be read ({e.strerror or e})",
            "check its permissions",
        ) from None
    try:
        info = os.fstat(fd)
        head = os.read(fd, 100) if stat.S_ISREG(info.st_mode) else b""
    finally:
        os.close(fd)
    why = _damage(head, info.st_size) if stat.S_ISREG(info.st_mode) else "is not a regular file"
    if why.startswith(CUT_SHORT):
        why = _cut_short_while_shared(db)
    if why:
        raise StorageError(
            f"memory store at {path}: {db.name} {why}",
            "nothing was changed; move the directory aside (kept, it may still be recovered "
            "from) and the next run starts a new store",
        )


CUT_SHORT = "is cut short"
CUT_SHORT_WAIT_S = 2.0


def _cut_short_while_shared(db: Path) -> str:
    """The file judged again with SQLite's shared lock held ("" when it is not cut short then,
    or SQLite cannot say). A store's database is written in place: a commit writes its first
    page, which holds the page count, before the pages that grow the file, so another run
    writing at that moment shows a file shorter than its header says. No commit is under way
    while the shared lock is held; a file a killed writer left (its journal beside it, which
    SQLite rolls back on the next open) or a writer that holds the lock past the wait is left
    to SQLite, as is a file SQLite itself opens and reads."""
    try:
        con = sqlite3.connect(
            f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=CUT_SHORT_WAIT_S
        )
    except sqlite3.Error:
        return ""
    try:
        con.execute("BEGIN")
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()  # takes the shared lock
        with open(db, "rb") as file:
            return _damage(file.read(100), os.fstat(file.fileno()).st_size)
    except sqlite3.OperationalError:
        return ""  # busy, or a journal to roll back: SQLite will say what it finds
    except sqlite3.DatabaseError:
        return f"{CUT_SHORT}: SQLite cannot read it"
    finally:
        con.close()


def _damage(head: bytes, size: int) -> str:
    """What is wrong with a database file of `size` bytes that starts with `head` ("" when
    nothing is seen)."""
    if size == 0:
        return "is empty (0 bytes): it is no store Chroma wrote"
    if not head.startswith(_SQLITE_MAGIC) or len(head) < 100:
        return "is not an SQLite database (its first bytes are not SQLite's)"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages and size < pages * page:  # the count is current
        return f"{CUT_SHORT}: {size:,} bytes of the {pages * page:,} its header names"
    return ""
