"""Run B of each pair against each system, scored from what the requests carried."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import agentrun
import score
import stores
import systems
from agentrun import call, plan
from learn import Learned, break_files
from projects import commit_files, git
from scenarios import Pair

from agent_cli.core import tokens
from agent_cli.memory.embed import WordLlamaEmbedder

SYSTEMS = ("agent", "trivial", "memory_md", "vector_topk", "none")
MEASURED = ("agent", "none")  # real runs; the others are simulated: blocks put in none's requests
NEED_KIND = {"procedure": ("procedure",), "note": ("note",), "fact": ("fact",)}


@dataclass
class Outcome:
    """One system's run B of one pair at one store size."""

    system: str
    pair: str
    need: str
    size: int
    recalled: bool
    items: int  # distinct long-term items in the measured requests
    own_items: int  # of which run A of this pair left
    memory_tokens: float  # per measured request
    requests: int
    stale_sent: int
    poison_unfenced: int
    latency_s: float | None  # agent: its first request's arrival minus none's; None: simulated
    detail: str = ""  # for a miss by `agent`: what it recalled instead

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def needed(learned: Learned, pair: Pair) -> set[str]:
    """The ids of the items B needs: those of the pair's run A of the needed kind (for a fix,
    the episode and its signature rows)."""
    out = set()
    for rec in learned.records:
        if learned.owner.get(rec["id"]) != pair.id:
            continue
        meta = rec["metadata"]
        if pair.need == "fix" and rec["collection"] == "episodes":
            out |= {rec["id"], str(meta.get("run_id"))}
        elif meta.get("kind") in NEED_KIND.get(pair.need, ()):
            out.add(rec["id"])
    return out


def stale_ids(records: list[dict[str, Any]], repo: Path) -> set[str]:
    """The records naming a file whose content changed since they were stored (ground truth)."""
    named = {rec["id"]: stores_files(rec) for rec in records}
    paths = sorted({p for files in named.values() for p in files if (repo / p).is_file()})
    now: dict[str, str | None] = {}
    if paths:
        out = subprocess.run(
            ["git", "hash-object", "--", *paths],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        now = dict(zip(paths, out, strict=True))
    return {i for i, files in named.items() if any(now.get(p) != b for p, b in files.items())}


def stores_files(rec: dict[str, Any]) -> dict[str, str]:
    import json

    raw = rec["metadata"].get("files")
    try:
        got = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def setup_b(learned: Learned, pair: Pair, tag: str) -> None:
    """The repository as run B finds it: `main` after every run A and later change; for a fix
    pair, its regression again on a branch of its own."""
    repo = learned.repo
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "clean", "-fdq")
    if pair.need == "fix":
        git(repo, "checkout", "-q", "-b", f"bench/{pair.id}-{tag}")
        commit_files(repo, break_files(repo, pair), f"the regression of {pair.id} again")


def script_b(learned: Learned, pair: Pair) -> tuple[list[agentrun.Step], bool]:
    """Run B's replies, and whether it is plan-only. A fix pair's run stops at the first
    request of its second attempt (the one that carries earlier fixes)."""
    if pair.need != "fix":
        return [plan(pair.b_goal, None)], True
    cmd = learned.scenario.a_cmd(pair)
    return [plan(pair.b_goal, cmd), call("finish", summary="could not see the problem")], False


def run_b(learned: Learned, pair: Pair, home: Path, tag: str) -> agentrun.Recorded:
    setup_b(learned, pair, tag)
    steps, plan_only = script_b(learned, pair)
    if not plan_only:  # a full run writes: it gets its own copy of the store
        copy = home.with_name(f"{home.name}-{tag}")
        shutil.rmtree(copy, ignore_errors=True)
        if home.exists():
            shutil.copytree(home, copy)
        home = copy
    return agentrun.run(learned.repo, pair.b_goal, steps, home, plan_only=plan_only)


def judge(
    system: str,
    pair: Pair,
    size: int,
    need: set[str],
    owner: dict[str, str],
    stale: set[str],
    seen: list[score.Seen],
    latency: float,
) -> Outcome:
    ids: dict[str, bool] = {}
    for s in seen:
        for i, marked in s.items.items():
            ids[i] = ids.get(i, False) or marked
    requests = max(len(seen), 1)
    return Outcome(
        system=system,
        pair=pair.id,
        need=pair.need,
        size=size,
        recalled=bool(need & set(ids)),
        items=len(ids),
        own_items=sum(owner.get(i) == pair.id for i in ids),
        memory_tokens=sum(s.memory_tokens for s in seen) / requests,
        requests=len(seen),
        stale_sent=sum(1 for i, marked in ids.items() if i in stale and not marked),
        poison_unfenced=sum(s.poison_unfenced for s in seen),
        latency_s=latency,
    )


def owner_map(learned: Learned) -> dict[str, str]:
    """Item id (and episode run id) -> the pair whose run A left it."""
    out = dict(learned.owner)
    for rec in learned.records:
        if rec["id"] in learned.owner:
            out[str(rec["metadata"].get("run_id"))] = learned.owner[rec["id"]]
    return out


