"""Runs on disk: `<state>/runs/<run-id>/state.json` (atomic), `journal.jsonl` and
`trajectory.jsonl` (appended).

state.json is replaced whole at a task's boundaries (temp file, rename), so a killed
process leaves either the previous or the next state, never half of one; `journal.py`
says what the journal holds between two of them. Run ids sort by time:
`YYYYMMDD-HHMMSS-xxxx`.
"""

from __future__ import annotations

import json
import re
import secrets as _secrets
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from agent_cli.agent.run.migrations import SCHEMA_VERSION, upgrade
from agent_cli.agent.run.roles import RoleUsage
from agent_cli.core import atomic
from agent_cli.core.atomic import append_line, write_atomic
from agent_cli.core.errors import AgentError, StorageError
from agent_cli.core.redact import redact, redact_all, redact_json_text, redact_messages
from agent_cli.core.text import readable, readable_all
from agent_cli.llm import endpoints

JOURNAL = "journal.jsonl"
# A run id is one path component (what new_run_id makes, and the names older tests used).
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_STATE_BYTES = 64 * atomic.MiB  # a state.json, and a journal, read whole
_LEFT_AS_IT_IS = "the file is left as it is; inspect or move it aside"
# skipped: the human chose to go on without a task; nothing_to_do: every check passed already
FINISHED = {"verified", "planned", "skipped", "nothing_to_do"}
RunStatus = Literal[
    "running",
    "verified",
    "escalated",
    "budget_exhausted",
    "interrupted",
    "failed",
    "planned",
    "skipped",
    "nothing_to_do",
]


