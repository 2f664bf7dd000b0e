"""`agent run` checks in the order that names the right fix, and keeps its state out of git.

Local and cheap first (the repository, another run's lock, the run to resume), then the
settings and the API key, then approval; a refused run leaves no `.agent/` behind. The
state directory is excluded from git before anything is written into it, on every path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from runkit import GOAL, plan, task
from typer.testing import CliRunner

from agent_cli.cli.app import app
from conftest import SECRET_ENV, git, make_repo

pytestmark = pytest.mark.slow

NO_KEY = {"OPENAI_BASE_URL": ""}  # the default endpoint (api.openai.com) needs a key


def refused(proc, says: str, repo) -> None:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert not (repo / ".agent").exists(), "a refused run left .agent/ behind"


@pytest.fixture
def no_commits(tmp_path):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo


def test_nothing_to_resume_is_said_before_approval_and_before_the_key(
    agent_in_process, scratch_repo
):
    refused(
        agent_in_process("run", "--resume", cwd=scratch_repo),
        "there is no unfinished run to resume",
        scratch_repo,
    )
    refused(
        agent_in_process("run", "--resume", "--yes", cwd=scratch_repo, env=NO_KEY),
        "there is no unfinished run to resume",
        scratch_repo,
    )


def test_a_repository_without_commits_is_said_before_approval_and_before_the_key(
    agent_in_process, no_commits
):
    refused(agent_in_process("run", "x", cwd=no_commits), "no commits yet", no_commits)
    refused(
        agent_in_process("run", "x", "--yes", cwd=no_commits, env=NO_KEY),
        "no commits yet",
        no_commits,
    )


def test_uncommitted_changes_are_said_before_approval(agent_in_process, scratch_repo):
    (scratch_repo / "README.md").write_text("changed\n")
    refused(agent_in_process("run", "x", cwd=scratch_repo), "uncommitted changes", scratch_repo)


def test_another_running_agent_is_said_before_the_key(agent_in_process, scratch_repo):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom agent_cli.workspace.lock import RunLock\n"
            "RunLock(sys.argv[1]).acquire()\nprint('locked', flush=True)\ntime.sleep(60)",
            str(scratch_repo / ".agent" / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = agent_in_process("run", "x", "--yes", cwd=scratch_repo, env=NO_KEY)
        assert proc.returncode == 1 and f"another agent run (pid {holder.pid})" in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_the_key_is_said_before_approval(agent_in_process, scratch_repo):
    refused(agent_in_process("run", "x", cwd=scratch_repo, env=NO_KEY), "no API key", scratch_repo)


def test_approval_comes_last_and_leaves_nothing_behind(agent_in_process, fake_server, scratch_repo):
    srv = fake_server([])
    refused(
        agent_in_process("run", "x", "--base-url", srv.url, cwd=scratch_repo),
        "approval is 'ask' but there is no terminal",
        scratch_repo,
    )
    assert srv.requests == []


def test_plan_only_then_a_run_works_and_git_never_sees_the_state(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server(
        [
            plan(task(cmd="test -f done.txt")),
            plan(task(cmd="test -f done.txt")),
            {"tool": "write_file", "args": {"path": "done.txt", "content": "d\n"}},
            {"tool": "finish", "args": {"summary": "made it"}},
        ]
    )
    first = agent_in_process("run", GOAL, "--plan-only", "--base-url", srv.url, cwd=scratch_repo)
    assert first.returncode == 0, first.stderr
    assert git(scratch_repo, "status", "--porcelain") == ""
    second = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=scratch_repo)
    assert second.returncode == 0, second.stdout + second.stderr
    assert git(scratch_repo, "status", "--porcelain") == ""


def test_a_state_directory_that_is_a_link_of_the_users_own_leaves_the_checkout_clean(
    agent_in_process, fake_server, scratch_repo, tmp_path
):
    """`.agent` a link the repository does not track, to a folder elsewhere: followed, and the
    link itself excluded from git, so a run in the checkout is not refused as dirty for it."""
    (tmp_path / "state").mkdir()
    (scratch_repo / ".agent").symlink_to(tmp_path / "state")
    srv = fake_server(
        [
            plan(task(cmd="test -f done.txt")),
            {"tool": "write_file", "args": {"path": "done.txt", "content": "d\n"}},
            {"tool": "finish", "args": {"summary": "made it"}},
        ]
    )
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=scratch_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(scratch_repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(scratch_repo, "show", "--name-only", "--format=", "HEAD").split() == ["done.txt"]
    assert (tmp_path / "state" / "runs").is_dir()


@pytest.mark.parametrize(
    "command", [["recall", "median"], ["memory", "show"], ["doctor"], ["run", GOAL, "--plan-only"]]
)
def test_every_path_excludes_an_existing_state_directory_before_writing_in_it(
    command, agent_in_process, fake_server, tmp_path
):
    repo = make_repo(tmp_path / "repo")
    seeded = tmp_path / "seed.jsonl"
    seeded.write_text(
        '{"collection": "facts", "id": "f1", "document": "the median of a list", '
        '"metadata": {"kind": "fact", "source": "harness", "trust": 1.0, '
        '"created_at": "2026-11-01T00:00:00+00:00", "text_hash": "seed", '
        '"ttl_days": 90.0}}\n'
    )
    assert agent_in_process("memory", "import", str(seeded), cwd=repo).returncode == 0
    (repo / ".git" / "info" / "exclude").write_text("")  # as an older version left it
    srv = fake_server([plan(task(cmd="test -f done.txt"))])
    proc = (
        agent_in_process(*command, "--base-url", srv.url, cwd=repo)
        if command[0] in ("run", "doctor")
        else agent_in_process(*command, cwd=repo)
    )
    assert proc.returncode in (0, 1), proc.stderr  # doctor fails its key check offline
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert ".agent/" in (repo / ".git" / "info" / "exclude").read_text()


# Before the plan request, git runs for: finding the repository (rev-parse), the preflight
# (HEAD has a commit: rev-parse; HEAD is on a branch: symbolic-ref; git has an identity to
# commit under: var; the work tree: status), and
# the file list sent with the plan request (ls-files). Each harness git command is two
# processes: the repository's config is read first, to neutralise its command-valued keys.
# The remotes' URLs (their passwords are masked), finding the repository, the preflight
# (branch, identity, status), the repository's identity for long-term memory (its root
# commit, its remotes), and the file list sent with the plan.
GIT_BEFORE_PLAN = [
    "remote",
    "rev-parse",
    "rev-parse",
    "symbolic-ref",
    "show-ref",  # a branch named `agent` would block the run's branch
    "var",
    "status",
    "rev-list",
    "remote",
    "ls-files",
]


def test_the_repository_is_checked_once_before_the_plan(
    agent_env, fake_server, scratch_repo, tmp_path
):
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"  # a real git process for every call, each one logged first
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("git")} "$@"\n')
    wrapper.chmod(0o755)
    before_plan: list[list[str]] = []

    def reply(body: dict) -> dict:  # the plan request is the run's first chat request
        if not before_plan:
            before_plan.append(log.read_text().splitlines())
        return plan(task(cmd="test -f done.txt"))

    srv = fake_server(reply)
    env: dict[str, str | None] = {**agent_env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.update(dict.fromkeys(SECRET_ENV))
    result = CliRunner().invoke(
        app,
        ["run", GOAL, "--plan-only", "--base-url", srv.url, "--repo", str(scratch_repo)],
        env=env,
    )
    assert result.exit_code == 0, result.output
    # git's own version, asked at most once a process, reads no repository
    calls = [git_command(line) for line in before_plan[0] if git_command(line) != "version"]
    assert calls.count("status") == 1, " ".join(calls)  # the preflight ran once
    # the user's own configuration is read once, and the repository's once: nothing changes
    # it before the plan, so its listing is reused before each command
    # the main work tree (for the runs of this repository) is read from files: no git
    assert calls == ["config", "config", *GIT_BEFORE_PLAN], " ".join(calls)
    assert len(calls) == 12


def git_command(logged: str) -> str:
    """The git subcommand of a logged command line, without its `-c KEY=VALUE` options."""
    words = logged.split()
    while words and words[0] == "-c":
        words = words[2:]
    return words[0] if words else ""