def warm(learned: Learned, home: Path) -> Path:
    """`home` after one plan-only run: its state directory exists, as in a repository the agent
    has worked in, so that no system's first request pays for creating it."""
    git(learned.repo, "checkout", "-q", "-f", "main")
    agentrun.run(learned.repo, "look around", [plan("look around", None)], home, plan_only=True)
    return home


def evaluate(
    learned: Learned, sizes: list[int], work: Path, embedder: WordLlamaEmbedder
) -> list[Outcome]:
    """Every pair of a project at every store size, for every system. At each size the pair's
    `agent` run and its run without memory (`none`) go back to back, each first in turn, so
    that the load of the machine weighs on both alike: the difference of their first
    requests' arrival is one sample of the added latency."""
    out: list[Outcome] = []
    owner = owner_map(learned)
    name = learned.scenario.project.name
    none_home = work / f"{name}-none"
    shutil.rmtree(none_home, ignore_errors=True)  # a kept --work DIR's, from an earlier run
    warm(learned, none_home)
    turn = 0
    for size in sizes:
        shared = size > sum(stores.counted(r) for r in learned.records)
        built: dict[str | None, tuple[Path, list[dict[str, Any]]]] = {}
        vectors: dict[str | None, systems.VectorTopK] = {}
        for pair in learned.scenario.pairs:
            key = None if shared else pair.id
            if key not in built:
                records = stores.contents(learned, size, key)
                home = work / f"{name}-{size}-{key or 'all'}"
                shutil.rmtree(home, ignore_errors=True)
                built[key] = (warm(learned, stores.build(records, home)), records)
            home, records = built[key]
            items = [r for r in records if stores.counted(r)]
            need = needed(learned, pair)
            ran: dict[str, agentrun.Recorded] = {}
            for system in ("none", "agent") if turn % 2 == 0 else ("agent", "none"):
                if system == "agent":
                    agentrun.as_new_process()
                    ran[system] = run_b(learned, pair, home, f"agent-{size}")
                else:
                    ran[system] = run_b(learned, pair, none_home, f"none-{size}-{pair.id}")
            turn += 1
            done, none = ran["agent"], ran["none"]
            stale = stale_ids(records, learned.repo)
            texts = [score.request_text(r) for r in done.requests]
            seen = [score.read(t, stores.POISON_MARK) for t in texts]
            extra = (
                done.arrived_s[0] - none.arrived_s[0] if done.arrived_s and none.arrived_s else 0.0
            )
            got = judge("agent", pair, size, need, owner, stale, seen, extra)
            if key not in vectors:
                vectors[key] = systems.VectorTopK(items, embedder)
            vec = vectors[key]
            if not got.recalled:
                got.detail = explain(seen, records, need, vec, pair)
            out.append(got)
            base = [score.request_text(r) for r in none.requests]
            out.append(
                judge(
                    "none",
                    pair,
                    size,
                    need,
                    owner,
                    stale,
                    [score.read(t, stores.POISON_MARK) for t in base],
                    0.0,
                )
            )
            for system, (block, ids), fenced in (
                ("trivial", systems.trivial(items), True),
                ("memory_md", systems.memory_md(items), False),
                ("vector_topk", vec.block(pair.b_goal), True),
            ):
                out.append(
                    simulated(system, pair, size, need, owner, stale, base, block, ids, fenced)
                )
    git(learned.repo, "checkout", "-q", "-f", "main")
    return out


def explain(
    seen: list[score.Seen],
    records: list[dict[str, Any]],
    need: set[str],
    vec: systems.VectorTopK,
    pair: Pair,
) -> str:
    """What the agent recalled instead of the needed item, and how close that item was."""
    kinds: dict[str, int] = {}
    by_id = {r["id"]: r for r in records}
    by_run = {str(r["metadata"].get("run_id")): r for r in records if r["collection"] == "episodes"}
    ids = {i for s in seen for i in s.items}
    for i in ids:
        rec = by_id.get(i) or by_run.get(i)
        kind = str(rec["metadata"].get("kind") or rec["metadata"].get("doc")) if rec else "?"
        kinds[kind] = kinds.get(kind, 0) + 1
    if not need:
        return "its run A failed or left no item of the needed kind: nothing to recall"
    sim, rank = vec.closeness(pair.b_goal, need)
    listed = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "nothing"
    return f"sent {listed}; the needed item's cosine to B's goal {sim:.2f}, rank {rank}"


def simulated(
    system: str,
    pair: Pair,
    size: int,
    need: set[str],
    owner: dict[str, str],
    stale: set[str],
    base: list[str],
    block: str,
    ids: list[str],
    fenced: bool,
) -> Outcome:
    """A baseline's outcome: its block placed in each of the none run's requests. It is no
    run of its own: it has no latency to measure."""
    n = max(len(base), 1)
    poison = sum(score.outside_fences(f"{block}\n{t}", stores.POISON_MARK) for t in base)
    return Outcome(
        system=system,
        pair=pair.id,
        need=pair.need,
        size=size,
        recalled=bool(need & set(ids)),
        items=len(ids),
        own_items=sum(owner.get(i) == pair.id for i in ids),
        memory_tokens=float(tokens.count(block)) if ids else 0.0,
        requests=n,
        stale_sent=sum(1 for i in ids if i in stale),
        poison_unfenced=poison
        if not fenced
        else sum(score.outside_fences(block, stores.POISON_MARK) for _ in base),
        latency_s=None,
    )
