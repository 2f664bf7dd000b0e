"""The user's own filter drivers (git-lfs, nbstripout, a redaction filter in ~/.gitconfig)
run in harness git as in the user's: commits store the cleaned form, a worktree gets the
smudged one, and a file the filter cleans back to what is committed is not a change.

Real repositories, a throwaway HOME whose ~/.gitconfig defines toy filters made of `sed`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.repository import GitRepo
from workspace.test_git import git
from workspace.test_harness_git_config import home  # noqa: F401 (fixture: its ~/.gitconfig is the user's)

# Stored as "POINTER:<content>", checked out as "<content>" (what git-lfs does, in small).
TOY = (
    '[filter "toy"]\n\tclean = sed -e s/^/POINTER:/\n\tsmudge = sed -e s/^POINTER://\n'
    "\trequired = true\n"
)
REDACT = '[filter "redact"]\n\tclean = sed -e s/^TOKEN=.*/TOKEN=REDACTED/\n\tsmudge = cat\n'
IDENTITY = "[user]\n\tname = Test User\n\temail = test@example.com\n"


def _repo(path: Path, attributes: str, files: dict[str, str]) -> Path:
    """A repository committed by the user's own git (filters applied), its files as checked out."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / ".gitattributes").write_text(attributes)
    for name, text in files.items():
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


def test_the_agents_commit_stores_what_the_users_clean_filter_makes(tmp_path, home):
    (home / ".gitconfig").write_text(IDENTITY + REDACT)
    repo = _repo(tmp_path / "repo", "*.cfg filter=redact\n", {"README.md": "x\n"})
    pwned = tmp_path / "pwned"
    # A driver of the same name in .git/config (a command may have written it) never runs.
    git(repo, "config", "filter.redact.clean", f"touch '{pwned}'; cat")
    (repo / "app.cfg").write_text("TOKEN=s3cr3t-value\n")
    gr = GitRepo(repo)
    try:
        assert gr.commit_paths(["app.cfg"], "add app.cfg") is not None
    finally:
        gr.close()
    git(repo, "config", "--unset", "filter.redact.clean")
    assert git(repo, "show", "HEAD:app.cfg") == "TOKEN=REDACTED\n"
    assert git(repo, "status", "--porcelain") == ""
    assert not pwned.exists()


def test_a_worktree_gets_the_files_the_users_smudge_filter_checks_out(tmp_path, home):
    (home / ".gitconfig").write_text(IDENTITY + TOY)
    repo = _repo(tmp_path / "repo", "*.dat filter=toy\n", {"data.dat": "42\n"})
    assert git(repo, "cat-file", "-p", "HEAD:data.dat") == "POINTER:42\n"
    gr = GitRepo(repo)
    try:
        tree = gr.add_worktree(tmp_path / "wt", "agent/t")
    finally:
        gr.close()
    assert (tree / "data.dat").read_text() == "42\n"
    assert git(tree, "status", "--porcelain") == ""


def test_a_file_the_users_filter_cleans_to_what_is_committed_is_no_change(tmp_path, home):
    """After a clone, or a commit in the index's second, git compares a file's content again
    (its stat no longer vouches for it): through the filter it is unchanged."""
    (home / ".gitconfig").write_text(IDENTITY + TOY)
    origin = _repo(tmp_path / "origin", "*.dat filter=toy\n", {"data.dat": "42\n"})
    git(tmp_path, "clone", "-q", str(origin), "clone")
    repo = tmp_path / "clone"
    stamp = (repo / "data.dat").stat().st_mtime + 10
    os.utime(repo / "data.dat", (stamp, stamp))  # what a racily clean entry amounts to
    gr = GitRepo(repo)
    try:
        assert gr.preflight(allow_dirty=False) == set()
        assert gr.changed_files() == []
    finally:
        gr.close()


