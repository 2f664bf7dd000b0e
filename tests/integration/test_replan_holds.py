"""A re-plan that replaces a task with changes left uncommitted holds them as a skip does."""

from __future__ import annotations

import pytest
from runkit import (
    BAD_MEDIAN,
    GOAL,
    GOOD_MEDIAN,
    add_median,
    events_of,
    finish,
    plan,
    replace_median,
    task,
)

from agent_cli.core.events import PlanRevised, TaskDone
from agent_cli.ui.progress import RunState
from conftest import git

pytestmark = pytest.mark.slow
NOTES = task("Write NOTES.txt saying median exists", "test -f NOTES.txt")


def revise(*tasks: dict) -> dict:
    return {"tool": "revise_plan", "args": {"keep": False, "reason": "new", "tasks": list(tasks)}}


def rejected_then_replanned(agent_in_process, fake_server, repo) -> None:
    """Task 1 (median) of two is rejected twice, its wrong median left uncommitted."""
    srv = fake_server([plan(task(), NOTES), add_median(BAD_MEDIAN), finish("first try"),
                       finish("second try")])  # fmt: skip
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr


def test_a_replaced_rejected_tasks_changes_stay_out_of_the_next_commit(
    agent_in_process, fake_server, demo_repo
):
    rejected_then_replanned(agent_in_process, fake_server, demo_repo)
    notes = {"tool": "write_file", "args": {"path": "NOTES.txt", "content": "median\n"}}
    srv = fake_server([revise(NOTES), notes, finish("notes written")])
    proc = agent_in_process(
        "run", "--resume", "--replan", "forget median", "--yes", "--json",
        "--base-url", srv.url, cwd=demo_repo,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    shown = git(demo_repo, "show", "--stat", "HEAD")
    assert "NOTES.txt" in shown and "calc/stats.py" not in shown
    assert "calc/stats.py" in git(demo_repo, "status", "--porcelain")  # left for the human
    events = events_of(proc.stdout)
    held = [e["text"] for e in events if e["event"] == "notice" and "stay uncommitted" in e["text"]]
    assert held and "calc/stats.py" in held[0]
    done = events[-1]
    assert done["status"] == "skipped" and [t["status"] for t in done["tasks"]] == ["verified"]
    assert "'Add median() to calc/stats.py' left its changes uncommitted" in done["message"]
    assert "calc/stats.py" in done["message"]


def test_a_new_task_that_changes_the_replaced_tasks_files_continues_that_work(
    agent_in_process, fake_server, demo_repo
):
    rejected_then_replanned(agent_in_process, fake_server, demo_repo)
    fix = task("Fix median() in calc/stats.py")
    srv = fake_server([revise(fix), replace_median(BAD_MEDIAN, GOOD_MEDIAN), finish("fixed")])
    proc = agent_in_process(
        "run", "--resume", "--replan", "fix it", "--yes", "--json",
        "--base-url", srv.url, cwd=demo_repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "calc/stats.py" in git(demo_repo, "show", "--stat", "HEAD")
    assert not git(demo_repo, "status", "--porcelain").strip()
    assert events_of(proc.stdout)[-1]["message"] == "every task verified"


def test_the_report_gives_a_new_task_none_of_the_replaced_tasks_summaries():
    state = RunState()
    state.apply(TaskDone(index=0, status="rejected", attempts=2, summary="second try"))
    state.apply(PlanRevised(start=0, reason="new", old=[], new=[], asked_by="human"))
    state.apply(TaskDone(index=0, status="verified", attempts=1, summary="notes written"))
    assert state.summaries == [(0, "notes written")]


def test_the_report_gives_a_task_retried_after_a_hint_its_latest_summary_only():
    state = RunState()
    state.apply(TaskDone(index=0, status="verified", attempts=1, summary="one done"))
    state.apply(TaskDone(index=1, status="rejected", attempts=2, summary="passing, nothing to do"))
    state.apply(TaskDone(index=1, status="verified", attempts=3, summary="fixed after the hint"))
    assert state.summaries == [(0, "one done"), (1, "fixed after the hint")]
    state.apply(TaskDone(index=1, status="rejected", attempts=4))
    assert state.summaries == [(0, "one done")]
