"""Harness git runs no program any config names: repository, included, global or system.

Real git repositories; each attack plants a command that would create a file `pwned` and
then drives the harness's own git (preflight, diff, tree, commit, log, identity).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.repository import GitRepo, check_identity
from agent_cli.workspace.git.safe import overrides, run_git, safe_env
from workspace.test_git import git, make_repo

SECRET = "sk-test-harness-git-0123456789"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A HOME of the test's own, whose ~/.gitconfig a command could have written."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return path


@pytest.fixture
def repo(tmp_path, home) -> Path:
    return make_repo(tmp_path / "repo")


def _drive(repo: Path, refused: str = "") -> GitRepo:
    """Every kind of harness git call: preflight, list, diff, tree, commit, log, stat, identity.
    `refused`: the filter only the repository's config defines, which the preflight refuses
    (its commits would store files unfiltered); the calls after it still run nothing."""
    gr = GitRepo(repo, secrets=(SECRET,))
    if refused:
        with pytest.raises(GitError, match=f"through the filter {refused},"):
            gr.preflight(allow_dirty=True)
    else:
        gr.preflight(allow_dirty=True)
    gr.start_branch("agent/t")
    (repo / "new.txt").write_text("new text\n")
    (repo / "a.txt").write_text("changed\n")
    gr.list_files()
    gr.changed_files()
    gr.diff()
    gr.tree()
    sha = gr.commit_paths(["new.txt", "a.txt", ".gitattributes"], "task 1\n\nAgent-Run: r1")
    assert sha is not None
    assert gr.has_commit_on(sha, "agent/t", "Agent-Run: r1")
    gr.commit_stat(sha)
    gr.log()
    gr.identity()
    gr.close()
    return gr


def _committed(repo: Path, path: str) -> str:
    return git(repo, "show", f"HEAD:{path}")


def test_a_filter_under_a_subsection_holding_an_equals_sign_never_runs(repo, tmp_path):
    pwned = tmp_path / "pwned"
    git(repo, "config", "filter.a=b.clean", f"touch '{pwned}'; cat")
    git(repo, "config", "filter.a=b.smudge", f"touch '{pwned}'; cat")
    git(repo, "config", "filter.a=b.required", "true")
    (repo / ".gitattributes").write_text("* filter=a=b\n")
    _drive(repo, refused="a=b")
    assert not pwned.exists()
    assert _committed(repo, "new.txt") == "new text\n"
    assert ("filter.a=b.clean", "") in overrides(repo, safe_env(repo))


def test_a_husky_hooks_path_runs_no_hook_when_the_harness_commits(repo, tmp_path):
    pwned = tmp_path / "pwned"
    for where in (repo / ".husky", repo):  # `core.hooksPath=` alone would look in the work tree
        where.mkdir(exist_ok=True)
        for hook in (
            "pre-commit",
            "commit-msg",
            "post-commit",
            "post-checkout",
            "reference-transaction",
        ):
            (where / hook).write_text(f"#!/bin/sh\necho {hook} >> '{pwned}'\n")
            (where / hook).chmod(0o755)
    git(repo, "config", "core.hooksPath", ".husky")
    _drive(repo)
    assert not pwned.exists()


def test_a_filter_in_a_gitconfig_a_command_wrote_never_runs_and_identity_still_comes_from_it(
    tmp_path, home
):
    pwned = tmp_path / "pwned"
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    (repo / ".gitattributes").write_text("* filter=g\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=U", "-c", "user.email=u@example.com", "commit", "-qm", "i")
    user = (
        "[user]\n\tname = Global Person\n\temail = global@example.com\n"
        f"[core]\n\tfsmonitor = touch {pwned}\n\tpager = touch {pwned}\n"
        f"[diff]\n\texternal = touch {pwned}\n[commit]\n\tgpgsign = true\n"
        f"[gpg]\n\tprogram = touch {pwned}\n"
    )
    (home / ".gitconfig").write_text(user)
    assert check_identity(repo) == "Global Person <global@example.com>"  # read once, here
    # A command writes a filter into ~/.gitconfig after the harness read it.
    (home / ".gitconfig").write_text(
        user + f'[filter "g"]\n\tclean = touch {pwned}; cat\n\trequired = true\n'
    )
    _drive(repo)
    assert not pwned.exists()
    got = subprocess.run(
        ["git", "log", "-1", "--format=%an <%ae>|%cn <%ce>"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull},
    ).stdout
    assert got == ("Global Person <global@example.com>|Global Person <global@example.com>\n")


def test_config_reached_through_include_path_from_a_committed_file_never_runs(repo, tmp_path):
    pwned = tmp_path / "pwned"
    (repo / "tools.inc").write_text(
        f'[filter "inc"]\n\tclean = touch {pwned}; cat\n'
        f"[core]\n\tfsmonitor = touch {pwned}\n\thooksPath = hooks\n"
        f'[diff "inc"]\n\ttextconv = touch {pwned}; cat\n'
    )
    (repo / "hooks").mkdir()
    (repo / "hooks" / "post-commit").write_text(f"#!/bin/sh\ntouch '{pwned}'\n")
    (repo / "hooks" / "post-commit").chmod(0o755)
    git(repo, "add", "tools.inc", "hooks")
    git(repo, "commit", "-qm", "tools")
    git(repo, "config", "include.path", "../tools.inc")
    git(repo, "config", "includeIf.gitdir:/.path", "../tools.inc")
    (repo / ".gitattributes").write_text("* filter=inc diff=inc\n")
    _drive(repo, refused="inc")
    assert not pwned.exists()


@pytest.mark.parametrize(
    "key, value",
    [
        ("core.fsmonitor", "touch {p}"),
        ("core.sshCommand", "touch {p}"),
        ("core.pager", "touch {p}; cat"),
        ("pager.log", "touch {p}; cat"),
        ("diff.external", "touch {p}"),
        ("diff.x.textconv", "touch {p}; cat"),
        ("diff.x.command", "touch {p}"),
        ("core.alternateRefsCommand", "touch {p}"),
        ("gpg.program", "touch {p}"),
        ("log.showSignature", "true"),
        ("core.editor", "touch {p}"),
        ("credential.helper", "!touch {p}"),
        ("uploadpack.packObjectsHook", "touch {p}"),
    ],
)
def test_each_command_valued_repository_key_runs_nothing(repo, tmp_path, key, value):
    pwned = tmp_path / "pwned"
    git(repo, "config", key, value.format(p=pwned))
    git(repo, "config", "gpg.program", f"touch {pwned}")
    git(repo, "config", "commit.gpgSign", "true")
    git(repo, "remote", "add", "origin", "ext::sh -c touch% /tmp/never")
    (repo / ".gitattributes").write_text("* diff=x\n")
    _drive(repo)
    assert not pwned.exists()


def test_allowed_and_numeric_keys_stay_and_git_still_works(repo):
    git(repo, "config", "core.compression", "9")
    git(repo, "config", "pack.deltaCacheSize", "64m")  # not on the list, but a number
    git(repo, "config", "color.ui", "never")
    got = dict(overrides(repo, safe_env(repo)))
    assert "pack.deltaCacheSize" not in got and "core.compression" not in got
    assert got.get("color.ui") == ""
    _drive(repo)


def test_harness_git_gets_no_key_no_system_or_user_config_and_its_children_are_reaped(
    repo, tmp_path, monkeypatch, home
):
    dump = tmp_path / "env.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("git")
    # A git first on PATH records each process's environment and leaves a daemon behind.
    (bin_dir / "git").write_text(
        "#!/bin/sh\n"
        f"{{ echo \"ARGS $*\"; env; echo END; }} >> '{dump}'\n"
        f"setsid -f sh -c 'sleep 2; echo late $* >> {tmp_path / 'late'}' x \"$@\" >/dev/null 2>&1\n"
        f"exec '{real}' \"$@\"\n"
    )
    (bin_dir / "git").chmod(0o755)
    (home / ".gitconfig").write_text("[user]\n\tname = G\n\temail = g@example.com\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("SOME_VAR", f"x{SECRET}")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.pager'='touch pwned'")
    code, out, _ = run_git(["rev-parse", "HEAD"], repo, (SECRET,))
    assert code == 0 and out.strip()
    _drive(repo)
    time.sleep(2.5)
    assert not (tmp_path / "late").exists()  # every daemon git's processes started was killed
    runs = dump.read_text().split("END\n")
    assert len(runs) > 10 and SECRET not in dump.read_text()
    for run in filter(None, runs):
        env = dict(line.split("=", 1) for line in run.splitlines()[1:] if "=" in line)
        assert not env.get("OPENAI_API_KEY") and not env.get("SOME_VAR")
        if run.startswith("ARGS config --list"):
            continue  # reading the user's identity runs nothing
        assert not env.get("GIT_CONFIG_PARAMETERS")
        assert env["GIT_CONFIG_NOSYSTEM"] == "1", run.splitlines()[0]
        assert env["GIT_CONFIG_GLOBAL"] != str(home / ".gitconfig")
        assert env["GIT_CONFIG_KEY_0"] == "core.hooksPath"


@pytest.mark.parametrize(
    "key, value",
    [
        ("push.default", "simple"),
        ("branch.autoSetupRebase", "always"),
        ("branch.autoSetupMerge", "always"),
        ("branch.sort", "-committerdate"),
        ("core.createObject", "rename"),
        ("status.showUntrackedFiles", "no"),
        ("diff.algorithm", "histogram"),
        ("commit.cleanup", "strip"),
        ("log.date", "iso"),
    ],
)
def test_an_enumeration_git_checks_is_kept_so_that_harness_git_still_works(repo, key, value):
    git(repo, "config", key, value)  # git refuses each of these empty, in every command
    assert key not in dict(overrides(repo, safe_env(repo)))
    _drive(repo)