class RunUsage(BaseModel):
    """Tokens and money of a run, summed over all its sessions.

    `cached_tokens` (the part of the prompt read from the server's cache) is written only
    when there were some, so a state.json without it reads and saves back unchanged; so is
    `by_role` (each role's part, `roles.py`).
    """

    model_config = ConfigDict(allow_inf_nan=False)  # read back from a file, maybe edited

    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)
    cached_tokens: int = Field(0, ge=0)
    by_role: dict[str, RoleUsage] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _omit_no_cache(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("cached_tokens", "by_role"):
            if not data.get(key):
                data.pop(key, None)
        return data


class RunStartedWith(BaseModel):
    """The endpoint, models and limits a run was started with; never the API key.

    A resumed run takes these as if the user had passed them again as flags, unless new
    flags are given. Empty (a run saved before they were recorded): nothing is carried over.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    model: str | None = None
    embedding_model: str | None = None
    max_steps: int | None = Field(None, ge=1)
    task_max_steps: int | None = Field(None, ge=1)
    budget_usd: float | None = Field(None, ge=0)
    # a role's own endpoint and model, recorded only when one was set apart (roles.py)
    planner_model: str | None = None
    executor_model: str | None = None
    verifier_model: str | None = None
    planner_base_url: str | None = None
    executor_base_url: str | None = None
    verifier_base_url: str | None = None
    # the variable each role set apart took its key from (its own `<role>_api_key_env`, or
    # the API key's for a role at another hosted endpoint); never a key
    planner_api_key_env: str | None = None
    executor_api_key_env: str | None = None
    verifier_api_key_env: str | None = None
    # the variable the API key came from ("": none did); None: saved before key variables
    # were recorded, so a resume cannot tell which key a role's saved endpoint was sent
    api_key_env: str | None = None
    # which of these the repository's .agentrc gave (None: saved before it was recorded); a
    # resume carries those only while the file is trusted (cli/config/carried.py)
    from_repo: list[str] | None = None
    # which of these were flags of the command that started the run, or of the last resume
    # (None: saved before it was recorded); a setting does not replace those, a flag does
    from_flags: list[str] | None = None

    @field_validator("base_url", "planner_base_url", "executor_base_url", "verifier_base_url")
    @classmethod
    def _endpoint(cls, url: str | None) -> str | None:
        """An http(s) address with a host: the file may have been edited since it was saved."""
        return None if url is None else endpoints.endpoint(url)

    @field_validator(
        "api_key_env", "planner_api_key_env", "executor_api_key_env", "verifier_api_key_env"
    )
    @classmethod
    def _variable(cls, name: str | None) -> str | None:
        """The name of an environment variable (or "" for none), never a key itself."""
        if name and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError("expected the name of an environment variable")
        return name

    @model_serializer(mode="wrap")
    def _omit_unrecorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}

    def flags(self) -> dict[str, Any]:
        """The saved values as command-line flags (those recorded)."""
        return self.model_dump(exclude={"from_repo", "from_flags", "api_key_env"})

    def describe(self) -> str:
        """`model local at http://127.0.0.1:8080/v1`, or "" when nothing was recorded."""
        if not self.model and not self.base_url:
            return ""
        where = f" at {self.base_url}" if self.base_url else ""
        return f"model {self.model or '(default)'}{where}" + self._roles()

    def _roles(self) -> str:
        """`; executor model qwen at http://127.0.0.1:8080/v1` for each role set apart (`with
        its key from EXEC_KEY` for one whose key variable was saved)."""
        parts = []
        for role in ("planner", "executor", "verifier"):
            model, url = getattr(self, f"{role}_model"), getattr(self, f"{role}_base_url")
            key_env = getattr(self, f"{role}_api_key_env")
            if model or url or key_env:
                where = f" at {url}" if url else ""
                key = f" with its key from {key_env}" if key_env else ""
                parts.append(f"; {role} model {model or self.model or '(default)'}{where}{key}")
        return "".join(parts)


class RunRecord(BaseModel):
    """A run's state.json; the fields in the order they have always been written.

    A saved file is read through `migrations.upgrade` first, so it may be of any older schema.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    run_id: str
    status: RunStatus = "running"
    goal: str
    branch: str
    base: str = ""
    accept_cmds: list[str] = Field(default_factory=list)
    protected: list[str] = Field(default_factory=list)
    started_at: str = ""
    success_criteria: str = ""
    usage: RunUsage = Field(default_factory=RunUsage)
    updated_at: str = ""
    steps: int = 0
    agent_state: dict[str, Any] = Field(default_factory=dict)  # AgentState.to_dict()
    memory: dict[str, Any] = Field(default_factory=dict)  # WorkingMemory.export_state()
    base_branch: str = ""  # the branch the run started from (older runs: none recorded)
    learned: dict[str, Any] = Field(default_factory=dict)  # learning.Learned.to_dict()
    started_with: RunStartedWith = Field(default_factory=RunStartedWith)
    schema_version: int = SCHEMA_VERSION
    worktree: str = ""  # the linked work tree the run works in ("": the user's checkout)
    repo: str = ""  # the main work tree of the repository the run is of ("": not recorded)
    # the tree the work tree held at the last save (git's id): what changed after is not the run's
    left_tree: str = ""
    views: dict[str, Any] = Field(default_factory=dict)  # freshness.FileViews.to_dict()
    # what the repository files its hooks and stdio MCP servers run were when the run first
    # began, by path (`tools.held`): what a resume holds them to
    held: dict[str, str] = Field(default_factory=dict)
    # when the run first began, by the clock file change times are stamped with (ns): an
    # instruction file created or changed after it is not the owner's, in any session of the run
    instructions_since: int = Field(0, ge=0)

    @model_serializer(mode="wrap")
    def _omit_unrecorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a run saved before the start was recorded reads and saves back unchanged
        data: dict[str, Any] = handler(self)
        for unrecorded in (
            "started_with",
            "worktree",
            "repo",
            "left_tree",
            "views",
            "held",
            "instructions_since",
        ):
            if not data.get(unrecorded):
                data.pop(unrecorded, None)
        return data


def _held_saved(held: dict[str, str], secrets: tuple[str, ...]) -> dict[str, str]:
    """The held paths a state may keep: redaction masks values, never a key, so a path that
    holds a secret (a configured one, a key's shape) is left out. A resume holds such a path to
    the commit the run began at, as a path the run did not hold."""
    return {path: state for path, state in held.items() if redact(path, secrets) == path}


def _text(value: object) -> str:
    """A value JSON has no type for, as the trajectory writes it: its text, `readable`."""
    return readable(str(value))


def new_run_id(now: datetime | None = None) -> str:
    """A fresh run id that sorts by start time."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{_secrets.token_hex(2)}"


def claim_run_id(under: Path, make: Callable[[], str] = new_run_id) -> str:
    """A fresh id (of a run, or a batch) whose directory under `under` this call made.

    Ids sort by the second they start in and differ by a short random part, which two of many
    runs a batch starts in one second can share: the directory made here (or found taken, and
    then another id) keeps two runs from ever writing one state, lock or branch."""
    while True:
        run_id = make()
        with _writing(under / run_id) as path:
            try:
                path.mkdir(parents=True)
            except FileExistsError:
                continue
        return run_id


def utc_now() -> str:
    """The current UTC time in ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@contextmanager
def _writing(path: Path) -> Iterator[Path]:
    """Turn a failed write (disk full, read-only state directory) into one clear StorageError."""
    try:
        yield path
    except (OSError, atomic.UnsafeFile) as e:
        raise StorageError(
            f"cannot write {path}: {getattr(e, 'strerror', None) or e}; the run's state on disk is "
            "the last one saved",
            "free disk space or make the state directory writable, then `agent run --resume`",
        ) from None


class RunStore:
    """Reads and writes the runs under one state directory; given `repo` (a repository's main
    work tree), only that repository's runs: a state directory may be shared (`home`).

    A run records the repository it is of when it is saved. One saved without (by an older
    version) is the repository's own only in the repository's own `.agent`: in a shared
    directory nothing tells whose it is."""

    def __init__(self, state_dir: Path, secrets: tuple[str, ...] = (), repo: str = "") -> None:
        self.root = Path(state_dir) / "runs"
        self.secrets = secrets
        self.repo = repo
        own = Path(repo) / ".agent" if repo else None
        # the repository's own `.agent` holds its runs only, wherever the repository was when
        # a run recorded it (a checkout moved, renamed or copied keeps its runs)
        self._own_dir = own is not None and _same_dir(own, Path(state_dir))

    def ours(self, recorded: object) -> bool:
        """Whether a run that recorded `recorded` as its repository is this store's."""
        if not self.repo or self._own_dir:
            return True
        return bool(recorded) and recorded == self.repo

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    def save(self, record: RunRecord, *, durable: bool = True) -> None:
        """Replace the run's state.json atomically (secrets redacted), then empty its journal.

        `durable` (the work it records was verified) flushes it to the disk first. Its values
        are redacted before it is serialised, so the file stays valid JSON, and `readable`
        (a file name git gave that is not UTF-8, which no UTF-8 file can hold as it is)."""
        if self.repo and not record.repo:
            record.repo = self.repo
        data = redact_all(record.model_dump(mode="json"), self.secrets)
        if "held" in data:
            data["held"] = _held_saved(data["held"], self.secrets)
        data = readable_all(data)
        text = json.dumps(data, indent=1, ensure_ascii=False)
        run_dir = self.run_dir(record.run_id)
        with _writing(run_dir / "state.json") as path:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text, durable=durable)
        journal = run_dir / JOURNAL
        if journal.exists():  # what it held is in the state now
            with _writing(journal) as path:
                path.write_bytes(b"")

    def log(self, run_id: str, record: dict[str, Any]) -> None:
        """Append one record to the run's trajectory (secrets redacted, text `readable`)."""
        record = redact_all({"t": utc_now(), **record}, self.secrets)
        if isinstance(record.get("messages"), list):  # a request: its echoed arguments too
            record["messages"] = redact_messages(record["messages"], self.secrets)
        line = json.dumps(readable_all(record), ensure_ascii=False, default=_text)
        self._append(run_id, "trajectory.jsonl", line)

    def journal(self, run_id: str, line: str) -> None:
        """Append one line of JSON to the run's journal (its values redacted, still JSON)."""
        self._append(run_id, JOURNAL, redact_json_text(line, self.secrets))

    def journal_lines(self, run_id: str) -> list[str]:
        """The lines of the run's journal, oldest first ([] when there is none).

        A last line cut inside a character (a process killed in the middle of appending a long
        line, a disk that filled) is left out, as `journal.parse` leaves out any torn last line:
        the tool call it was writing is not replayed, and the run can be resumed."""
        path = self.run_dir(checked_run_id(run_id)) / JOURNAL
        try:
            data = atomic.read_bytes(path, MAX_STATE_BYTES)
        except FileNotFoundError:
            return []
        except (OSError, atomic.UnsafeFile) as e:
            raise StorageError(f"{path} cannot be read: {e}", _LEFT_AS_IT_IS) from None
        try:
            return data.decode("utf-8").splitlines()
        except UnicodeDecodeError as e:
            whole = data.rfind(b"\n") + 1  # the lines that were written to their end
            if e.start < whole:
                raise StorageError(
                    f"{path} cannot be read: it is not UTF-8 text (byte {e.start})", _LEFT_AS_IT_IS
                ) from None
            return data[:whole].decode("utf-8").splitlines()

    def _append(self, run_id: str, name: str, line: str) -> None:
        # Not flushed to the disk: a killed process keeps what it wrote; verified work is
        # in state.json, written durably.
        with _writing(self.run_dir(run_id) / name) as path:
            path.parent.mkdir(parents=True, exist_ok=True)
            append_line(path, line, durable=False)

    def load(self, run_id: str) -> RunRecord:
        """The saved state of a run, checked like model output; a clear error when it is not.

        Beyond its schema, the record must be the run its directory names: the same id,
        and the run's own branch `agent/<id>` (a state naming another branch would make a
        resumed run commit there)."""
        path = self.run_dir(checked_run_id(run_id)) / "state.json"
        if not path.exists() and not path.is_symlink():
            raise AgentError(f"no run {run_id!r} in {self.root}", "`agent runs` lists the runs")
        try:
            data = atomic.read_json(path, MAX_STATE_BYTES)
            if not isinstance(data, dict):
                raise ValueError("the file holds no JSON object")
            record = RunRecord.model_validate(upgrade(data, str(path)))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "top level"
            raise StorageError(
                f"{path} cannot be read: {where}: {err['msg']}", _LEFT_AS_IT_IS
            ) from None
        except (OSError, ValueError) as e:  # ValueError: not JSON, no object, not a file
            why = str(e).removeprefix(f"{path}: ").removeprefix(f"{path} ")  # named once
            raise StorageError(f"{path} cannot be read: {why}", _LEFT_AS_IT_IS) from None
        problem = _identity_problem(record, run_id)
        if problem:
            raise StorageError(f"{path} cannot be read: {problem}", _LEFT_AS_IT_IS)
        if not self.ours(record.repo):
            raise _not_here(run_id, record.repo)
        return record

    def target(self, run_id: str | None, live: Collection[str] = ()) -> str:
        """The run to resume: `run_id` if it exists, else the newest unfinished one that is
        not `live` (in progress in another process)."""
        if run_id is not None:
            path = self.run_dir(checked_run_id(run_id)) / "state.json"
            if not path.exists():
                raise AgentError(f"no run {run_id!r} in {self.root}", "`agent runs` lists the runs")
            recorded = _summary(path).get("repo", "")
            if not self.ours(recorded):
                raise _not_here(run_id, recorded)
            return run_id
        latest = self.latest_unfinished(live)
        if latest is None:
            busy = " that is not in progress" if live else ""
            unreadable = [s["run_id"] for s in self.list() if s.get("status") == "unreadable"]
            if unreadable:
                raise AgentError(
                    f"there is no unfinished run{busy} to resume that can be read (the state of "
                    f"run {unreadable[-1]} cannot be)",
                    f"`agent run --resume --run-id {unreadable[-1]}` says what is wrong with it",
                )
            raise AgentError(
                f"there is no unfinished run{busy} to resume", "start one with `agent run GOAL`"
            )
        return latest

    def list(self) -> list[dict[str, Any]]:
        """Every run's summary, oldest first; one that cannot be read shows as "unreadable".

        The summary's `run_id` is always its directory's name, and its values are of the
        types a listing prints (a state file may hold anything)."""
        out: list[dict[str, Any]] = []
        for d in sorted(self.root.glob("*/state.json")):
            summary = _summary(d)
            if self.ours(summary.get("repo", "")):
                out.append(summary)
        return out

    def latest_unfinished(self, live: Collection[str] = ()) -> str | None:
        """The newest run that did not end with every task verified, leaving out `live`."""
        for s in reversed(self.list()):
            if s.get("status") in FINISHED or s.get("status") == "unreadable":
                continue
            if str(s["run_id"]) not in live:
                return str(s["run_id"])
        return None


