"""No commit takes bytecode or a test cache that HEAD does not hold (repository.cache_file),
and such files alone are no change: real repositories, files written as running code would."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cli.workspace.git.repository import GitRepo, cache_file
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from conftest import git, make_repo


@pytest.fixture
def ws(tmp_path) -> RepoWorkspace:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    make_repo(root)
    workspace = RepoWorkspace(GitRepo(root), CommandRunner(root, [], timeout_s=30, env={}))
    yield workspace
    workspace.close()


@pytest.mark.parametrize(
    "path, cache",
    [
        ("calc/__pycache__/stats.cpython-311.pyc", True),
        ("__pycache__/x.txt", True),
        ("m.pyc", True),
        ("a/b/m.pyo", True),
        (".pytest_cache/v/cache/nodeids", True),
        ("sub/.pytest_cache/README.md", True),
        ("calc/stats.py", False),
        ("pycache/stats.py", False),
        ("notes.pyc.txt", False),
        ("__pycache__", False),  # a file of that name is no cache folder's
    ],
)
def test_what_running_code_writes_is_a_cache_file(path, cache):
    assert cache_file(path) is cache


def _caches(root: Path) -> None:
    for path in ("calc/__pycache__/stats.cpython-311.pyc", "m.pyo", ".pytest_cache/v/x"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"\x00cache")


def test_no_commit_takes_bytecode_head_does_not_hold(ws):
    (ws.root / "kept.pyc").write_bytes(b"old")
    git(ws.root, "add", "kept.pyc")
    git(ws.root, "commit", "-qm", "bytecode on purpose")
    _caches(ws.root)
    (ws.root / "kept.pyc").write_bytes(b"new")
    (ws.root / "a.txt").write_text("two\n")
    assert ws.changed_files() == ["a.txt", "kept.pyc"]
    everything = ["a.txt", "kept.pyc", "m.pyo", "calc/__pycache__/stats.cpython-311.pyc"]
    commit = ws.commit(everything, "work")
    assert commit is not None
    shown = git(ws.root, "show", "--name-only", "--format=", commit).split()
    assert shown == ["a.txt", "kept.pyc"]
    assert "m.pyo" not in ws.diff() and ws.changed_files() == []


def test_a_change_of_bytecode_alone_changes_nothing(ws):
    _caches(ws.root)
    assert ws.changed_files() == []
    assert ws.commit(["m.pyo"], "nothing") is None
    assert ws.tree() == git(ws.root, "rev-parse", "HEAD^{tree}").strip()


def test_bytecode_python_imports_as_a_module_is_what_no_commit_holds(ws):
    """A `.pyc` outside `__pycache__` is a module Python imports with no source beside it:
    listed with what no commit takes, so a check that needs it fails (hidden.py)."""
    _caches(ws.root)
    (ws.root / "calc" / "impl.pyc").write_bytes(b"code")
    assert ws.uncommittable() == ["calc/impl.pyc", "m.pyo"]
