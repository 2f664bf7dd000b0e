"""Repositories git itself refuses, or the agent cannot work in: each refused in one line
that names git's reason and its fix, before anything is asked of the model."""

from __future__ import annotations

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.repository import GitRepo
from conftest import git, make_repo


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A throwaway HOME: git reads no config of the machine's user."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def test_a_repository_of_dubious_ownership_is_named_with_gits_reason_and_fix(
    tmp_path, home, monkeypatch
):
    """git refuses a repository another user owns (safe.directory): that is not "not a
    repository", and the fix is git's own, not --repo."""
    repo = make_repo(tmp_path / "repo")
    trusted = make_repo(tmp_path / "trusted")  # another: git's config is read once a repository
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own stand-in for that
    with pytest.raises(GitError) as err:
        GitRepo(repo)
    said = err.value.one_line()
    assert "dubious ownership" in said, said
    assert "not inside a git repository" not in said and "--repo" not in said, said
    assert f"git config --global --add safe.directory {repo}" in err.value.hint, said
    (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {trusted}\n")  # the fix, done
    GitRepo(trusted).close()


def sha256_repo(path):
    """A repository whose objects are named by SHA-256, with one commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "--object-format=sha256", "-b", "main")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "user.name", "Test")
    (path / "a.txt").write_text("1\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.mark.parametrize("worktree", [False, True])
def test_a_sha256_repository_is_refused_in_one_line_before_the_model_is_asked(
    tmp_path, agent_in_process, fake_server, worktree
):
    """GitPython reads no SHA-256 object: the run would plan (a paid request) and then end in
    an internal error, or call the repository empty."""
    repo = sha256_repo(tmp_path / "repo")
    srv = fake_server([{"content": "never asked"}])
    flags = ["--worktree"] if worktree else []
    proc = agent_in_process(
        "run", "x", "--yes", *flags, "--base-url", srv.url, "--model", "m", cwd=repo
    )
    assert proc.returncode == 1, proc.stderr
    said = proc.stderr.strip().splitlines()
    assert len(said) == 1 and "SHA-256" in said[0], proc.stderr
    assert "internal error" not in proc.stderr and "no commits" not in proc.stderr
    assert srv.chat_requests == []
    assert not (repo / ".agent").exists()


def test_every_command_through_gitpython_refuses_a_sha256_repository_as_preflight_does(
    tmp_path,
):
    """`agent runs`, `clean` and `rewind` read the repository through GitPython without the
    run's preflight: the same line, never GitPython's BadName."""
    repo = sha256_repo(tmp_path / "repo")
    main = GitRepo(repo)
    try:
        with pytest.raises(GitError) as before_model:
            main.preflight(allow_dirty=False)
        with pytest.raises(GitError) as through_gitpython:
            main.branch_exists("agent/x")
    finally:
        main.close()
    assert "SHA-256" in before_model.value.message
    assert through_gitpython.value.message == before_model.value.message


@pytest.mark.parametrize("worktree", [False, True])
def test_a_branch_named_agent_is_refused_before_the_plan_and_leaves_nothing_behind(
    tmp_path, agent_in_process, fake_server, worktree
):
    """A branch `agent` leaves git no room for any `agent/<run-id>`: a local check, said
    before the plan is asked for (and paid) and approved, with nothing written."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "branch", "agent")
    srv = fake_server([{"content": "never asked"}])
    flags = ["--worktree"] if worktree else []
    proc = agent_in_process(
        "run", "x", "--yes", *flags, "--base-url", srv.url, "--model", "m", cwd=repo
    )
    assert proc.returncode == 1, proc.stderr
    assert "a branch named agent already exists" in proc.stderr, proc.stderr
    assert "git branch -m agent" in proc.stderr, proc.stderr
    assert srv.chat_requests == []
    assert not (repo / ".agent").exists()
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["agent", "main"]
