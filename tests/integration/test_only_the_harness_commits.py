"""The harness alone commits verified work: what the model's commands (or the code a check
runs) commit is taken back into the work tree, judged, and committed by the harness."""

from __future__ import annotations

import pytest
from runkit import (
    GOAL,
    GOOD_MEDIAN,
    add_median,
    events_of,
    facts,
    finish,
    plan,
    state_of,
    task,
)

from conftest import git
from integration.test_check_changed import EDIT_TEST

WEAK_TESTS = "def test_mean():\n    assert True\n"


def script(*git_args: list[str]) -> dict:
    """A write_file reply: tools/tidy.py, which runs each git command in turn."""
    lines = ["import subprocess"] + [f"subprocess.run({args!r}, check=True)" for args in git_args]
    content = "\n".join(lines) + "\n"
    return {"tool": "write_file", "args": {"path": "tools/tidy.py", "content": content}}


RUN_SCRIPT = {"tool": "run", "args": {"cmd": "python tools/tidy.py"}}
WEAKEN = {"tool": "write_file", "args": {"path": "tests/test_stats.py", "content": WEAK_TESTS}}
COMMIT = (["git", "add", "-A"], ["git", "commit", "-qm", "tidy"])


def notices(stdout: str) -> list[str]:
    return [e["text"] for e in events_of(stdout) if e["event"] == "notice"]


def branch_of(repo) -> str:
    return git(repo, "branch", "--show-current").strip()


