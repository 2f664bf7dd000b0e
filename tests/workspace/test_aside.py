"""Paths set aside for a check come back, also after a process killed inside the block."""

from __future__ import annotations

import json
import os

from agent_cli.workspace.aside import LIST, PREFIX, put_back_leftovers, set_aside
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from conftest import make_repo


def _left_aside(root, paths):
    """What a process killed inside the block leaves: the paths moved, never put back."""
    pid = os.fork()
    if pid == 0:  # the child dies inside the block, as under SIGKILL: no finally runs
        with set_aside(root, paths):
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0


def test_the_next_preflight_puts_back_what_a_killed_check_set_aside(tmp_path):
    repo = make_repo(tmp_path / "r")
    (repo / ".gitignore").write_text("lib/\n")
    (repo / "lib").mkdir()
    (repo / "lib" / "mod.py").write_text("X = 1\n")
    (repo / "local.py").write_text("Y = 2\n")
    _left_aside(repo, ["lib/", "local.py"])
    assert not (repo / "lib").exists() and list(repo.glob(PREFIX + "*"))
    git = GitRepo(repo)
    ws = RepoWorkspace(git, CommandRunner(repo, [git.git_dir], timeout_s=30, env={}))
    assert ws.preflight(allow_dirty=True) == {".gitignore", "local.py"}  # no holder folder
    assert (repo / "lib" / "mod.py").read_text() == "X = 1\n"
    assert (repo / "local.py").read_text() == "Y = 2\n"
    assert not list(repo.glob(PREFIX + "*"))


def test_a_path_that_exists_again_or_leads_outside_stays_where_it_is(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("old\n")
    _left_aside(root, ["a.txt"])
    (root / "a.txt").write_text("new\n")  # made again since
    planted = root / (PREFIX + "planted")
    planted.mkdir()
    (planted / LIST).write_text(json.dumps(["../outside.txt", "/etc/x", "sub/../../y"]))
    for n in range(3):
        (planted / str(n)).write_text("model's\n")
    assert put_back_leftovers(root) == []
    assert (root / "a.txt").read_text() == "new\n"
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "y").exists()
    assert (planted / "0").exists()
