"""The repository's config is listed again whenever what decides it may have changed, and only then.

Real git repositories; the `git` on PATH is a script that notes each `git config --list` and
runs the real git, so a test can count the listings the harness made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agent_cli.workspace.git.safe import overrides, safe_env
from workspace.test_git import git, make_repo
from workspace.test_harness_git_config import home, repo  # noqa: F401 (fixtures)


@pytest.fixture
def listed(tmp_path, monkeypatch, home):
    """A function giving how many `git config --list` processes have run so far."""
    log = tmp_path / "listings.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("git")
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f'#!/bin/sh\ncase "$*" in "config --list"*) echo x >> "{log}";; esac\nexec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return lambda: len(log.read_text().splitlines()) if log.exists() else 0


def emptied(cwd: Path) -> dict[str, str]:
    return dict(overrides(cwd, safe_env(cwd)))


def pairs(env: dict[str, str]) -> list[tuple[str, str]]:
    """The (key, value) config pairs `env` gives git."""
    count = int(env.get("GIT_CONFIG_COUNT", "0"))
    return [(env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"]) for n in range(count)]


def test_an_unchanged_config_is_listed_once_and_a_changed_one_again(repo, listed):
    safe_env(repo)
    first = listed()
    for _ in range(3):
        safe_env(repo)
    assert listed() == first
    git(repo, "config", "filter.late.clean", "touch pwned")
    assert ("filter.late.clean", "") in pairs(safe_env(repo))
    assert listed() == first + 1


def test_a_key_renamed_within_the_same_size_and_time_is_still_emptied(repo):
    git(repo, "config", "filter.aaaa.clean", "cat")
    assert "filter.aaaa.clean" in emptied(repo)
    config = repo / ".git" / "config"
    before = os.stat(config)
    config.write_text(config.read_text().replace('"aaaa"', '"bbbb"'))
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(config).st_size == before.st_size
    got = emptied(repo)
    assert "filter.bbbb.clean" in got and "filter.aaaa.clean" not in got


def test_a_linked_work_trees_common_and_own_config_are_both_watched(repo, tmp_path):
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "-b", "side", str(tree))
    assert "filter.common.clean" not in emptied(tree)
    git(repo, "config", "filter.common.clean", "cat")
    assert "filter.common.clean" in emptied(tree)
    git(repo, "config", "extensions.worktreeConfig", "true")
    git(tree, "config", "--worktree", "filter.own.clean", "cat")
    assert "filter.own.clean" in emptied(tree)
    assert "filter.own.clean" not in emptied(repo)


def test_a_change_to_an_included_file_alone_is_seen(repo, tmp_path, listed):
    included = tmp_path / "included.gitconfig"
    included.write_text("")
    git(repo, "config", "include.path", str(included))
    assert "filter.inc.clean" not in emptied(repo)
    at = listed()
    safe_env(repo)
    assert listed() == at + 1  # a listing holding an include is made each time
    included.write_text('[filter "inc"]\n\tclean = touch pwned\n')
    assert "filter.inc.clean" in emptied(repo)


@pytest.mark.parametrize("broken", ["HEAD", "objects", "refs"])
def test_a_git_folder_git_no_longer_takes_lets_the_config_above_be_listed(tmp_path, home, broken):
    outer = make_repo(tmp_path / "outer")
    git(outer, "config", "filter.outer.clean", "touch pwned")
    inner = make_repo(outer / "inner")
    assert "filter.outer.clean" not in emptied(inner)
    part = inner / ".git" / broken
    if broken == "HEAD":
        part.write_text("not a ref\n")
    else:
        part.rename(part.with_name(f"{broken}-moved"))
    assert "filter.outer.clean" in emptied(inner)


def test_a_listing_git_did_not_finish_cleanly_is_made_again(repo, listed):
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + "[broken\n")
    safe_env(repo)
    at = listed()
    safe_env(repo)
    assert listed() == at + 1


def test_a_git_folder_named_by_the_environment_is_listed_each_time(repo, listed):
    env = {"GIT_DIR": str(repo / ".git")}
    safe_env(repo, extra_env=env)
    at = listed()
    safe_env(repo, extra_env=env)
    assert listed() == at + 1
