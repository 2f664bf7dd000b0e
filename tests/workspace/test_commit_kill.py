"""kill -9 at every step of the harness's commit leaves a branch and an index that agree.

A `git` first on PATH sends SIGKILL to the committing Python process the moment a chosen
git subcommand starts (a real signal, at an exact point); then the repository is read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workspace.test_git import git, make_repo

FILES = 300
COMMIT = (
    "import sys; from agent_cli.workspace.git.repository import GitRepo; "
    "r = GitRepo(sys.argv[1]); r.preflight(allow_dirty=True); "
    f"print(r.commit_paths([f'f{{i}}.txt' for i in range({FILES})], 'task\\n\\nAgent-Run: r1'))"
)


def _killing_git(tmp_path: Path, sub: str) -> dict[str, str]:
    """An environment whose `git` kills its parent when subcommand `sub` starts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    real = shutil.which("git")
    (bin_dir / "git").write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do [ "$a" = "{sub}" ] && {{ kill -9 $PPID; exit 1; }}; '
        'case "$a" in -*) ;; *) break ;; esac; done\n'
        f"exec '{real}' \"$@\"\n"
    )
    (bin_dir / "git").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), env.get("PYTHONPATH", "")])
    return env


def _changed(repo: Path, *args: str) -> set[str]:
    return set(git(repo, "diff", "--name-only", *args).split())


@pytest.mark.parametrize("sub", ["add", "write-tree", "commit-tree", "reset", "update-ref"])
def test_sigkill_at_each_commit_step_leaves_no_staged_reversal_and_resume_commits(tmp_path, sub):
    repo = make_repo(tmp_path / "repo")
    for i in range(FILES):
        (repo / f"f{i}.txt").write_text(f"old {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files")
    before = git(repo, "rev-parse", "HEAD").strip()
    for i in range(FILES):
        (repo / f"f{i}.txt").write_text(f"verified {i}\n")
    done = subprocess.run(
        [sys.executable, "-c", COMMIT, str(repo)],
        env=_killing_git(tmp_path, sub),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr
    head = git(repo, "rev-parse", "HEAD").strip()
    staged = _changed(repo, "--cached")
    unstaged = _changed(repo)
    # Whatever the index holds beyond HEAD is the work tree's own content: never a reversal.
    assert not staged & unstaged, f"killed at {sub}: {len(staged & unstaged)} staged reversals"
    if head != before:  # the branch moved last: the index already matched it
        assert not staged and not unstaged
    assert "D " not in git(repo, "status", "--porcelain")
    left = list((repo / ".git").glob("agent-index-*"))
    assert bool(left) == (sub in ("add", "write-tree")), left  # killed while it was in use
    # The next start removes what the killed process left, and the commit is made.
    again = subprocess.run(
        [sys.executable, "-c", COMMIT, str(repo)], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert not list((repo / ".git").glob("agent-index-*"))
    assert git(repo, "show", "HEAD:f7.txt") == "verified 7\n"
    assert git(repo, "status", "--porcelain") == ""
