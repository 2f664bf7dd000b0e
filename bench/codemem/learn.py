"""Run A of every pair, in order, in one repository per project: what the agent learned.

Each run A starts from `main`, where the previous runs' work was merged; a fix pair first
commits its regression on `main`. After all of them, the pairs' later commits land on `main`
(the changes that make some learned items stale). The long-term store is then exported with
the agent's own `export`: those records are what every system learned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentrun
from agentrun import call, facts, plan
from projects import commit_files, git, repository
from scenarios import Pair, Scenario

from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory


@dataclass
class Learned:
    """One project after its runs A: the repository, the records, and whose each one is."""

    scenario: Scenario
    repo: Path
    records: list[dict[str, Any]]
    owner: dict[str, str]  # record id -> pair id
    failed: list[str]  # pairs whose run A did not end verified


def script_a(scn: Scenario, pair: Pair) -> list[agentrun.Step]:
    """The model's replies in run A."""
    cmd = scn.a_cmd(pair)
    if pair.need == "fix":
        assert pair.breaks is not None
        b = pair.breaks
        return [
            plan(pair.a_goal, cmd),
            call("finish", summary="the failure looks unrelated to the code; nothing changed"),
            call("edit_file", path=b.path, old=b.new, new=b.old),
            call("finish", summary=pair.a_summary),
            facts(),
        ]
    steps = [
        plan(pair.a_goal, cmd),
        call("write_file", path=scn.test_file(pair), content=pair.a_test),
    ]
    if pair.note:
        steps.append(call("note", text=pair.note))
    steps.append(call("finish", summary=f"added {scn.test_file(pair)}"))
    steps.append(facts((pair.fact, list(pair.fact_files))) if pair.fact else facts())
    return steps


def break_files(repo: Path, pair: Pair) -> dict[str, str]:
    """The files of `pair`'s regression, applied to the repository's current content."""
    assert pair.breaks is not None
    b = pair.breaks
    text = (repo / b.path).read_text()
    if text.count(b.old) != 1:
        raise ValueError(f"{pair.id}: the break's old text is not in {b.path} exactly once")
    return {b.path: text.replace(b.old, b.new)}


def learn(scn: Scenario, cache: Path, work: Path) -> Learned:
    """Every run A of `scn` in a new repository under `work`; the exported records."""
    repo = repository(scn.project, cache, work / scn.project.name)
    home = work / f"{scn.project.name}-learn-home"
    owner_of_run: dict[str, str] = {}
    failed = []
    for pair in scn.pairs:
        git(repo, "checkout", "-q", "main")
        if pair.need == "fix":
            commit_files(repo, break_files(repo, pair), f"regression for {pair.id}")
        done = agentrun.run(repo, pair.a_goal, script_a(scn, pair), home)
        owner_of_run[done.run_id] = pair.id
        status = done.events[-1].get("status") if done.events else None
        if done.code != 0 or status != "verified":
            failed.append(f"{pair.id}: exit {done.code}, {status}")
            git(repo, "checkout", "-q", "-f", "main")
            git(repo, "clean", "-fdq")
            continue
        branch = str(done.events[-1]["branch"])
        git(repo, "checkout", "-q", "main")
        git(repo, "merge", "-q", "--ff-only", branch)
    git(repo, "checkout", "-q", "main")
    for pair in scn.pairs:
        if pair.later:
            path, text = pair.later
            before = (repo / path).read_text()
            commit_files(repo, {path: before + text}, f"a later change to {path}")
    export = work / f"{scn.project.name}-learned.jsonl"
    with LongTermMemory(home / "chroma", WordLlamaEmbedder()) as mem:
        mem.export(export)
    records = [json.loads(line) for line in export.read_text().splitlines() if line.strip()]
    owner = {
        r["id"]: owner_of_run[str(r["metadata"].get("run_id"))]
        for r in records
        if str(r["metadata"].get("run_id")) in owner_of_run
    }
    return Learned(scn, repo, records, owner, failed)


def source_key(scn: Scenario) -> str:
    """What runs A depend on: the pairs, the project, and the agent's own source."""
    import hashlib

    h = hashlib.sha256(repr(scn).encode())
    root = Path(__file__).resolve().parents[2] / "agent_cli"
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:20]


def learn_cached(scn: Scenario, cache: Path, work: Path, fresh: bool = False) -> Learned:
    """`learn`, or its saved result when neither the pairs nor the agent's source changed."""
    import shutil

    saved = cache / "learned" / f"{scn.project.name}-{source_key(scn)}"
    repo = work / scn.project.name
    for earlier in (repo, work / f"{scn.project.name}-learn-home"):  # a kept --work DIR's
        shutil.rmtree(earlier, ignore_errors=True)
    if not fresh and (saved / "done.json").exists():
        shutil.copytree(saved / "repo", repo)
        data = json.loads((saved / "done.json").read_text())
        return Learned(scn, repo, data["records"], data["owner"], data["failed"])
    got = learn(scn, cache, work)
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(repo, saved / "repo", symlinks=True)
    done = {"records": got.records, "owner": got.owner, "failed": got.failed}
    (saved / "done.json").write_text(json.dumps(done))
    return got
