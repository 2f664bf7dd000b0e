"""A repository's identity: its root commit and remote, whatever its folder is called."""

from __future__ import annotations

import os
import subprocess

import pytest

from agent_cli.workspace.git.identity import (
    RepoIdentity,
    normalize_remote,
    remote_passwords,
    repo_identity,
)
from agent_cli.workspace.git.repository import GitRepo
from conftest import git, make_repo


def test_clones_in_differently_named_folders_have_one_identity(tmp_path):
    origin = make_repo(tmp_path / "calc")
    git(origin, "commit", "-q", "--allow-empty", "-m", "second")
    clone = tmp_path / "elsewhere" / "my-checkout"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    root = git(origin, "rev-list", "--max-parents=0", "HEAD").strip()
    mine, theirs = repo_identity(origin), repo_identity(clone)
    assert mine.root_commit == theirs.root_commit == root
    assert mine.remote == "" and theirs.remote == str(origin)  # a local remote, as given
    assert GitRepo(clone).identity() == theirs


def test_unrelated_repositories_in_same_named_folders_differ(tmp_path):
    one = make_repo(tmp_path / "a" / "calc")
    (tmp_path / "b" / "calc").mkdir(parents=True)
    (tmp_path / "b" / "calc" / "other.txt").write_text("another project\n")
    two = make_repo(tmp_path / "b" / "calc")
    assert repo_identity(one).keys() != repo_identity(two).keys()
    assert not set(repo_identity(one).keys()) & set(repo_identity(two).keys())


def test_the_first_parent_root_commit_is_the_identity(tmp_path):
    repo = make_repo(tmp_path / "r")
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    git(repo, "checkout", "-q", "--orphan", "other")
    later = {
        **os.environ,
        "GIT_COMMITTER_DATE": "2030-01-01T00:00:00",
        "GIT_AUTHOR_DATE": "2030-01-01T00:00:00",
    }
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "a later root"],
        cwd=repo,
        env=later,
        check=True,
    )
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "join", "other")
    assert len(git(repo, "rev-list", "--max-parents=0", "HEAD").split()) == 2
    assert repo_identity(repo).root_commit == first


def test_the_remote_is_origin_else_the_one_its_branches_track_never_an_untracked_one(tmp_path):
    upstream = make_repo(tmp_path / "calc")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "-o", "upstream", str(upstream), str(clone))
    git(clone, "remote", "add", "a-library", "git@github.com:vendor/lib.git")
    assert repo_identity(clone).remote == str(upstream)  # what `main` tracks
    git(clone, "checkout", "-q", "-b", "work")  # a branch that tracks nothing
    assert repo_identity(clone).remote == str(upstream)  # what the other branches track
    fork = tmp_path / "fork"
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(fork))
    git(clone, "remote", "add", "b-fork", str(fork))
    git(clone, "fetch", "-q", "b-fork")
    git(clone, "branch", "-q", "--set-upstream-to=b-fork/main")  # `work` tracks the fork
    assert repo_identity(clone).remote == str(fork)  # one each: the first by name
    git(clone, "branch", "-q", "other", "upstream/main")  # tracks upstream: two to one
    assert repo_identity(clone).remote == str(upstream)
    git(clone, "branch", "-q", "-D", "other")
    git(clone, "branch", "-q", "--unset-upstream", "work")
    git(clone, "branch", "-q", "--unset-upstream", "main")
    assert repo_identity(clone).remote == ""  # a remote no branch tracks is no one's own
    git(clone, "remote", "add", "origin", "https://example.com/o/calc.git")
    assert repo_identity(clone).remote == "example.com/o/calc"  # origin, tracked or not


def test_an_orphan_branch_checked_out_is_known_by_its_own_root_and_the_remote(tmp_path):
    repo = make_repo(tmp_path / "site")
    git(repo, "remote", "add", "origin", "git@github.com:o/site.git")
    main = repo_identity(repo)
    git(repo, "checkout", "-q", "--orphan", "gh-pages")
    assert repo_identity(repo) == RepoIdentity("", "github.com/o/site")  # no commit on it yet
    git(repo, "commit", "-q", "-m", "pages")
    pages = repo_identity(repo)
    assert pages.root_commit not in ("", main.root_commit)
    assert set(pages.keys()) & set(main.keys()) == {"url:github.com/o/site"}


