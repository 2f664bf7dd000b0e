"""A FIFO where git reads on its own never blocks harness git: refused at once, by name."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.files import Files
from agent_cli.workspace.git.exclude import exclude_state_dir
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.git.secrets import where_secret
from conftest import make_repo

QUICK_S = 10  # git itself would wait 120 s (its timeout) on each call


def _head(root: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize(
    "fifo", [".gitignore", "sub/.gitattributes", "sub/deeper/.gitignore", ".git/info/exclude"]
)
def test_a_fifo_git_would_read_stops_the_commit_at_once_naming_it(tmp_path, fifo):
    root = make_repo(tmp_path / "repo")
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "sub" / "task.py").write_text("done = True\n")
    repo = GitRepo(root)
    before = _head(root)
    (root / fifo).unlink(missing_ok=True)
    os.mkfifo(root / fifo)
    started = time.monotonic()
    with pytest.raises(GitError) as caught:
        repo.changed_files()
    with pytest.raises(GitError):
        repo.commit_paths(["sub/task.py"], "task 1")
    assert time.monotonic() - started < QUICK_S
    assert f"{fifo} is not a regular file (a FIFO)" in caught.value.message
    assert "would wait for ever" in caught.value.message
    assert "agent run --resume" in caught.value.hint
    assert _head(root) == before  # nothing committed
    os.unlink(root / fifo)  # the user removes it; the same task is then committed
    assert repo.commit_paths(["sub/task.py"], "task 1")
    repo.close()


def test_a_plain_fifo_among_the_tasks_paths_is_left_out_and_the_rest_committed(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "task.py").write_text("done = True\n")
    os.mkfifo(root / "data.pipe")
    repo = GitRepo(root)
    started = time.monotonic()
    changed = repo.changed_files()
    commit = repo.commit_paths(changed, "task 1")
    assert time.monotonic() - started < QUICK_S
    assert commit
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit], cwd=root, capture_output=True, text=True
    ).stdout.split()
    assert "task.py" in listed and "data.pipe" not in listed
    repo.close()


def test_a_fifo_inside_the_excluded_state_directory_is_not_git_s_and_not_refused(tmp_path):
    root = make_repo(tmp_path / "repo")
    repo = GitRepo(root)
    repo.exclude_state(root / ".agent")
    (root / ".agent" / "runs").mkdir(parents=True)
    os.mkfifo(root / ".agent" / "runs" / ".gitignore")
    (root / "task.py").write_text("done = True\n")
    assert repo.changed_files() == ["task.py"]
    repo.close()


def test_search_falls_back_to_its_own_walk_when_git_would_block(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "sub").mkdir()
    (root / "sub" / "code.py").write_text("needle = 1\n")
    os.mkfifo(root / "sub" / ".gitignore")
    started = time.monotonic()
    found = Files(root).search("needle")
    assert time.monotonic() - started < QUICK_S
    assert "sub/code.py:1: needle = 1" in found


def test_excluding_the_state_directory_refuses_a_fifo_exclude_file_at_once(tmp_path):
    root = make_repo(tmp_path / "repo")
    exclude = root / ".git" / "info" / "exclude"
    exclude.unlink(missing_ok=True)
    os.mkfifo(exclude)
    with pytest.raises(GitError, match=r"info/exclude is not a regular file \(a FIFO\)"):
        exclude_state_dir(root, root / ".agent")  # `agent run` does this before anything


def test_a_secret_at_the_seam_of_two_chunks_of_a_large_file_is_found(tmp_path):
    key = "sk-seam0123456789abcdef"
    (tmp_path / "big.bin").write_bytes(b"x" * ((1 << 20) - 5) + key.encode() + b"y" * 100)
    (tmp_path / "clean.bin").write_bytes(b"x" * (3 << 20))
    assert where_secret(tmp_path, "big.bin", (key,)) == "content"
    assert where_secret(tmp_path, "clean.bin", (key,)) is None
    os.mkfifo(tmp_path / "pipe")
    assert where_secret(tmp_path, "pipe", (key,)) is None
    # counted once at the seam: a base commit that held it once makes it no new secret
    assert where_secret(tmp_path, "big.bin", (key,), lambda path: key.encode()) is None
    assert where_secret(tmp_path, "big.bin", (key,), lambda path: b"") == "content"
