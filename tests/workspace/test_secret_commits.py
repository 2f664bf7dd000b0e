"""A commit that would add a configured secret to git is refused; one that keeps what the base
commit held already is not (a secret that is also a word of the repository: `postgres`)."""

from __future__ import annotations

import os

import pytest

from agent_cli.core.errors import WorkspaceError
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from workspace.test_git import git, make_repo

SECRET = "postgres"


def workspace(repo) -> RepoWorkspace:
    git_repo = GitRepo(repo, secrets=(SECRET,))
    runner = CommandRunner(repo, [git_repo.git_dir], timeout_s=30, env={})
    return RepoWorkspace(git_repo, runner, secrets=(SECRET,))


def test_only_a_commit_that_adds_a_secret_is_refused(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "db.py").write_text('URL = "postgresql://localhost/app"\n')
    os.symlink("postgres.conf", repo / "conf")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "db")
    ws = workspace(repo)
    (repo / "db.py").write_text('URL = "postgresql://localhost/app"\nTIMEOUT = 5\n')
    (repo / "conf").unlink()
    os.symlink("postgres.conf.d", repo / "conf")  # its target named it before
    assert ws.commit(["db.py", "conf"], "a timeout") is not None
    assert git(repo, "show", "HEAD:db.py").endswith("TIMEOUT = 5\n")
    (repo / "db.py").write_text('URL = "postgresql://localhost/app"\nPASSWORD = "postgres"\n')
    with pytest.raises(WorkspaceError, match="db.py holds the API key"):
        ws.commit(["db.py"], "one more")
    (repo / "db.py").write_text('URL = "postgresql://localhost/app"\n')
    (repo / "new.txt").write_text("postgres\n")
    with pytest.raises(WorkspaceError, match="new.txt holds the API key"):
        ws.commit(["db.py", "new.txt"], "a new file")
    (repo / "new.txt").unlink()
    (repo / "postgres.md").write_text("notes\n")
    with pytest.raises(WorkspaceError, match="its name holds the API key"):
        ws.commit(["postgres.md"], "a new name")
    assert git(repo, "show", "HEAD:db.py").endswith("TIMEOUT = 5\n")  # nothing refused landed
