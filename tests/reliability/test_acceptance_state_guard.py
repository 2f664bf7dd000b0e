"""A real `agent run` whose acceptance command damages the state directory does not verify."""

from __future__ import annotations

import pytest

from conftest import git
from reliability.relkit import finish, make_done, no_facts, plan, repo_with, task

# Passes only once done.txt exists, and then deletes the state directory: no pattern sees it.
CHECK = "#!/bin/sh\ntest -f done.txt || exit 1\nfind .agent -delete 2>/dev/null\nexit 0\n"


@pytest.mark.slow
def test_a_run_whose_check_deleted_the_state_directory_is_not_verified(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"check.sh": CHECK})
    (repo / "check.sh").chmod(0o755)
    git(repo, "add", "check.sh")
    git(repo, "commit", "-qm", "check")
    before = git(repo, "rev-parse", "main")
    srv = fake_server([plan(task(cmd="./check.sh")), make_done(), finish(), no_facts()])
    proc = agent_in_process("run", "Create done.txt", "--yes", "--base-url", srv.url, cwd=repo)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "removed or changed files in the agent's state directory" in out
    assert "failed (exit code 1)" in out and "nothing committed on it" in out
    branch = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    assert branch.startswith("agent/")
    assert git(repo, "rev-parse", branch) == before  # nothing committed as verified
    assert git(repo, "rev-parse", "main") == before
