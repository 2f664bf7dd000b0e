"""What a run takes from long-term memory and what it leaves there.

At the start: the repository's memory digest (digest.py: its facts, notes and procedures
within a token share, each counted as a hit once a run, resumed or not, and its closest
episodes), as one fenced block. On a failed
attempt: how earlier runs fixed the same failure. At the end: one episode (with the fixes
this run found), one procedure per verified acceptance command, every note the model took
(trust 0.5), the facts the model extracts (trust 0.5), then expiry of what went unused;
each on its own, so one the store refuses costs none of the others and is named.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from agent_cli.agent.learn import codemap, digest
from agent_cli.agent.learn.digest import Digest
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunRecord
from agent_cli.core.errors import AgentError, MemoryUnavailable
from agent_cli.core.models import CommandRun, Episode, Fact, Fix, TaskRecord
from agent_cli.core.protocols import LongTermStore
from agent_cli.core.text import shorten
from agent_cli.memory.longterm.records import format_for_context, mark_stale
from agent_cli.memory.thresholds import OFFLINE, Thresholds

DIGEST_TOKENS = 1500  # the memory digest's share of a request (the memory_digest_tokens setting)
# facts and notes closer than this to the goal are recalled into a run (the offline embedder's)
PLAN_MIN_SCORE = OFFLINE.associate_min_score
NOTE_TRUST = 0.5
BlobOf = Callable[[str], "str | None"]


class Tally(Protocol):
    """What a run's tools did: the commands with their exit codes, the files written."""

    commands: list[tuple[str, int | None]]
    touched: set[str]
    tools_used: list[str]


@dataclass
class Learned:
    """What the run itself noticed, saved with the run so a resumed run keeps it."""

    notes: list[dict[str, str]] = field(default_factory=list)  # {"id", "text", "task"}
    failures: dict[str, list[str]] = field(default_factory=dict)  # task index -> signatures
    fixes: list[Fix] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)  # by the run's earlier sessions too
    # the items the run's digest counted a hit on: a resumed run sends them again, uncounted
    recalled: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "notes": self.notes,
            "failures": self.failures,
            "fixes": [f.model_dump() for f in self.fixes],
            "tools_used": self.tools_used,
            "recalled": self.recalled,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Learned:
        data = data or {}
        return cls(
            list(data.get("notes", [])),
            dict(data.get("failures", {})),
            [Fix.model_validate(f) for f in data.get("fixes", [])],
            [str(name) for name in data.get("tools_used", [])],
            [str(item) for item in data.get("recalled", [])],
        )

    def used(self, tools: Sequence[str]) -> list[str]:
        """Add the tools a session called to those of the run's earlier sessions; all of them."""
        self.tools_used = sorted({*self.tools_used, *tools})
        return self.tools_used

    def failed(self, index: int, signatures: list[str]) -> None:
        """Remember the failures of an attempt at task `index`."""
        seen = self.failures.setdefault(str(index), [])
        seen += [s for s in signatures if s not in seen]

    def passed(self, index: int, task: str, summary: str) -> None:
        """Task `index` passed: if it had failed before, how it was fixed is a Fix."""
        signatures = self.failures.pop(str(index), [])
        if signatures:
            self.fixes.append(Fix(signatures=signatures[:20], task=task, summary=summary[:1000]))


def recall_for_run(
    longterm: LongTermStore,
    goal: str,
    topics: list[str],
    blob_of: BlobOf,
    count: bool = True,
    digest_tokens: int = DIGEST_TOKENS,
    thresholds: Thresholds = OFFLINE,
    root: Path | None = None,
    counted: Collection[str] = (),
) -> Digest:
    """The memory digest of the repository `topics[0]` (its identity; the rest are names
    its items may still be filed under) a run starts with, its block (`digest.render`)
    within `digest_tokens` by exact count (`digest.fit`), recalled
    by the embedder's `thresholds`, its items tied to the code of the work tree `root` when
    given (codemap.py), staleness marked; hits are counted for what it includes when `count`,
    but for the ids in `counted` (the run counted them already: it is resumed)."""
    found = digest.build(
        longterm,
        goal,
        topics,
        digest_tokens,
        min_score=thresholds.associate_min_score,
        k=thresholds.associate_k,
        episode_min_score=thresholds.episode_min_score,
        code=(lambda: codemap.read(root)) if root is not None else None,
    )
    mark_stale(found.items, blob_of)  # before it is fitted: a stale mark takes tokens
    found = digest.fit(found, digest_tokens)  # the block as sent, counted: hits on it only
    if count:
        longterm.count_hits([r for r in found.items if r.id not in counted])
    return found


def fixes_block(longterm: LongTermStore, signatures: list[str], run_id: str, topic: str) -> str:
    """How earlier runs in the repository `topic` fixed these failures, fenced; empty when
    none did."""
    fixes = longterm.fixes_for(signatures, exclude_run=run_id, topics=[topic])
    if not fixes:
        return ""
    return (
        "Earlier runs had the failure this task just had, and fixed it so:\n"
        + format_for_context(fixes)
    )