def test_remote_urls_normalize_to_one_form():
    forms = [
        "https://github.com/Owner/calc.git",
        "https://user:secret@github.com/Owner/calc",
        "git@github.com:Owner/calc.git",
        "ssh://git@GitHub.com:22/Owner/calc.git/",
    ]
    assert {normalize_remote(u) for u in forms} == {"github.com/Owner/calc"}


@pytest.mark.parametrize(
    "url, key",
    [
        ("https://git.example.com/g/r.git?access_token=QUERYSECRET42", "git.example.com/g/r"),
        ("https://GitHub.com/Owner/Repo.git#main", "github.com/Owner/Repo"),
        ("https://user:pa/ss@github.com/o/r.git", "github.com/o/r"),  # an unescaped / in it
        ("https://[fd00::1]:8443/g/r.git", "[fd00::1]/g/r"),
        ("https://user:pw@[FD00::1]/g/r.git", "[fd00::1]/g/r"),
    ],
)
def test_a_remote_key_holds_no_credential_and_keeps_its_host(url, key):
    assert normalize_remote(url) == key
    assert RepoIdentity("abc", "github.com/o/n").keys() == ["git:abc", "url:github.com/o/n"]
    assert RepoIdentity().keys() == []


def test_a_repository_without_commits_has_no_root(tmp_path):
    (tmp_path / "empty").mkdir()
    git(tmp_path / "empty", "init", "-q")
    assert repo_identity(tmp_path / "empty") == RepoIdentity()


def test_a_shallow_clone_is_known_by_its_remote_not_by_where_its_history_was_cut(tmp_path):
    origin = make_repo(tmp_path / "calc")
    for n in range(3):
        git(origin, "commit", "-q", "--allow-empty", "-m", f"commit {n}")
    shallow, full = tmp_path / "shallow", tmp_path / "full"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))
    git(tmp_path, "clone", "-q", f"file://{origin}", str(full))
    cut = git(shallow, "rev-list", "--max-parents=0", "HEAD").strip()
    assert cut != repo_identity(origin).root_commit  # git calls the cut a root
    mine = repo_identity(shallow)
    assert mine.root_commit == "" and mine.keys() == [f"url:{origin}"]
    assert set(mine.keys()) & set(repo_identity(full).keys())  # the same remote: one repository
    git(shallow, "fetch", "-q", "--unshallow")
    assert repo_identity(shallow).root_commit == repo_identity(origin).root_commit


def test_a_shallow_clone_of_a_local_bare_repository_is_the_repository_its_full_clone_is(
    tmp_path,
):
    work = make_repo(tmp_path / "calc")
    bare = tmp_path / "server" / "calc.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    full, shallow = tmp_path / "full", tmp_path / "shallow"
    git(tmp_path, "clone", "-q", str(bare), str(full))  # the remote as the path given
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{bare}", str(shallow))  # as a URL
    assert repo_identity(shallow).keys() == [f"url:{tmp_path / 'server' / 'calc'}"]
    assert set(repo_identity(shallow).keys()) & set(repo_identity(full).keys())
    assert normalize_remote(f"{work}/.git/") == normalize_remote(f"file://{work}") == str(work)
    local = tmp_path / "local"  # git takes the host localhost in a file URL as none
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://LocalHost{bare}", str(local))
    assert repo_identity(local).keys() == repo_identity(shallow).keys()


def _merge_older_history(repo, library):
    """Merge `library`'s history (older than `repo`'s) into `repo`, as `git subtree add` does."""
    git(repo, "fetch", "-q", str(library), "main")
    git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "vendor lib", "FETCH_HEAD")


