"""Where a live run is: its state.json (saved at a task's boundaries) and its journal's last line.

Nothing is written for this: the journal already gets one line per tool call with the
run's step, its task and its usage, and state.json holds the plan and which task is under
way. Reading both is what a run costs `agent runs`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent_cli.agent.run import journal
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunStore
from agent_cli.core.errors import AgentError


@dataclass(frozen=True)
class Progress:
    """A run's current task (1-based; None between tasks), its step and its spend so far."""

    task: int | None
    tasks: int
    task_goal: str
    step: int
    cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values."""
        return asdict(self)


def progress(store: RunStore, run_id: str) -> Progress | None:
    """How far run `run_id` has got; None when it has no readable state yet."""
    try:
        record = store.load(run_id)
        state = AgentState.from_dict(record.agent_state)
        lines = store.journal_lines(run_id)
    except (AgentError, ValueError):
        return None
    index = state.current_task()
    step, cost = record.steps, record.usage.cost_usd
    entries = journal.parse(lines)
    if entries and entries[-1].step > step:
        last = entries[-1]
        step, cost, index = last.step, last.usage.cost_usd, last.task
    if index is not None and not 0 <= index < len(state.plan):
        index = None
    return Progress(
        task=None if index is None else index + 1,
        tasks=len(state.plan),
        task_goal="" if index is None else state.plan[index].goal,
        step=step,
        cost_usd=cost,
    )
