"""GitRepo after the first request: GitPython, under the same safe environment as git commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.git.safe import safe_env, with_config
from workspace.test_git import git, make_repo

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def repo(tmp_path) -> Path:
    return make_repo(tmp_path / "repo")


def _python(code: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_branch_and_commits_go_through_gitpython_once_the_checks_are_done(repo):
    code = (
        "import sys; from agent_cli.workspace.git.repository import GitRepo; "
        f"g = GitRepo({str(repo)!r}); g.preflight(allow_dirty=False); "
        "before = 'git' in sys.modules; g.start_branch('agent/x'); "
        "print(before, 'git' in sys.modules, g.current_branch()); g.close()"
    )
    assert _python(code).split() == ["False", "True", "agent/x"]


def test_importing_the_cli_does_not_import_gitpython():
    assert _python("import sys, agent_cli.cli.app; print('git' in sys.modules)") == "False"


def test_gitpythons_git_processes_get_the_scrubbed_environment(repo, tmp_path, monkeypatch):
    dump = tmp_path / "env.txt"
    # No config of the user's runs a program in harness git any more, so a `git` first on
    # PATH shows what each git process got.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("git")
    (bin_dir / "git").write_text(f"#!/bin/sh\nenv >> '{dump}'\nexec '{real}' \"$@\"\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("HOLDS_THE_KEY", f"prefix-{SECRET}")
    (repo / "new.txt").write_text("new\n")
    gr = GitRepo(repo, secrets=(SECRET,))
    assert gr.commit_paths(["new.txt"], "add new") is not None
    seen = dump.read_text()
    assert SECRET not in seen
    assert "OPENAI_API_KEY=\n" in seen and "HOLDS_THE_KEY=\n" in seen
    assert "GIT_CONFIG_VALUE_0=/dev/null" in seen  # core.hooksPath, as with `-c`
    gr.close()


def test_repository_command_config_runs_nothing_through_gitpython(repo, tmp_path):
    pwned = tmp_path / "pwned"
    git(repo, "config", "filter.evil.clean", f"touch '{pwned}'; cat")
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "core.fsmonitor", f"touch '{pwned}'")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch '{pwned}'\n")
    hook.chmod(0o755)
    (repo / ".gitattributes").write_text("* filter=evil\n")
    (repo / "c.txt").write_text("see\n")
    gr = GitRepo(repo)
    gr.start_branch("agent/t")
    assert gr.commit_paths(["c.txt", ".gitattributes"], "c") == gr.head()
    assert gr.changed_files() == [] and "c.txt" in gr.commit_stat(gr.head())
    assert not pwned.exists()
    gr.close()


def test_safe_env_carries_the_config_after_the_callers_own_entries(repo):
    env = with_config({"GIT_CONFIG_COUNT": "1"}, ["-c", "a.b=1", "-c", "c.d="])
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert (env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("a.b", "1")
    assert (env["GIT_CONFIG_KEY_2"], env["GIT_CONFIG_VALUE_2"]) == ("c.d", "")
    git(repo, "config", "diff.x.textconv", "touch pwned")
    env = safe_env(repo)
    pairs = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs["core.hooksPath"] == "/dev/null" and pairs["diff.x.textconv"] == ""


@pytest.mark.parametrize(
    ("refresh", "says"),
    [(None, "git is not installed or not on PATH"), ("raise", "GitPython cannot start")],
)
def test_a_missing_git_is_our_error_with_a_way_out(repo, tmp_path, refresh, says):
    env = {k: v for k, v in os.environ.items() if k != "GIT_PYTHON_REFRESH"}
    env["PATH"] = str(tmp_path / "no-bin")
    if refresh:
        env["GIT_PYTHON_REFRESH"] = refresh
    code = (
        "from pathlib import Path; from agent_cli.core.errors import GitError; "
        "from agent_cli.workspace.git.handle import RepoHandle\n"
        "try:\n"
        f"    RepoHandle(Path({str(repo)!r})).current_branch()\n"
        "except GitError as e:\n"
        "    print(e.one_line())"
    )
    out = _python(code, env)
    assert says in out and "install git" in out


def test_log_lists_the_newest_commits_first(repo):
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-qam", "second")
    gr = GitRepo(repo)
    entries = gr.log(max_count=5)
    assert [e.summary for e in entries] == ["second", "initial"]
    assert entries[0].sha == gr.head() and entries[0].author == "Test User"
    assert [e.summary for e in gr.log(max_count=1)] == ["second"]
    with pytest.raises(GitError, match="the log of nope cannot be read"):
        gr.log("nope")
    gr.close()


def test_a_worktree_is_added_on_its_own_branch_and_removed(repo, tmp_path):
    gr = GitRepo(repo)
    place = gr.add_worktree(tmp_path / "wt", "agent/run-1")
    assert place == (tmp_path / "wt").resolve() and (place / "a.txt").read_text() == "one\n"
    linked = GitRepo(place)
    assert linked.current_branch() == "agent/run-1" and gr.current_branch() == "main"
    with pytest.raises(GitError, match="branch agent/run-1 already exists"):
        gr.add_worktree(tmp_path / "wt2", "agent/run-1")
    (place / "a.txt").write_text("changed\n")
    with pytest.raises(GitError, match="worktree failed"):
        gr.remove_worktree(place)
    gr.remove_worktree(place, force=True)
    assert not place.exists() and gr.branch_exists("agent/run-1")
    linked.close()
    gr.close()