def build_episode(
    run: RunRecord,
    state: AgentState,
    commands: list[tuple[str, int | None]],
    files: list[str],
    signatures: list[str],
    fixes: Sequence[Fix] = (),
    tools_used: Sequence[str] = (),
    topic: str = "",
) -> Episode:
    """The episode of a run from its saved record and the AgentState."""
    tasks = [
        TaskRecord(
            goal=t.goal,
            status=t.status,
            attempts=t.earlier_attempts + t.attempts,  # every session's
            acceptance_cmd=t.acceptance_cmd,
            exit_code=t.exit_code,
        )
        for t in state.plan
    ]
    done = sum(t.status == "verified" for t in state.plan)
    summary = f"{done} of {len(tasks)} task(s) verified."
    rejected = [t for t in state.plan if t.status == "rejected"]
    if rejected:
        summary += f" Rejected: {rejected[0].goal}. Why: {rejected[0].last_reason[:300]}"
    fixed = sorted({s for f in fixes for s in f.signatures})
    return Episode(
        run_id=run.run_id,
        goal=state.goal,
        plan=[t.goal for t in state.plan],
        tasks=tasks,
        status=run.status,
        files_touched=sorted(set(files)),
        commands=[CommandRun(cmd=c, exit_code=e) for c, e in commands[-50:]],
        failure_signatures=(fixed + sorted(set(signatures) - set(fixed)))[:20],
        fixes=list(fixes),
        tools_used=sorted(set(tools_used)),
        topic=topic,
        summary=summary,
        prompt_tokens=run.usage.prompt_tokens,
        completion_tokens=run.usage.completion_tokens,
        cost_usd=run.usage.cost_usd,
        started_at=run.started_at,
        ended_at=run.updated_at,
    )


def verified_commands(state: AgentState, accept_cmds: list[str]) -> list[tuple[str, str]]:
    """(acceptance command, task goal) for each task the harness saw pass with a command."""
    out = []
    for t in state.plan:
        cmd = t.acceptance_cmd or "; ".join(accept_cmds)
        if t.status == "verified" and cmd and t.exit_code == 0:
            out.append((cmd, t.goal))
    return out


def named_files(cmd: str, is_file: Callable[[str], bool]) -> list[str]:
    """The repository files a command names (`tests/test_x.py::test_y` names tests/test_x.py)."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return []
    paths = {w.split("::", 1)[0] for w in words if not w.startswith("-")}
    return sorted(p for p in paths if p and is_file(p))


@dataclass
class Kept:
    """What `remember` stored of a run's learning, and what it did not, each with why."""

    stored: list[str] = field(default_factory=list)
    missed: list[tuple[str, str]] = field(default_factory=list)  # (what, why)

    def notice(self) -> str:
        """One line for the user on what was not stored and why; "" when everything was."""
        whys: dict[str, list[str]] = {}
        for what, why in self.missed:
            whys.setdefault(why, []).append(what)
        said = "; ".join(f"{', '.join(whats)}: {why}" for why, whats in whys.items())
        if not said:
            return ""
        if not self.stored:
            return f"long-term memory not updated: {said}"
        return f"long-term memory updated except for {said}"


def remember(
    longterm: LongTermStore,
    *,
    run: RunRecord,
    state: AgentState,
    toolbox: Tally,
    learned: Learned,
    signatures: list[str],
    topic: str,
    blob_of: BlobOf,
    ttl_days: float,
    accept_cmds: list[str],
    facts: Sequence[Fact] = (),
) -> Kept:
    """Write what the run learned into long-term memory, then archive what went unused.

    Each item is stored on its own: one the store refuses (a note without text, say) is
    left out and said in the result, and the rest are stored. Once the store cannot be
    reached, nothing more is tried."""
    run_id = run.run_id
    kept = Kept()

    def seen(paths: list[str]) -> dict[str, str]:
        return {p: b for p in paths if (b := blob_of(p)) is not None}

    down = ""  # why the store cannot be reached: the rest is not tried, waiting on no timeout

    def store(what: str, write: Callable[[], object]) -> None:
        nonlocal down
        if down:
            kept.missed.append((what, down))
            return
        try:
            write()
        except MemoryUnavailable as e:
            down = e.one_line()
            kept.missed.append((what, down))
        except Exception as e:  # this item only: the others are still worth keeping
            kept.missed.append((what, e.one_line() if isinstance(e, AgentError) else repr(e)))
        else:
            kept.stored.append(what)

    episode = build_episode(
        run,
        state,
        toolbox.commands,
        sorted(toolbox.touched),
        signatures,
        learned.fixes,
        tools_used=learned.used(toolbox.tools_used),
        topic=topic,
    )
    store("the episode", partial(longterm.add_episode, episode))
    for cmd, goal in verified_commands(state, accept_cmds):
        files = seen(named_files(cmd, lambda p: blob_of(p) is not None))
        store(
            f"the procedure `{shorten(cmd, 60)}`",
            partial(longterm.add_procedure, cmd, goal, topic=topic, run_id=run_id, files=files),
        )
    for note in learned.notes:
        store(
            f"note {note['id']}",
            partial(
                longterm.curate,
                note["text"],
                topic=topic,
                origin_event_id=f"{run_id}/{note['id']}",
                trust=NOTE_TRUST,
                ttl_days=ttl_days,
                run_id=run_id,
                task=note["task"],
            ),
        )
    for n, fact in enumerate(facts, 1):
        store(
            f"fact {n} of {len(facts)}",
            partial(
                longterm.add_fact,
                fact.text,
                f"model, run {run_id}",
                trust=NOTE_TRUST,
                topic=topic,
                run_id=run_id,
                files=seen(fact.files),
            ),
        )
    store("the archiving of unused items", lambda: longterm.expire(ttl_days=ttl_days))
    return kept
