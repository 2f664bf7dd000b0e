"""The main work tree of a repository, from any of its work trees: one repository, one state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_cli.cli.config.settings import Settings
from agent_cli.workspace.git.worktree import is_linked_tree, main_work_tree
from conftest import git, make_repo


def test_a_linked_tree_names_the_users_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    assert main_work_tree(tmp_path / "linked") == repo
    assert main_work_tree(repo) == repo
    assert Settings().state_dir(tmp_path / "linked") == repo / ".agent"


def test_a_linked_tree_of_a_separate_git_dir_keeps_its_own_state(tmp_path: Path) -> None:
    """git lists the git dir as the main work tree here: no state goes into a git dir."""
    repo = separate_checkout(tmp_path)
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    assert main_work_tree(tmp_path / "linked") == tmp_path / "linked"
    assert main_work_tree(repo) == repo  # its .git file names no worktrees/ admin dir


def test_a_submodule_is_its_own_main_tree(tmp_path: Path) -> None:
    inner = make_repo(tmp_path / "inner")
    outer = make_repo(tmp_path / "outer")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    assert (outer / "sub" / ".git").is_file()
    assert main_work_tree(outer / "sub") == outer / "sub"


def submodule_checkout(tmp_path: Path) -> Path:
    """A repository used as a submodule: its git dir is the outer one's `.git/modules/sub`."""
    inner = make_repo(tmp_path / "inner")
    outer = make_repo(tmp_path / "outer")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    sub = outer / "sub"
    git(sub, "switch", "-q", "main")
    git(sub, "config", "user.email", "test@example.com")
    git(sub, "config", "user.name", "Test")
    return sub


def bare_checkout(tmp_path: Path) -> Path:
    """A checkout that `git worktree add` made from a bare repository `repo.git`."""
    src = make_repo(tmp_path / "src")
    git(tmp_path, "clone", "-q", "--bare", str(src), str(tmp_path / "repo.git"))
    git(tmp_path / "repo.git", "worktree", "add", "-q", str(tmp_path / "checkout"), "main")
    return tmp_path / "checkout"


def separate_checkout(tmp_path: Path) -> Path:
    """A repository whose git dir was put elsewhere (`--separate-git-dir`)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# separate\n")
    git(repo, "init", "-q", "-b", "main", "--separate-git-dir", str(tmp_path / "store.git"))
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one")
    return repo


LAYOUTS = {"submodule": submodule_checkout, "bare": bare_checkout, "separate": separate_checkout}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_runs_tree_in_the_checkouts_state_is_the_checkouts(tmp_path: Path, layout: str) -> None:
    """git names no main work tree beside these git dirs the way `<tree>/.git` does: the tree
    a worktree run works in is still the checkout's, whose state directory it sits in."""
    checkout = LAYOUTS[layout](tmp_path)
    tree = checkout / ".agent" / "worktrees" / "run-1"
    git(checkout, "worktree", "add", "-q", "--detach", str(tree))
    assert main_work_tree(tree) == checkout
    assert main_work_tree(checkout) == checkout
    assert Settings().state_dir(tree) == checkout / ".agent"


@pytest.mark.parametrize("layout", ["plain", *sorted(LAYOUTS)])
def test_a_runs_folder_is_its_work_tree_only_while_git_would_find_it_there(
    tmp_path: Path, layout: str
) -> None:
    """What git checks before it removes a linked tree: the folder's `.git` names an admin
    directory of this repository, which names the folder back. Emptied, replaced, a clone or
    a copy of another tree in its place is not the tree, though git may still list it."""
    checkout = make_repo(tmp_path / "repo") if layout == "plain" else LAYOUTS[layout](tmp_path)
    trees = checkout / ".agent" / "worktrees"
    for name in ("run-1", "run-2", "run-3"):
        git(checkout, "worktree", "add", "-q", "--detach", str(trees / name))
    assert is_linked_tree(trees / "run-1", checkout)
    shutil.rmtree(trees / "run-1")
    (trees / "run-1").mkdir()
    assert not is_linked_tree(trees / "run-1", checkout)
    shutil.rmtree(trees / "run-2")
    shutil.copytree(trees / "run-3", trees / "run-2")  # its .git names run-3's admin directory
    assert not is_linked_tree(trees / "run-2", checkout)
    shutil.rmtree(trees / "run-3")
    make_repo(trees / "run-3")
    assert not is_linked_tree(trees / "run-3", checkout)
    other = make_repo(tmp_path / "other")
    git(other, "worktree", "add", "-q", "--detach", str(tmp_path / "elsewhere"))
    assert not is_linked_tree(tmp_path / "elsewhere", checkout)  # another repository's tree


def test_a_users_linked_tree_of_a_submodule_names_the_submodules_checkout(tmp_path: Path) -> None:
    sub = submodule_checkout(tmp_path)
    git(sub, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    assert main_work_tree(tmp_path / "linked") == sub  # its `core.worktree`, as git has it


def test_a_checkout_of_a_bare_repository_in_a_folder_holding_it_keeps_its_own_state(
    tmp_path: Path,
) -> None:
    """`proj/.git` a file naming the bare `proj/.bare`: `proj` is no work tree, so each checkout
    beside it keeps the state it always had."""
    proj = tmp_path / "proj"
    git(tmp_path, "clone", "-q", "--bare", str(make_repo(tmp_path / "src")), str(proj / ".bare"))
    (proj / ".git").write_text("gitdir: ./.bare\n")
    git(proj, "worktree", "add", "-q", str(proj / "main"), "main")
    assert main_work_tree(proj / "main") == proj / "main"


@pytest.mark.parametrize("layout", ["submodule", "bare"])
def test_inside_a_runs_tree_runs_are_listed_and_no_new_run_starts(
    agent_in_process, tmp_path: Path, layout: str
) -> None:
    from agent_cli.agent.run.state import AgentState
    from agent_cli.agent.run.store import RunRecord, RunStore
    from agent_cli.core.models import Task

    checkout = LAYOUTS[layout](tmp_path)
    tree = checkout / ".agent" / "worktrees" / "run-wt"
    git(checkout, "worktree", "add", "-q", "-b", "agent/run-wt", str(tree))
    state = AgentState(goal="Add a.txt", plan=[Task(goal="Add a.txt", status="rejected")])
    RunStore(checkout / ".agent", repo=str(checkout.resolve())).save(
        RunRecord(
            run_id="run-wt",
            goal=state.goal,
            branch="agent/run-wt",
            base=git(checkout, "rev-parse", "HEAD").strip(),
            base_branch="main",
            status="escalated",
            agent_state=state.to_dict(),
            worktree=str(tree),
        )
    )
    listed = agent_in_process("runs", "--json", cwd=tree)
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["run-wt"]
    new = agent_in_process(
        "run", "Add b.txt", "--yes", "--base-url", "http://127.0.0.1:9", cwd=tree
    )
    said = new.stderr.strip()
    assert new.returncode == 2 and len(said.splitlines()) == 1, said
    assert "is the worktree of run run-wt" in said and f"your checkout {checkout} " in said, said
    assert not (tree / ".agent").exists()  # one repository, one state
    assert git(tree, "branch", "--show-current").strip() == "agent/run-wt"
