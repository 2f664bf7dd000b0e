"""The run's branch moves by the harness's commits alone (takeback.py): real repositories,
the git command line standing in for what a model's script runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from conftest import git
from conftest import make_repo as committed

RUN = "agent/r1"


def make_repo(path: Path) -> Path:
    """A repository on `main` with a.txt and b.txt committed."""
    path.mkdir(parents=True)
    (path / "a.txt").write_text("one\n")
    (path / "b.txt").write_text("bee\n")
    return committed(path)


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain=v1", "--untracked-files=all")


@pytest.fixture
def ws(tmp_path) -> RepoWorkspace:
    """A workspace on the run's branch agent/r1, held where an attempt would begin."""
    repo = make_repo(tmp_path / "repo")
    git_repo = GitRepo(repo)
    workspace = RepoWorkspace(git_repo, CommandRunner(repo, [], timeout_s=30, env={}))
    workspace.start_branch(RUN)
    workspace.hold_branch()
    yield workspace
    workspace.close()


def head(ws: RepoWorkspace) -> str:
    return git(ws.root, "rev-parse", "HEAD").strip()


def test_nothing_moved_says_nothing_and_leaves_the_index(ws):
    (ws.root / "a.txt").write_text("two\n")
    git(ws.root, "add", "a.txt")  # staged by a command, no commit: as before the run
    assert ws.take_back() == ""
    assert status(ws.root) == "M  a.txt\n"


def test_a_commit_on_the_runs_branch_is_uncommitted_work_again(ws):
    start = head(ws)
    (ws.root / "a.txt").write_text("two\n")
    (ws.root / "new.txt").write_text("new\n")
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-qm", "tidy")
    (ws.root / "b.txt").write_text("later\n")  # after the commit: stays as it is
    said = ws.take_back()
    assert said.startswith("the model's commands committed 1 commit: taken back into the work")
    assert f"{RUN} is back at {start[:12]}" in said and said.endswith("only the harness commits")
    assert head(ws) == start and ws.current_branch() == RUN
    # the index as the attempt began: every change unstaged, as if nothing had been committed
    assert status(ws.root) == " M a.txt\n M b.txt\n?? new.txt\n"
    assert sorted(ws.changed_files()) == ["a.txt", "b.txt", "new.txt"]
    assert ws.take_back() == ""  # said once


def test_a_switch_to_a_new_branch_and_a_detached_head_come_back_to_the_runs_branch(ws):
    start = head(ws)
    git(ws.root, "checkout", "-q", "-b", "side")
    (ws.root / "a.txt").write_text("two\n")
    git(ws.root, "commit", "-qam", "one", "--allow-empty")
    git(ws.root, "commit", "-qm", "two", "--allow-empty")
    git(ws.root, "checkout", "-q", "--detach", "HEAD~1")
    said = ws.take_back()
    assert said.startswith("the model's commands committed 1 commit and detached HEAD")
    assert "branch side was made and is left as it is" in said
    assert head(ws) == start and ws.current_branch() == RUN
    assert status(ws.root) == " M a.txt\n"
    assert git(ws.root, "rev-parse", "side").strip() != start  # not the harness's to delete


def test_a_reset_of_the_runs_branch_leaves_its_tree_as_the_command_left_it(ws):
    start = head(ws)
    (ws.root / "a.txt").write_text("two\n")
    git(ws.root, "commit", "-qam", "the harness's, say")
    ws.hold_branch()
    held = head(ws)
    git(ws.root, "reset", "-q", "--hard", start)
    said = ws.take_back()
    assert said.startswith("the model's commands moved the run's branch: taken back")
    assert head(ws) == held and status(ws.root) == " M a.txt\n"  # the reset's undoing, unstaged
    git(ws.root, "branch", "-D", "-q", "main")
    git(ws.root, "switch", "-q", "--detach")
    git(ws.root, "branch", "-D", "-q", RUN)
    said = ws.take_back()
    assert said.startswith("the model's commands detached HEAD and deleted the run's branch")
    assert f"your branch main was deleted (git branch main {start[:12]} makes it again)" in said
    assert ws.current_branch() == RUN and head(ws) == held


def test_the_users_branch_is_named_never_moved(ws):
    start = head(ws)
    git(ws.root, "switch", "-q", "main")
    (ws.root / "a.txt").write_text("two\n")
    git(ws.root, "commit", "-qam", "on main")
    moved = git(ws.root, "rev-parse", "main").strip()
    said = ws.take_back()
    assert said.startswith("the model's commands committed 1 commit and switched to branch main")
    assert f"your branch main moved from {start[:12]} to {moved[:12]}" in said
    assert f"git branch -f main {start[:12]} puts it back" in said
    assert git(ws.root, "rev-parse", "main").strip() == moved
    assert ws.current_branch() == RUN and head(ws) == start and status(ws.root) == " M a.txt\n"


def test_another_runs_branch_is_not_the_users(ws):
    git(ws.root, "branch", "agent/r2")
    assert ws.take_back() == ""


def test_the_users_staged_change_is_staged_again(ws):
    (ws.root / "b.txt").write_text("mine\n")
    git(ws.root, "add", "b.txt")
    ws.hold_branch()  # the attempt begins with it staged
    (ws.root / "a.txt").write_text("two\n")
    git(ws.root, "commit", "-qam", "everything")
    assert "committed 1 commit" in ws.take_back()
    assert status(ws.root) == " M a.txt\nM  b.txt\n"


def test_a_workspace_never_held_takes_nothing_back(tmp_path):
    repo = make_repo(tmp_path / "repo")
    ws = RepoWorkspace(GitRepo(repo), CommandRunner(repo, [], timeout_s=30, env={}))
    git(repo, "commit", "-q", "--allow-empty", "-m", "the user's")
    assert ws.take_back() == ""
    ws.close()
