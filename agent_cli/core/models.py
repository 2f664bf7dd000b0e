"""Pydantic values shared across the package: plans, tasks, tool calls, replies, verdicts, episodes.

Working-memory items live in `agent_cli.memory.working.store` (`Item`) as slotted dataclasses instead:
they are created thousands of times per run and validation there would dominate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

TaskStatus = Literal["pending", "running", "verified", "rejected", "skipped"]
MAX_ATTEMPTS = 2  # a first attempt and one retry; each human hint adds one more


class Task(BaseModel):
    """One step of a plan; done only when the harness has seen its acceptance pass."""

    goal: str
    acceptance: str = ""
    acceptance_cmd: str | None = None
    status: TaskStatus = "pending"
    attempts: int = 0
    last_reason: str = ""
    summary: str = ""
    commit: str | None = None
    exit_code: int | None = None
    max_attempts: int = MAX_ATTEMPTS  # raised by one for each hint the human gives
    hints: list[str] = Field(default_factory=list)  # the human's words, oldest first
    left_files: list[str] = Field(default_factory=list)  # changes a skipped task left uncommitted
    baseline: Literal["pass", "fail"] | None = None  # its check on the state before the task
    proof: Literal["red-green", "regression-only"] | None = None

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a task needs a non-empty goal")
        return v.strip()

    @field_validator("acceptance_cmd")
    @classmethod
    def _blank_cmd_is_none(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None


class Plan(BaseModel):
    """What `submit_plan` returns: the goal, its tasks in order, and how success is judged."""

    goal: str
    tasks: list[Task] = Field(min_length=1)
    success_criteria: str = ""


class ToolCall(BaseModel):
    """A function call the model asked for. `arguments` is the raw JSON text as sent."""

    id: str
    name: str
    arguments: str = "{}"


class Usage(BaseModel):
    """Tokens of one call or a running total, with its cost from the configured prices.

    `cached_tokens` is the part of `prompt_tokens` the server read from its prompt cache.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, other: Usage) -> None:
        """Accumulate another usage into this one."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.cost_usd += other.cost_usd
        self.calls += other.calls


class ChatReply(BaseModel):
    """One assistant turn: text and/or tool calls, and what it cost."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)


class Verdict(BaseModel):
    """The harness's judgement of one attempt: passed or not, why, and what it saw."""

    passed: bool
    reason: str
    exit_code: int | None = None
    command: str | None = None
    output_tail: str = ""
    judge: Literal["command", "model", "none"] = "command"


class CommandRun(BaseModel):
    """A command the run executed and the exit code it saw."""

    cmd: str
    exit_code: int | None


class TaskRecord(BaseModel):
    """A task as remembered in an episode."""

    goal: str
    status: TaskStatus
    attempts: int = 0
    acceptance_cmd: str | None = None
    exit_code: int | None = None


class Fix(BaseModel):
    """How a run got a failing task to pass: the failures it had, the task, the passing summary."""

    signatures: list[str]
    task: str
    summary: str


class Episode(BaseModel):
    """What one run tried and how it ended, kept in long-term memory."""

    run_id: str
    goal: str
    plan: list[str] = Field(default_factory=list)
    tasks: list[TaskRecord] = Field(default_factory=list)
    status: str = "pending"
    files_touched: list[str] = Field(default_factory=list)
    commands: list[CommandRun] = Field(default_factory=list)
    failure_signatures: list[str] = Field(default_factory=list)
    fixes: list[Fix] = Field(default_factory=list)
    summary: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    started_at: str = ""
    ended_at: str = ""
