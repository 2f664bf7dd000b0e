"""The main work tree of a repository, from any of its work trees: one repository, one state."""

from __future__ import annotations

from pathlib import Path

from agent_cli.cli.config.settings import Settings
from agent_cli.workspace.git.worktree import main_work_tree
from conftest import git, make_repo


def test_a_linked_tree_names_the_users_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    assert main_work_tree(tmp_path / "linked") == repo
    assert main_work_tree(repo) == repo
    assert Settings().state_dir(tmp_path / "linked") == repo / ".agent"


def test_a_linked_tree_of_a_separate_git_dir_keeps_its_own_state(tmp_path: Path) -> None:
    """git lists the git dir as the main work tree here: no state goes into a git dir."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# separate\n")
    git(repo, "init", "-q", "-b", "main", "--separate-git-dir", str(tmp_path / "store.git"))
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    assert main_work_tree(tmp_path / "linked") == tmp_path / "linked"
    assert main_work_tree(repo) == repo  # its .git file names no worktrees/ admin dir


def test_a_submodule_is_its_own_main_tree(tmp_path: Path) -> None:
    inner = make_repo(tmp_path / "inner")
    outer = make_repo(tmp_path / "outer")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    assert (outer / "sub" / ".git").is_file()
    assert main_work_tree(outer / "sub") == outer / "sub"
