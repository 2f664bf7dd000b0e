"""What the agent knows about its run: the goal, the plan, progress, verified facts.

render() is what the model reads of it: bounded, with the goal last and marked unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_cli.core.models import Task

MAX_FACTS = 20
MAX_FACT_CHARS = 300
MAX_TASKS = 30
MAX_TASK_CHARS = 200
MAX_ERROR_CHARS = 1500
GOAL_HEADER = "GOAL (unchanged since the start of the run):"
_TASK_FACT = re.compile(r"task (\d+) verified")  # the fact dispatch records for a verified task


def _cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, its head kept."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tail(text: str, limit: int) -> str:
    """`text` within `limit` characters, its tail kept (errors end with what matters)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


class AgentState(BaseModel):
    """The run's state; JSON round-trippable with to_dict()/from_dict().

    The budgets are the loop's (`executor.check_budgets`, from the run's usage) and the
    attempts are each task's (`Task.attempts`); keys that older versions saved here
    (`budget_steps`, `budget_usd`, `spent_usd`, `attempts`) are ignored when read.
    """

    model_config = ConfigDict(validate_assignment=True)

    goal: str = Field(frozen=True)  # never summarised, never replaced
    plan: list[Task] = Field(default_factory=list)
    step: int = Field(0, ge=0)
    facts: list[str] = Field(default_factory=list)  # verified facts only
    last_error: str | None = None
    success_criteria: str = ""  # the plan's, shown to every task and to the model verifier
    replans: int = Field(0, ge=0)  # re-plan checks the harness asked for after a task (max_replans)
    revisions: list[dict[str, Any]] = Field(default_factory=list)  # each PlanRevised, as saved
    # the files the tasks a revision replaced left uncommitted, each with its blob id then
    # ("" for a file gone): no commit takes one until a later task changes it (dispatch.py)
    dropped: dict[str, str] = Field(default_factory=dict)
    closing_summary: str = ""  # the model's words for the human at the end of the run
    # the task whose verified work is being committed, saved just before the commit: only
    # then is a commit the state names nowhere the harness's own (`resumed.adopt_unsaved_commit`)
    committing: int | None = Field(None, ge=0)

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the run needs a non-empty goal")
        return value

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible data that from_dict() turns back into an equal state."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentState:
        """The state to_dict() described."""
        return cls.model_validate(data)

    def current_task(self) -> int | None:
        """Index of the task being worked on: the running one, else the first pending one."""
        for status in ("running", "failed", "pending"):
            for index, task in enumerate(self.plan):
                if task.status == status:
                    return index
        return None

    def done_tasks(self) -> list[int]:
        """Indexes of verified tasks."""
        return [i for i, task in enumerate(self.plan) if task.status == "verified"]

    def rewind(self, keep: int) -> None:
        """Forget every task after the first `keep`: each back to pending as it was planned,
        its commit, attempts, hints and proof gone, and the facts its verification added."""
        self.plan = [
            task
            if i < keep
            else Task(
                goal=task.goal, acceptance=task.acceptance, acceptance_cmd=task.acceptance_cmd
            )
            for i, task in enumerate(self.plan)
        ]
        self.facts = [
            fact
            for fact in self.facts
            if not ((m := _TASK_FACT.match(fact)) and int(m.group(1)) > keep)
        ]
        self.last_error = None
        self.closing_summary = ""

    def render(self) -> str:
        """What the model reads: facts, tasks, the last failure, then the goal, last."""
        return f"{self.render_progress()}\n\n{GOAL_HEADER}\n{self.goal}".lstrip()

    def render_progress(self) -> str:
        """Facts, tasks and the last failure, without the goal (a request puts it last)."""
        parts = [self._render_facts(), self._render_plan()]
        if self.last_error:
            parts.append("LAST FAILURE:\n" + _tail(self.last_error, MAX_ERROR_CHARS))
        return "\n\n".join(part for part in parts if part)

    def _render_facts(self) -> str:
        """The latest verified facts, each cut short."""
        if not self.facts:
            return ""
        shown = self.facts[-MAX_FACTS:]
        lines = ["VERIFIED FACTS:"]
        if len(self.facts) > len(shown):
            lines.append(f"({len(self.facts) - len(shown)} earlier facts not shown)")
        lines += [f"- {_cut(' '.join(fact.split()), MAX_FACT_CHARS)}" for fact in shown]
        return "\n".join(lines)

    def _render_plan(self) -> str:
        """Done and remaining tasks, the current one marked."""
        if not self.plan:
            return ""
        current = self.current_task()
        done = len(self.done_tasks())
        lines = [f"PLAN ({done} of {len(self.plan)} tasks done):"]
        for index, task in enumerate(self.plan[:MAX_TASKS]):
            mark = {
                "verified": "done",
                "rejected": "rejected",
                "skipped": "skipped",
                "nothing_to_do": "nothing to do",
            }.get(task.status, "todo")
            if index == current:
                mark = "now"
            lines.append(
                f"{index + 1}. [{mark}] {_cut(' '.join(task.goal.split()), MAX_TASK_CHARS)}"
            )
        if len(self.plan) > MAX_TASKS:
            lines.append(f"({len(self.plan) - MAX_TASKS} more tasks not shown)")
        return "\n".join(lines)
