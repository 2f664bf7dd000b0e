"""The seams between the layers: small protocols the run loop and memory are written against.

Implementations do not inherit from them; any object with these members will do. This
module sits at the bottom of the package (it imports only `models` and `events`), so every
layer can name a seam without importing the layer that implements it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agent_cli.core.events import Escalated, Event, HookRan, PlanMade
from agent_cli.core.models import ChatReply, Episode, Usage

Message = dict[str, Any]


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a chat with function tools and keeps a running usage total."""

    name: str

    @property
    def usage(self) -> Usage:
        """Tokens, calls and cost of every turn so far."""
        ...

    @property
    def context_window(self) -> int | None:
        """The context size in tokens the model is served with; None when it does not know."""
        ...

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> ChatReply:
        """One assistant turn for `messages`, offering `tools`."""
        ...


class Embedder(Protocol):
    """Turns texts into vectors of a fixed length; `name` identifies the vector space."""

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class ColdStore(Protocol):
    """What working memory needs from the store its evicted items go to."""

    def put(self, record: dict[str, Any]) -> None: ...
    def get(self, item_id: str) -> dict[str, Any] | None: ...
    def delete(self, item_id: str) -> None: ...
    def manifest(self) -> list[dict[str, Any]]: ...
    def recent(self, limit: int) -> list[dict[str, Any]]: ...
    def by_symbol(self, names: Iterable[str], folded: bool = False) -> list[tuple[str, str]]: ...
    def vectors(self) -> list[tuple[str, int, list[float]]]: ...
    def count(self) -> int: ...
    def max_number(self) -> int: ...
    def close(self) -> None: ...


class Recalled(Protocol):
    """One item recalled from long-term memory: how close, what it is, where it came from."""

    score: float
    kind: str  # episode, fact, note or procedure
    id: str
    text: str
    gist: str
    source: str
    date: str
    metadata: dict[str, Any]
    trust: float
    hit_count: int
    stale: bool


class LongTermStore(Protocol):
    """What a run needs from long-term memory: recall before, an episode and facts after."""

    # A topic is a repository's identity: its keys (root commit, remote) separated by spaces;
    # `topics` given to a read keeps it to those repositories (a match on any key).
    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        topics: list[str] | None = None,
        min_score: float | None = None,  # None: the store's own floor
    ) -> Sequence[Recalled]: ...
    def procedures(self, topic: str, k: int = 5) -> Sequence[Recalled]: ...
    def listing(
        self, topics: list[str], min_trust: float = 0.5, limit: int = 1000
    ) -> Sequence[Recalled]: ...
    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int: ...
    def associate(
        self,
        text: str,
        *,
        now: datetime | None = None,
        k: int = 3,
        threshold: float | None = None,
        min_trust: float = 0.0,
        kinds: tuple[str, ...] = ("fact", "note", "procedure"),
        topics: list[str] | None = None,
        count: bool = True,
    ) -> Sequence[Recalled]: ...
    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None: ...
    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> Sequence[Recalled]: ...
    def adopt(self, legacy: str, topic: str) -> int: ...
    def upgrade_ids(self) -> int: ...  # the named upgrade `content-ids`
    def add_episode(self, ep: Episode) -> None: ...
    def add_fact(
        self,
        text: str,
        source: str,
        trust: float = 1.0,
        *,
        now: datetime | None = None,
        ttl_days: float = 0,
        topic: str = "",
        run_id: str = "",
        files: dict[str, str] | None = None,
    ) -> str: ...
    def add_procedure(
        self,
        cmd: str,
        task: str,
        *,
        topic: str,
        run_id: str = "",
        files: dict[str, str] | None = None,
        now: datetime | None = None,
        ttl_days: float = 0,
    ) -> str: ...
    def curate(
        self,
        text: str,
        *,
        topic: str,
        origin_event_id: str,
        now: datetime | None = None,
        trust: float = 0.5,
        ttl_days: float = 90,
        run_id: str = "",
        task: str = "",
    ) -> str: ...
    def expire(self, now: datetime | None = None, ttl_days: float | None = None) -> int: ...
    def open_in_background(self, after_s: float = 0.0) -> None: ...  # may do nothing
    def close(self) -> None: ...


class CommandOutcome(Protocol):
    """How a command ended: its exit code (None when killed) and its captured output (at a
    timeout, what it printed until then); the timeout it ran under."""

    exit_code: int | None
    output: str
    timed_out: bool
    timeout_s: float


