"""A repository where git has no identity to commit under is refused before any model request.

The run's preflight and `agent doctor` both ask git itself (`git var`), and both give the two
commands that fix it."""

from __future__ import annotations

import pytest
from runkit import BAD_MEDIAN, GOAL, add_median, finish, plan, task

from conftest import git, make_repo

pytestmark = pytest.mark.slow
FIX = 'git config user.email "you@example.com" && git config user.name "Your Name"'


@pytest.fixture
def no_identity(tmp_path):
    """A repository with a commit, and no identity anywhere git looks (nor a guessed one)."""
    repo = make_repo(tmp_path / "anon")
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "user.useConfigOnly", "true")  # never guess one from the host name
    (tmp_path / "home").mkdir(exist_ok=True)
    env = {
        "HOME": str(tmp_path / "home"),  # what the agent_env fixture uses too
        "GIT_CONFIG_GLOBAL": str(tmp_path / "home" / "no-gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return repo, env


def test_a_run_stops_before_the_first_model_request_with_the_fix(
    agent_in_process, fake_server, no_identity
):
    repo, env = no_identity
    srv = fake_server([plan(task(cmd="true"))])
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no identity" in lines[0] and FIX in lines[0], proc.stderr
    assert srv.requests == []
    assert not (repo / ".agent").exists()


def test_an_author_from_the_environment_still_needs_a_committer(
    agent_in_process, fake_server, no_identity
):
    repo, env = no_identity
    srv = fake_server([plan(task(cmd="true"))])
    env |= {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com"}
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo, env=env)
    assert proc.returncode == 1 and FIX in proc.stderr, proc.stdout + proc.stderr
    assert srv.requests == []


def test_a_resume_is_refused_the_same_way(agent_in_process, fake_server, demo_repo, tmp_path):
    srv = fake_server(
        [plan(task()), add_median(BAD_MEDIAN), finish("first try"), finish("second try")]
    )
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    git(demo_repo, "config", "--unset", "user.name")
    git(demo_repo, "config", "--unset", "user.email")
    git(demo_repo, "config", "user.useConfigOnly", "true")
    env = {"GIT_CONFIG_GLOBAL": str(tmp_path / "no-gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"}
    again = fake_server([])
    proc = agent_in_process(
        "run", "--resume", "--yes", "--base-url", again.url, cwd=demo_repo, env=env
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert FIX in proc.stderr and again.requests == []


def test_doctor_fails_the_git_row_with_the_fix_and_passes_once_it_is_set(
    agent_in_process, fake_server, no_identity
):
    repo, env = no_identity
    srv = fake_server([])
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=repo, env=env)
    assert proc.returncode == 1
    rows = [line for line in proc.stdout.splitlines() if " git " in line]
    assert len(rows) == 1 and rows[0].lstrip().startswith("FAIL") and FIX in rows[0], proc.stdout
    git(repo, "config", "user.email", "me@example.com")
    git(repo, "config", "user.name", "Me")
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=repo, env=env)
    rows = [line for line in proc.stdout.splitlines() if " git " in line]
    assert (
        rows and rows[0].lstrip().startswith("ok") and "commits as Me <me@example.com>" in rows[0]
    )