@pytest.mark.slow
@pytest.mark.parametrize(
    "moves, said",
    [
        (COMMIT, "committed 1 commit"),
        ((["git", "checkout", "-q", "-b", "side"], *COMMIT), "committed 1 commit and switched"),
        (
            (*COMMIT, ["git", "checkout", "-q", "--detach", "HEAD"]),
            "committed 1 commit and detached",
        ),
        ((*COMMIT, ["git", "reset", "-q", "--soft", "HEAD~1"], *COMMIT), "committed 1 commit"),
    ],
    ids=["on-the-run-branch", "on-a-new-branch", "detached", "reset-and-again"],
)
def test_what_the_models_script_commits_is_judged_and_committed_by_the_harness(
    moves, said, agent_in_process, fake_server, demo_repo
):
    """The script commits the task's rewrite of its tests: taken back into the work tree,
    the rewrite is named in `check_changed` and the harness's commit with its trailer holds
    it; the run ends on its own branch, nothing staged, the model's commit on no branch of
    the run's."""
    initial = git(demo_repo, "rev-parse", "HEAD").strip()
    srv = fake_server([plan(task()), WEAKEN, script(*moves), RUN_SCRIPT, finish(), facts()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (taken,) = [n for n in notices(proc.stdout) if "taken back into the work tree" in n]
    assert taken.startswith(f"the model's commands {said}"), taken
    assert taken.endswith("only the harness commits"), taken
    (done,) = [e for e in events_of(proc.stdout) if e["event"] == "task_done"]
    assert done["status"] == "verified" and done["check_changed"] == ["tests/test_stats.py"]
    run = state_of(demo_repo)
    assert branch_of(demo_repo) == run["branch"]
    assert git(demo_repo, "rev-parse", "HEAD").strip() == done["commit"]
    assert git(demo_repo, "rev-parse", "HEAD~1").strip() == initial
    message = git(demo_repo, "log", "--format=%B", "-1").strip()
    assert message.endswith(f"Agent-Run: {run['run_id']}")
    assert sorted(git(demo_repo, "show", "--name-only", "--format=", "HEAD").split()) == [
        "tests/test_stats.py",
        "tools/tidy.py",
    ]
    assert git(demo_repo, "status", "--porcelain") == ""
    assert git(demo_repo, "rev-parse", "main").strip() == initial  # the user's branch


@pytest.mark.slow
def test_a_commit_on_the_users_branch_is_named_and_left_to_the_user(
    agent_in_process, fake_server, demo_repo
):
    """The script switches to `main` and commits there: the run's branch gets the work back,
    and `main` is named with the way to put it back, but not moved by the harness."""
    initial = git(demo_repo, "rev-parse", "HEAD").strip()
    moves = (["git", "switch", "-q", "main"], *COMMIT)
    srv = fake_server([plan(task()), add_median(), script(*moves), RUN_SCRIPT, finish(), facts()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (taken,) = [n for n in notices(proc.stdout) if "taken back" in n]
    moved = git(demo_repo, "rev-parse", "main").strip()
    assert moved != initial and git(demo_repo, "log", "--format=%s", "-1", "main") == "tidy\n"
    assert taken.startswith("the model's commands committed 1 commit and switched to branch main")
    assert f"your branch main moved from {initial[:12]} to {moved[:12]}" in taken
    assert f"git branch -f main {initial[:12]} puts it back" in taken
    assert branch_of(demo_repo) == state_of(demo_repo)["branch"]
    assert git(demo_repo, "rev-parse", "HEAD~1").strip() == initial
    assert git(demo_repo, "status", "--porcelain") == ""


@pytest.mark.slow
def test_a_rejected_tasks_self_made_commit_is_left_uncommitted(
    agent_in_process, fake_server, demo_repo
):
    """Without `finish` the attempt is rejected; what the script committed is left
    uncommitted with the rest of the task's changes, never on the run's branch."""
    initial = git(demo_repo, "rev-parse", "HEAD").strip()
    steps = [plan(task()), WEAKEN, script(*COMMIT), RUN_SCRIPT]
    srv = fake_server(steps + steps[1:] + [facts()])
    env = {"AGENT_TASK_MAX_STEPS": "3"}
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=env
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert len([n for n in notices(proc.stdout) if "taken back" in n]) == 2
    assert git(demo_repo, "rev-parse", "HEAD").strip() == initial
    assert branch_of(demo_repo) == state_of(demo_repo)["branch"]
    assert sorted(git(demo_repo, "status", "--porcelain").splitlines()) == [
        " M tests/test_stats.py",
        "?? tools/",
    ]


@pytest.mark.slow
def test_the_users_staged_change_stays_staged_and_out_of_the_commit(
    agent_in_process, fake_server, demo_repo
):
    """With --allow-dirty, the user's staged README change is what the index holds after the
    script's `git add -A` and commit are taken back: staged, uncommitted, theirs."""
    (demo_repo / "README.md").write_text("mine\n")
    git(demo_repo, "add", "README.md")
    srv = fake_server([plan(task()), add_median(), script(*COMMIT), RUN_SCRIPT, finish(), facts()])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--allow-dirty", "--base-url", srv.url, cwd=demo_repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(git(demo_repo, "show", "--name-only", "--format=", "HEAD").split()) == [
        "calc/stats.py",
        "tools/tidy.py",
    ]
    assert git(demo_repo, "status", "--porcelain") == "M  README.md\n"


COMMITS_WHEN_IMPORTED = GOOD_MEDIAN + (
    "\n\nimport subprocess as _sp\n\n"
    "_sp.run(['git', 'add', '-A'])\n"
    "_sp.run(['git', 'commit', '-qm', 'from the check'])\n"
)


@pytest.mark.slow
def test_what_the_code_a_check_runs_commits_is_taken_back(agent_in_process, fake_server, demo_repo):
    """calc/stats.py commits when the check imports it: the harness takes that commit back
    too, names the test file the task changed, and its own commit holds the work."""
    initial = git(demo_repo, "rev-parse", "HEAD").strip()
    steps = [plan(task()), EDIT_TEST, add_median(COMMITS_WHEN_IMPORTED), finish(), facts()]
    srv = fake_server(steps)
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(
        n.startswith("the code the check ran committed 1 commit") for n in notices(proc.stdout)
    )
    (done,) = [e for e in events_of(proc.stdout) if e["event"] == "task_done"]
    assert done["check_changed"] == ["tests/test_stats.py"]
    assert git(demo_repo, "rev-parse", "HEAD~1").strip() == initial
    assert "Agent-Run: " in git(demo_repo, "log", "--format=%B", "-1")