def _not_here(run_id: str, recorded: object) -> AgentError:
    whose = f"the repository at {str(recorded)[:200]}" if recorded else "an unknown repository"
    return AgentError(
        f"run {run_id!r} is not a run of this repository (it is of {whose})",
        "`agent runs` lists this repository's runs; run the command in the run's repository",
    )


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def checked_run_id(run_id: str) -> str:
    """`run_id` when it has the form of a run id (one path component); else an AgentError."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise AgentError(
            f"{str(run_id)[:80]!r} is not a run id", "`agent runs` lists the runs and their ids"
        )
    return run_id


def _identity_problem(record: RunRecord, run_id: str) -> str:
    """Why `record` is not the run in directory `run_id` ("" when it is)."""
    if record.run_id != run_id:
        return f"run_id: {record.run_id[:80]!r} is not the run of its directory ({run_id!r})"
    if record.branch != f"agent/{run_id}":
        return f"branch: {record.branch[:80]!r} is not the run's own branch agent/{run_id}"
    return ""


_SUMMARY_TYPES: dict[str, type] = {
    "status": str,
    "goal": str,
    "steps": int,
    "started_at": str,
    "updated_at": str,
    "repo": str,
}


def _summary(path: Path) -> dict[str, Any]:
    """What `list` shows of one state.json."""
    run_id = path.parent.name
    try:
        data = atomic.read_json(path, MAX_STATE_BYTES)
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("run_id") != run_id or not RUN_ID.fullmatch(run_id):
        return {"run_id": run_id, "status": "unreadable", "goal": ""}
    out = dict(data)
    for key, kind in _SUMMARY_TYPES.items():
        if key in out and not isinstance(out[key], kind):
            out.pop(key)
    out["run_id"] = run_id
    if "status" not in out:  # every saved run has one: a state without it cannot be read
        out["status"] = "unreadable"
    return out
