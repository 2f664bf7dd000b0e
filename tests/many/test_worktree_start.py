"""What a new worktree run says as it starts, in this process on a real repository."""

from __future__ import annotations

import io
import json
import os

from agent_cli.agent.run.live import checkout_lock
from agent_cli.agent.run.store import RunRecord, RunStore
from agent_cli.cli.worktree import place_for
from agent_cli.ui.console import RunConsole
from agent_cli.workspace.lock import RunLock
from conftest import git, make_repo


def test_a_changed_file_whose_name_is_not_utf8_is_named_escaped_in_the_json_stream(tmp_path):
    """`agent batch` reads each run's --json events: the notice of the user's changes left
    behind must be JSON, whatever bytes their names hold."""
    repo = make_repo(tmp_path / "repo")
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("mine\n")
    out = io.StringIO()
    place = place_for(
        repo,
        repo / ".agent",
        worktree=True,
        auto=False,
        resumed=None,
        plan_only=False,
        allow_dirty=False,
        console=RunConsole("json", out, io.StringIO()),
    )
    assert place is not None and place.lock is not None
    place.lock.release()
    said = [json.loads(line)["text"] for line in out.getvalue().splitlines()]
    assert any("your uncommitted changes (caf\\xe9.txt)" in text for text in said), said
    assert (repo / os.fsdecode(b"caf\xe9.txt")).read_text() == "mine\n"


def test_beside_a_run_in_the_checkout_a_worktree_run_starts_from_that_runs_base_branch(tmp_path):
    """worktree = "auto": the checkout is on the other run's branch, its work in progress; the
    new run starts from the user's branch, as if the checkout were the user's own."""
    repo = make_repo(tmp_path / "repo")
    users = git(repo, "rev-parse", "main").strip()
    state_dir = repo / ".agent"
    lock = RunLock(checkout_lock(state_dir, repo))
    lock.acquire()
    lock.name("run-c")
    git(repo, "switch", "-q", "-c", "agent/run-c")
    (repo / "half.txt").write_text("task 1 of the other run\n")
    git(repo, "add", "half.txt")
    git(repo, "commit", "-q", "-m", "task 1\n\nAgent-Run: run-c")
    RunStore(state_dir, repo=str(repo.resolve())).save(
        RunRecord(run_id="run-c", goal="g", branch="agent/run-c", base=users, base_branch="main")
    )
    try:
        place = place_for(
            repo,
            state_dir,
            worktree=False,
            auto=True,
            resumed=None,
            plan_only=False,
            allow_dirty=False,
            console=RunConsole("json", io.StringIO(), io.StringIO()),
        )
    finally:
        lock.release()
    assert place is not None and place.lock is not None
    place.lock.release()
    assert place.base_branch == "main"
    assert git(place.path, "rev-parse", "HEAD").strip() == users
    assert not (place.path / "half.txt").exists()
