"""Shared pieces of the tests of many runs at once: a goal's replies, the user's checkout."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from conftest import git
from reliability.relkit import call, finish, no_facts, plan, task


def goal_of(name: str) -> str:
    """The goal that creates `name`: its words are the key of the run's script."""
    return f"Create {name}"


def creates(name: str, delay: float = 0.0) -> list[dict]:
    """The replies of a run that creates `name` (checked by `test -f NAME`) and is verified."""
    steps = [
        plan(task(goal_of(name), f"test -f {name}"), goal=goal_of(name)),
        call("write_file", path=name, content=f"{name}\n"),
        finish(f"created {name}"),
        no_facts(),
    ]
    return [{**s, "delay": delay} for s in steps] if delay else steps


def rejected(name: str) -> list[dict]:
    """The replies of a run whose one task is rejected twice: it writes the wrong file."""
    return [
        plan(task(goal_of(name), f"test -f {name}"), goal=goal_of(name)),
        call("write_file", path=f"not-{name}", content="wrong\n"),
        finish("wrote a file"),
        finish("tried again"),
        no_facts(),
    ]


def hinted(name: str) -> list[dict]:
    """The replies of the resumed rejected run, after the human's hint: the right file."""
    return [
        call("write_file", path=name, content=f"{name}\n"),
        finish(f"created {name}"),
        no_facts(),
    ]


def resume_hinted(agent, url: str, run_id: str, cwd: Path):
    """`agent run --resume` of the rejected run `run_id` with the hint `hinted` answers."""
    return agent(
        "run", "--resume", "--run-id", run_id, "--hint", "create eta.txt itself",
        "--yes", "--json", "--base-url", url, cwd=cwd,
    )  # fmt: skip


def checkout(repo: Path, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """The user's checkout byte for byte: HEAD, branches, index, stash and every file (but .git,
    .agent and `skip`)."""
    files = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel.split("/")[0] in (".git", ".agent") or rel in skip or not path.is_file():
            continue
        files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "head": (repo / ".git" / "HEAD").read_text(),
        "main": git(repo, "rev-parse", "refs/heads/main"),
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "stash": git(repo, "stash", "list"),
        "files": files,
    }


def worktrees(repo: Path) -> list[str]:
    """The work trees git knows of the repository (the main one first)."""
    out = git(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def state(repo: Path, run_id: str) -> dict:
    return json.loads((repo / ".agent" / "runs" / run_id / "state.json").read_text())


def branch_files(repo: Path, branch: str) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", branch).split()


def status(where: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=where,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


# A stand-in for `agent run --worktree --json ... -- GOAL` (a `python -c` one-liner, no agent):
# what the batch reads of a run is its JSON events, its exit and its signals. By its goal's
# words: "waits" until SIGTERM, "costly" spends $0.30 then waits, "fails" fails with a message
# naming its goal, else it is verified. On SIGTERM it says run_done (interrupted) and takes
# half a second, as a run saving its state does, before it exits 130.
FAKE_RUN = """
import json, os, signal, sys, time
goal, rid = sys.argv[-1], f"r{os.getpid()}"
def say(**ev):
    print(json.dumps({**ev, "run_id": rid}), flush=True)
def stop(signum, frame):
    say(event="run_done", status="interrupted", steps=1, message="stopped")
    time.sleep(0.5)
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
say(event="run_started", branch="", base="main")
if "costly" in goal:
    say(event="tool_result", step=1, cost_usd=0.3)
if "waits" in goal or "costly" in goal:
    while True:
        time.sleep(0.05)
if "fails" in goal:
    why = f"model 'nope' is not served\\nfor {goal}"
    say(event="run_done", status="failed", steps=0, message=why)
    sys.exit(1)
say(event="run_done", status="verified", steps=1)
"""
FAKE_ARGV0 = [sys.executable, "-c", FAKE_RUN]
