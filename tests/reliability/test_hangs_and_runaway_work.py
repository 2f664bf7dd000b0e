"""Hangs and runaway work (issue 21, class 14): input the harness did not write never holds
a run for ever. End to end here: a FIFO `.gitignore` made by the model's command; the other
bounds are tested where they live (tests/workspace, tests/llm, tests/memory)."""

from __future__ import annotations

import time

from conftest import git
from reliability.relkit import (
    GOAL,
    call,
    finish,
    make_done,
    plan,
    read_state,
    repo_with,
    task,
    task_statuses,
)


def test_a_fifo_gitignore_stops_the_run_at_once_and_resume_commits_the_task(
    run_agent, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"keep.txt": "keep\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    srv = fake_server([plan(task()), make_done(), call("run", cmd="mkfifo .gitignore"), finish()])
    started = time.monotonic()
    proc = run_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo, timeout=100)
    assert time.monotonic() - started < 60  # each harness git call used to wait 120 s
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ".gitignore is not a regular file (a FIFO)" in proc.stdout
    assert git(repo, "rev-parse", "HEAD").strip() == base
    assert read_state(repo)["status"] == "failed"
    assert task_statuses(repo) == ["running"]
    (repo / ".gitignore").unlink()
    rest = fake_server([finish()])
    resumed = run_agent("run", "--resume", "--yes", "--json", "--base-url", rest.url, cwd=repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "done.txt" in git(repo, "show", "--stat", "--format=", "HEAD")