def _local_filter(repo: Path, pwned: Path) -> None:
    """The toy filter in the repository's own config only (`git lfs install --local`,
    git-crypt), each command also leaving a mark when it runs."""
    git(repo, "config", "filter.toy.clean", f"touch '{pwned}'; sed -e s/^/POINTER:/")
    git(repo, "config", "filter.toy.smudge", f"touch '{pwned}'; sed -e s/^POINTER://")


def _attributes_in(where: str, repo: Path, home: Path, monkeypatch) -> Path:
    """Where the attributes file that names the filter is: every place git reads one from
    besides the system's (the work tree, the repository's info/, the user's own file)."""
    if where == ".gitattributes":
        return repo / ".gitattributes"
    if where == "info/attributes":
        return repo / ".git" / "info" / "attributes"
    if where == "~/.config/git/attributes":
        return home / ".config" / "git" / "attributes"
    if where == "$XDG_CONFIG_HOME/git/attributes":
        monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
        return home / "xdg" / "git" / "attributes"
    if where == "a link to dotfiles":  # as a dotfile manager (stow, chezmoi) leaves it
        linked = home / ".config" / "git" / "attributes"
        linked.parent.mkdir(parents=True)
        linked.symlink_to(home / "dotfiles" / "gitattributes")
        return home / "dotfiles" / "gitattributes"
    assert where == "core.attributesFile"
    with (home / ".gitconfig").open("a") as config:
        config.write("[core]\n\tattributesFile = ~/my-attributes\n")
    return home / "my-attributes"


@pytest.mark.parametrize(
    "where",
    [
        ".gitattributes",
        "info/attributes",
        "~/.config/git/attributes",
        "$XDG_CONFIG_HOME/git/attributes",
        "a link to dotfiles",
        "core.attributesFile",
    ],
)
def test_a_filter_only_the_repositorys_config_defines_is_refused_with_its_fix(
    tmp_path, home, monkeypatch, where
):
    """Not 'uncommitted changes' (the file only looks changed unfiltered): the filter, why,
    and how to make it the user's own; whichever attributes file names it."""
    (home / ".gitconfig").write_text(IDENTITY)
    pwned = tmp_path / "pwned"
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    _local_filter(repo, pwned)
    git(repo, "config", "filter.other.clean", "cat")  # named by a comment only: no refusal
    attributes = _attributes_in(where, repo, home, monkeypatch)
    attributes.parent.mkdir(parents=True, exist_ok=True)
    attributes.write_text("# *.txt filter=other\n*.dat filter=toy\n")
    (repo / "data.dat").write_text("42\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    pwned.unlink()
    stamp = (repo / "data.dat").stat().st_mtime + 10
    os.utime(repo / "data.dat", (stamp, stamp))
    assert git(repo, "status", "--porcelain") == ""  # the user's git: nothing changed
    pwned.unlink()
    gr = GitRepo(repo)
    try:
        with pytest.raises(GitError) as refused:
            gr.preflight(allow_dirty=False)
    finally:
        gr.close()
    assert "filter toy," in refused.value.message  # not the one a comment names
    assert ".git/config" in refused.value.message
    assert "uncommitted" not in refused.value.message
    assert "git config --global" in refused.value.hint
    assert "'^filter\\.(toy)\\.'" in refused.value.hint
    assert not pwned.exists()


@pytest.mark.parametrize("where", ["no attribute names it", "the user's config defines it too"])
def test_a_filter_of_the_repositorys_config_alone_is_no_refusal_when(tmp_path, home, where):
    pwned = tmp_path / "pwned"
    (home / ".gitconfig").write_text(IDENTITY + (TOY if "user" in where else ""))
    attributes = "*.dat filter=toy\n" if "user" in where else "*.dat -filter\n"
    repo = _repo(tmp_path / "repo", attributes, {"data.dat": "42\n"})
    _local_filter(repo, pwned)
    gr = GitRepo(repo)
    try:
        assert gr.preflight(allow_dirty=False) == set()
    finally:
        gr.close()
    assert not pwned.exists()
