"""Run A of every pair, in order, in one repository per project: what the agent learned.

Each run A starts from `main`, where the previous runs' work was merged; a fix pair first
commits its regression on `main`. After all of them, the pairs' later commits land on `main`
(the changes that make some learned items stale). The long-term store is then exported with
the agent's own `export`: those records are what every system learned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentrun
from agentrun import call, facts, plan
from projects import commit_files, git, repository
from scenarios import Pair, Scenario

from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.records import one_line

BENCH_SOURCE = Path(__file__).resolve().parent
AGENT_SOURCE = BENCH_SOURCE.parents[1] / "agent_cli"


@dataclass
class Learned:
    """One project after its runs A: the repository, the records, and whose each one is."""

    scenario: Scenario
    repo: Path
    records: list[dict[str, Any]]
    owner: dict[str, str]  # record id -> pair id
    failed: list[str]  # "pair: why" of each run A that did not end verified

    def lacking(self, needed: set[str]) -> list[str]:
        """The kinds of item among `needed` (fact, note, procedure) the runs A left none of."""
        kinds = {r["metadata"].get("kind") for r in self.records}
        return [k for k in ("fact", "note", "procedure") if k in needed and k not in kinds]


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
        before = git(repo, "rev-parse", "main").strip()
        if pair.need == "fix":
            commit_files(repo, break_files(repo, pair), f"regression for {pair.id}")
        why = ""
        try:
            done = agentrun.run(repo, pair.a_goal, script_a(scn, pair), home)
        except Exception as e:  # a run that crashes is one failed run A
            why = f"{type(e).__name__}: {one_line(str(e), 200)}"
        else:
            status = done.events[-1].get("status") if done.events else None
            if done.code != 0 or status != "verified":
                why = f"exit {done.code}, {status}" + (f" ({done.why})" if done.why else "")
        if why:  # its pair is a miss: what the run left (a note, its episode) is no pair's
            failed.append(f"{pair.id}: {why}")
            # main as it was before this pair: a fix pair's regression is not left on it
            git(repo, "checkout", "-q", "-f", "main")
            git(repo, "reset", "-q", "--hard", before)
            git(repo, "clean", "-fdq")
            continue
        owner_of_run[done.run_id] = pair.id
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
    """What runs A depend on: the pairs, the project, the agent's own source, the benchmark's
    own code (the scripted replies, how runs are made) and the Python and pytest that the runs
    A's checks start (`python -m pytest`, found on PATH as the agent finds it)."""
    h = hashlib.sha256(repr(scn).encode())
    for root, pattern in ((AGENT_SOURCE, "**/*.py"), (BENCH_SOURCE, "*.py")):
        for path in sorted(root.glob(pattern)):
            h.update(f"{root.name}/{path.relative_to(root)}".encode() + b"\0" + path.read_bytes())
    h.update(checker_version().encode())
    return h.hexdigest()[:20]


@functools.cache
def checker_version() -> str:
    """The versions of the Python and pytest that `python -m pytest` runs here."""
    try:
        got = subprocess.run(
            ["python", "-c", "import sys, pytest; print(sys.version, pytest.__version__)"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no python: {e}"
    return (got.stdout or got.stderr).strip()


def learn_cached(scn: Scenario, cache: Path, work: Path, fresh: bool = False) -> Learned:
    """`learn`, or its saved result when neither the pairs, the agent's or the benchmark's code
    nor the checks' Python and pytest changed. Only runs A that all ended verified are saved:
    a failed one (an environment's or the agent's) is run again by the next call."""
    saved = cache / "learned" / f"{scn.project.name}-{source_key(scn)}"
    repo = work / scn.project.name
    for earlier in (repo, work / f"{scn.project.name}-learn-home"):  # a kept --work DIR's
        shutil.rmtree(earlier, ignore_errors=True)
    if not fresh and (saved / "done.json").exists():
        data = json.loads((saved / "done.json").read_text())
        if not data["failed"]:  # an earlier version saved failed runs A too: not those
            shutil.copytree(saved / "repo", repo)
            return Learned(scn, repo, data["records"], data["owner"], [])
    got = learn(scn, cache, work)
    shutil.rmtree(saved, ignore_errors=True)
    if not got.failed:
        shutil.copytree(repo, saved / "repo", symlinks=True)
        done = {"records": got.records, "owner": got.owner, "failed": []}
        (saved / "done.json").write_text(json.dumps(done))
    return got