def _old_library(path):
    path.mkdir(parents=True)
    (path / "lib.py").write_text("x = 1\n")
    git(path, "init", "-q", "-b", "main")
    old = {**os.environ, "GIT_COMMITTER_DATE": "2001-01-01T00:00:00"}
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=L", "-c", "user.email=l@x", "commit", "-q", "-m", "lib"],
        cwd=path,
        env={**old, "GIT_AUTHOR_DATE": "2001-01-01T00:00:00"},
        check=True,
    )
    return path


def test_repositories_that_merged_one_older_history_stay_two(tmp_path):
    library = _old_library(tmp_path / "lib")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    (one / "a.txt").write_text("project one\n")
    make_repo(one)
    make_repo(two)
    own = {r: repo_identity(r).root_commit for r in (one, two)}
    for repo in (one, two):
        _merge_older_history(repo, library)
        git(repo, "commit", "-q", "--allow-empty", "-m", "after the merge")
    assert {r: repo_identity(r).root_commit for r in (one, two)} == own  # unchanged by the merge
    assert not set(repo_identity(one).keys()) & set(repo_identity(two).keys())
    lib_root = git(library, "rev-list", "HEAD").strip()
    assert repo_identity(one).former_root == lib_root  # what earlier versions named it by
    assert repo_identity(library).former_root == ""


def test_the_passwords_of_every_remote_are_read_as_written_and_decoded(tmp_path):
    repo = make_repo(tmp_path / "r")
    git(repo, "remote", "add", "origin", "https://deploy:hunter2Passw0rd@git.example.com/t/p")
    git(repo, "remote", "set-url", "--push", "origin", "https://ci:s3cr%40t@git.example.com/t/p")
    git(repo, "remote", "add", "mirror", "git@github.com:t/p.git")
    git(repo, "remote", "add", "token", "https://ghp_only_a_user@github.com/t/p")
    assert remote_passwords(repo) == ("hunter2Passw0rd", "s3cr%40t", "s3cr@t")
    assert remote_passwords(make_repo(tmp_path / "none")) == ()


def test_a_token_given_as_the_user_name_of_a_remote_is_a_secret(tmp_path):
    repo = make_repo(tmp_path / "r")
    token = "glpat7Qx2Vb9LmN4pR8sT1wZ"
    git(repo, "remote", "add", "origin", f"https://{token}@gitlab.example.com/t/p.git")
    git(repo, "remote", "add", "deploy", "https://deploy-bot@git.example.com/t/p")
    git(repo, "remote", "add", "long", "https://continuous-integration-user@git.example.com/t/p")
    assert remote_passwords(repo) == (token,)


def test_a_token_user_name_is_a_secret_beside_a_password_or_an_empty_one(tmp_path):
    """GitHub's `https://TOKEN:x-oauth-basic@host/...`: the token is the secret, not the
    password beside it; `https://TOKEN:@host/...` has an empty one."""
    repo = make_repo(tmp_path / "r")
    token, other = "9f3c1a7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f01", "glpat7Qx2Vb9LmN4pR8sT1wZ"
    git(repo, "remote", "add", "origin", f"https://{token}:x-oauth-basic@github.com/o/calc.git")
    git(repo, "remote", "add", "empty", f"https://{other}:@gitlab.example.com/t/p.git")
    assert remote_passwords(repo) == (token, other, "x-oauth-basic")


def test_shallow_clones_without_a_remote_in_same_named_folders_are_two_repositories(tmp_path):
    from agent_cli.agent.learn.topic import repo_topic

    origin = make_repo(tmp_path / "origin")
    git(origin, "commit", "-q", "--allow-empty", "-m", "second")
    topics = []
    for place in ("a", "b b"):  # a blank in the path does not split the topic's keys
        clone = tmp_path / place / "app"
        git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
        git(clone, "remote", "remove", "origin")
        assert repo_identity(clone).keys() == []  # no root commit, no remote
        topics.append(repo_topic(clone))
    assert topics[0] != topics[1] and "app" not in topics[0]
    assert all(len(t.split()) == 1 and t.startswith("dir:") for t in topics)
    assert repo_topic(tmp_path / "a" / "app") == topics[0]  # the same checkout, the same topic
