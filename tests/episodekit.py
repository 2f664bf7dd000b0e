"""Episodes for the long-term memory tests: a verified one-task run unless told otherwise."""

from __future__ import annotations

from agent_cli.core.models import CommandRun, Episode, TaskRecord


def episode(run_id: str, goal: str, **kw) -> Episode:
    base = {
        "run_id": run_id,
        "goal": goal,
        "plan": [goal],
        "status": "verified",
        "tasks": [TaskRecord(goal=goal, status="verified", attempts=1, acceptance_cmd="pytest -q")],
        "commands": [CommandRun(cmd="pytest -q", exit_code=0)],
        "files_touched": ["src/app.py"],
        "summary": "done",
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "cost_usd": 0.01,
        "started_at": "2025-03-14T09:00:00+00:00",
        "ended_at": "2025-03-14T09:20:00+00:00",
    }
    return Episode(**{**base, **kw})
