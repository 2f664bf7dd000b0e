"""AgentState: JSON round trip, older states, task helpers and what render() shows the model."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_cli.agent.run.state import GOAL_HEADER, MAX_ERROR_CHARS, AgentState
from agent_cli.core.models import Task

GOAL = "add count_attempts to the retry module"


def make_state(**kwargs) -> AgentState:
    """A state with a three-task plan."""
    plan = [Task(goal="read retry.py"), Task(goal="add count_attempts"), Task(goal="test it")]
    return AgentState(goal=GOAL, plan=plan, **kwargs)


def test_json_round_trip_is_exact():
    state = make_state(step=7)
    state.plan[0].status = "verified"
    state.plan[1].attempts = 1
    state.facts.append("retry.py defines Retrier")
    state.last_error = "exit 1: AssertionError"
    data = json.loads(json.dumps(state.to_dict()))
    again = AgentState.from_dict(data)
    assert again == state
    assert again.plan[1].attempts == 1
    assert again.to_dict() == state.to_dict()


def test_an_older_state_with_the_removed_budget_keys_still_loads():
    old = make_state(step=3).to_dict() | {
        "budget_steps": 40,
        "budget_usd": 1.5,
        "spent_usd": 0.0,
        "attempts": {"0": 1},
    }
    again = AgentState.from_dict(old)
    assert again.step == 3 and "spent_usd" not in again.to_dict()


def test_goal_is_never_blank_and_never_replaced():
    with pytest.raises(ValidationError):
        AgentState(goal="   ")
    state = make_state()
    with pytest.raises(ValidationError):
        state.goal = "something else"
    assert state.goal == GOAL


def test_task_helpers_follow_the_statuses():
    state = make_state()
    assert state.current_task() == 0
    state.plan[0].status = "verified"
    state.plan[2].status = "running"
    assert state.current_task() == 2
    assert state.done_tasks() == [0]
    state.plan[1].status = state.plan[2].status = "verified"
    assert state.current_task() is None


def test_render_ends_with_the_goal_marked_unchanged():
    state = make_state(last_error="boom")
    state.facts.append("retry.py has no count_attempts yet")
    text = state.render()
    assert text.endswith(f"{GOAL_HEADER}\n{GOAL}")
    assert text.index("retry.py has no count_attempts yet") < text.index("LAST FAILURE")
    assert text.index("LAST FAILURE") < text.index(GOAL_HEADER)


def test_render_shows_done_current_and_remaining_tasks():
    state = make_state()
    state.plan[0].status = "verified"
    text = state.render()
    assert "PLAN (1 of 3 tasks done):" in text
    assert "1. [done] read retry.py" in text
    assert "2. [now] add count_attempts" in text
    assert "3. [todo] test it" in text


def test_render_cuts_the_last_failure_to_its_tail():
    error = "HEAD" + "x" * 5000 + "TAIL"
    text = make_state(last_error=error).render()
    failure = text.split("LAST FAILURE:\n", 1)[1].split(f"\n\n{GOAL_HEADER}", 1)[0]
    assert len(failure) == MAX_ERROR_CHARS
    assert failure.endswith("TAIL") and "HEAD" not in failure


def test_render_is_bounded_but_the_goal_is_whole():
    long_goal = "refactor " * 500
    state = AgentState(
        goal=long_goal,
        plan=[Task(goal=f"task {i} " * 80) for i in range(100)],
        facts=[f"fact {i} " * 100 for i in range(500)],
        last_error="e" * 10_000,
    )
    text = state.render()
    assert text.endswith(long_goal)
    assert len(text) - len(long_goal) < 20_000
    assert "(480 earlier facts not shown)" in text
    assert "(70 more tasks not shown)" in text


def test_plan_events_carry_every_field_of_a_task_and_the_run_report_no_running_task():
    from agent_cli.core import events
    from agent_cli.core.models import Task

    assert list(events.PlannedTask.__annotations__) == list(Task.model_fields)
    tasks = [Task(goal="a", acceptance_cmd="true", status="running", attempts=1), Task(goal="b")]
    plan = events.PlanMade(goal="g", tasks=events.planned(tasks))
    assert plan.model_dump()["tasks"] == [t.model_dump() for t in tasks]
    done = events.RunDone(
        run_id="r",
        status="failed",
        exit_code=1,
        tasks=events.reported(tasks, ["make check"]),
        steps=1,
        prompt_tokens=0,
        completion_tokens=0,
        cost_usd=0.0,
    )
    first, second = done.model_dump()["tasks"]
    assert first["status"] == "unfinished" and first["acceptance_cmd"] == "true"
    assert second["status"] == "pending" and second["acceptance_cmd"] == "make check"
    assert list(first) == [
        "goal",
        "attempts",
        "status",
        "acceptance_cmd",
        "exit_code",
        "commit",
        "proof",
        "check_changed",
        "restores",
    ]