class Workspace(Protocol):
    """The repository as a run uses it; `protected` holds the user's own uncommitted paths."""

    root: Path
    protected: set[str]

    def preflight(self, allow_dirty: bool, resuming: str | None = None) -> set[str]: ...
    def resume_on(self, branch: str, protected: Iterable[str]) -> None: ...
    def start_branch(self, name: str) -> None: ...
    def head(self) -> str: ...
    def current_branch(self) -> str | None: ...
    def diff_stat(self, commit: str) -> str: ...
    def has_run_commit(self, commit: str, branch: str, run_id: str) -> bool: ...
    def run_commit_ahead_of(self, commit: str, branch: str, run_id: str) -> bool: ...
    def list_files(self) -> list[str]: ...
    def changed_files(self) -> list[str]: ...
    def commit(self, paths: list[str], message: str) -> str | None: ...
    def hold_branch(self) -> None:
        """Note where an attempt begins (the run's branch, its commit, git's index)."""
        ...

    def take_back(self, who: str = "the model's commands") -> str:
        """HEAD back on the run's branch at the held commit, the work tree as it is: what a
        command committed is uncommitted work again. The line that says so, "" if none."""
        ...

    def diff(self) -> str: ...
    def run_argv(self, argv: list[str]) -> CommandOutcome: ...
    def refusal(self, cmd: str) -> str | None: ...
    def tree(self) -> str: ...
    def changed_since(self, tree: str, branch: str) -> set[str]: ...
    def blob_at(self, commit: str, path: str) -> str | None: ...
    def uncommittable(self) -> list[str]: ...
    def set_aside(self, paths: list[str]) -> AbstractContextManager[None]: ...


class Console(Protocol):
    """Where a run's events go and where the human is asked."""

    def emit(self, ev: Event) -> None: ...
    def approve_plan(self, plan_event: PlanMade) -> bool: ...
    def approve_command(self, cmd: str) -> str: ...
    def approve_tool(self, call: str) -> str: ...
    def ask_escalation(self, ev: Escalated) -> str: ...
    def stream_text(self, delta: str) -> None: ...
    def drop_stream(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class HookTask:
    """The run and the task a hook runs in (index -1: none, at the end of the run)."""

    run_id: str
    goal: str = ""
    index: int = -1


class Hooks(Protocol):
    """The user's commands around tool calls, verified tasks and the end of a run.

    Each method runs the hooks configured for its point and returns what each one did; a
    `blocks` among them stops the tool (`before_tool`) or fails the task (`task_verified`).
    """

    def before_tool(self, at: HookTask, tool: str, args: str) -> Sequence[HookRan]: ...
    def after_tool(
        self, at: HookTask, tool: str, args: str, result: dict[str, Any]
    ) -> Sequence[HookRan]: ...
    def task_verified(self, at: HookTask, verdict: dict[str, Any]) -> Sequence[HookRan]: ...
    def run_end(self, at: HookTask, outcome: dict[str, Any], after: int = 0) -> Sequence[HookRan]:
        """The run_end hooks from the `after`-th on (the earlier ones ran, or were stopped)."""
        ...

    def longest(self, event: str) -> float:
        """The seconds the hooks of `event` may take together (their timeouts; 0: none)."""
        ...


class HookStopped(KeyboardInterrupt):
    """Ctrl-C stopped a hook at work: raised by a `Hooks` method with what the hooks of that
    round did, the stopped one last, and what is left after it (how many, their timeouts).
    It is a KeyboardInterrupt: what does not look for it stops as on any Ctrl-C."""

    def __init__(self, ran: Sequence[HookRan], left: int, left_s: float) -> None:
        super().__init__()
        self.ran = tuple(ran)
        self.left = left
        self.left_s = left_s


class ToolReply(Protocol):
    """What a provided tool answered: text for the model, whether it worked, a line for the log."""

    @property
    def text(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def summary(self) -> str: ...


class ToolProvider(Protocol):
    """Tools from outside the agent (MCP servers): fixed for the run, called by their names."""

    def specs(self) -> list[dict[str, Any]]:
        """The tools as Chat Completions function tools, in a stable order."""
        ...

    def owns(self, name: str) -> bool:
        """Whether `name` is one of this provider's tools."""
        ...

    def call(self, name: str, args: dict[str, Any]) -> ToolReply:
        """Run the tool; every failure is a reply with `ok` false, never an exception."""
        ...
