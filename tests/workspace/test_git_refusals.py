"""Repositories git itself refuses, or the agent cannot work in: each refused in one line
that names git's reason and its fix, before anything is asked of the model."""

from __future__ import annotations

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.repository import GitRepo
from conftest import make_repo


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
