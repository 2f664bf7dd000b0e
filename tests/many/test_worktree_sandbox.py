"""A worktree run under bubblewrap: its commands write its own tree, never the rest of the state."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import git
from many.manykit import goal_of, status, worktrees
from reliability.relkit import call, events, finish, no_facts, plan, repo_with, task

pytestmark = pytest.mark.slow


def _bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap cannot run here")
def test_a_sandboxed_worktree_run_writes_its_tree_and_not_the_state(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    escape = "python3 -c \"open('../../runs/escaped.txt', 'w').write('x')\""
    srv = fake_server(
        [
            plan(task(goal_of("done.txt"), "test -f done.txt"), goal=goal_of("done.txt")),
            call("run", cmd="echo hi > done.txt"),
            call("run", cmd=escape),
            finish(),
            no_facts(),
        ]
    )
    proc = agent_in_process(
        "run", goal_of("done.txt"), "--worktree", "--yes", "--json", "--base-url", srv.url,
        cwd=repo, env={"AGENT_SANDBOX": "bwrap"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [e for e in events(proc.stdout) if e["event"] == "tool_result"]
    assert results[0]["ok"], results[0]
    assert not (repo / ".agent" / "runs" / "escaped.txt").exists()
    done = events(proc.stdout)[-1]
    assert "done.txt" in git(repo, "ls-tree", "--name-only", done["branch"])
    assert worktrees(repo) == [str(repo)] and status(repo) == ""
