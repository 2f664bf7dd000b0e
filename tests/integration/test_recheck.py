"""A later task that undoes an earlier task's verified work is caught when every task is settled:
the earlier checks run again, a task restores the one that fails, or the run escalates."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from runkit import GOAL, PYTEST, add_median, events_of, finish, plan, state_of, task

from agent_cli.agent.judge import recheck
from agent_cli.agent.judge.verifier import Proofs
from agent_cli.core.models import Task
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from agent_cli.workspace.shell import runner as shell

MODE_CHECK = "grep -q 'def mode' calc/stats.py"
WITHOUT_MEDIAN = '''"""Descriptive statistics over lists of numbers."""


def mean(xs):
    """The arithmetic mean of a non-empty list."""
    if not xs:
        raise ValueError("mean of an empty list")
    return sum(xs) / len(xs)


def mode(xs):
    """The most common value."""
    return max(set(xs), key=xs.count)
'''
# task 2 rewrites the whole module for mode() and loses task 1's median()
REWRITE = {"tool": "write_file", "args": {"path": "calc/stats.py", "content": WITHOUT_MEDIAN}}
TASKS = (task(), task("Add mode() to calc/stats.py", MODE_CHECK))


def _run(agent_in_process, srv, repo, replan: str):
    return agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo,
        env={"AGENT_REPLAN": replan},
    )  # fmt: skip


@pytest.mark.slow
def test_a_later_task_that_breaks_an_earlier_check_gets_a_task_that_restores_it(
    agent_in_process, fake_server, demo_repo
):
    keep = {"tool": "revise_plan", "args": {"keep": True}}
    srv = fake_server(
        [plan(*TASKS), add_median(), finish(), keep, REWRITE, finish(), add_median(), finish()]
    )
    proc = _run(agent_in_process, srv, demo_repo, "after_task")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = state_of(demo_repo)["agent_state"]["plan"]
    assert [t["status"] for t in tasks] == ["verified"] * 3
    assert tasks[2]["restores"] == 0 and tasks[2]["acceptance_cmd"] == PYTEST
    assert tasks[2]["proof"] == "red-green"
    (added,) = [e for e in events_of(proc.stdout) if e["event"] == "plan_revised"]
    assert added["asked_by"] == "recheck" and added["start"] == 2 and added["old"] == []
    assert "task 1's check" in added["reason"] and "after task 2" in added["reason"]
    restoring = [r for r in srv.chat_requests if "Make task 1's check pass again" in str(r)]
    assert "has no attribute 'median'" in str(restoring[0]["messages"])  # the check's output
    stats = (demo_repo / "calc" / "stats.py").read_text()
    assert "def median" in stats and "def mode" in stats


@pytest.mark.slow
def test_with_re_planning_off_a_broken_earlier_check_escalates_the_run(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(*TASKS), add_median(), finish(), REWRITE, finish()])
    proc = _run(agent_in_process, srv, demo_repo, "off")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    evs = events_of(proc.stdout)
    (esc,) = [e for e in evs if e["event"] == "escalated"]
    assert esc["index"] == -1 and esc["goal"].startswith("task 1's check `")
    assert "median" in esc["reason"]
    assert "task 1's check fails at the end" in evs[-1]["message"]
    assert len(state_of(demo_repo)["agent_state"]["plan"]) == 2  # no task was added


@pytest.fixture
def workspace(demo_repo: Path) -> RepoWorkspace:
    git = GitRepo(demo_repo)
    env = shell.scrub_env(dict(os.environ), [])
    runner = CommandRunner(root=git.root, readonly=[git.git_dir], timeout_s=30, env=env)
    return RepoWorkspace(git, runner)


def _verified(cmd: str | None, **kw: object) -> Task:
    return Task(goal="g", acceptance_cmd=cmd, status="verified", **kw)  # type: ignore[arg-type]


def test_each_distinct_command_runs_once_and_one_that_passed_on_this_tree_not_at_all(
    workspace: RepoWorkspace, demo_repo: Path
):
    marks = demo_repo / "runs.txt"
    cmd = f"sh -c 'echo x >> {marks}; exit 1'"
    proofs = Proofs()
    plan = [_verified(cmd), _verified(cmd, commit="abc"), _verified(None), _verified("false")]
    proofs.remember(["false"], workspace.tree(), True)  # as if it passed on this tree
    (found,) = recheck.regressions(plan, workspace, proofs)
    assert found.index == 0 and found.command == cmd and found.since == (1,)
    assert marks.read_text() == "x\n"


def test_pending_rejected_and_skipped_restoring_tasks_are_not_run_again(
    workspace: RepoWorkspace,
):
    plan = [
        Task(goal="g", acceptance_cmd="false", status="rejected"),
        Task(goal="g", acceptance_cmd="false", status="pending"),
        _verified("exit-one"),
        Task(goal="r", acceptance_cmd="exit-one", status="skipped", restores=2),
    ]
    assert recheck.regressions(plan, workspace, Proofs()) == []
    assert recheck.restored_before(plan, "exit-one") and not recheck.restored_before(plan, "f")


def test_an_earlier_check_whose_code_exits_127_is_a_regression_even_with_accept(
    workspace: RepoWorkspace, demo_repo: Path
):
    """Exit 127 leaves an earlier check to --accept only when its program is gone: a later
    task whose code exits 127 when the check imports it broke that check."""
    (demo_repo / "calc" / "stats.py").write_text("import os\n\nos._exit(127)\n")
    check = f"{sys.executable} -c 'import calc.stats'"
    plan = [_verified(check), _verified("no-such-program-xyz")]
    (found,) = recheck.regressions(plan, workspace, Proofs(), ["true"])
    assert found.command == check and found.verdict.exit_code == 127
