"""Pydantic values shared across the package: plans, tasks, tool calls, replies, verdicts, episodes.

The forced tools' arguments (`submit_plan`, `revise_plan`, `submit_facts`, `submit_verdict`) are
models here too: their JSON schemas are generated from them, bounds included, and replies are
validated against them strictly (no coercion: `"no"` is not a boolean).

Working-memory items live in `agent_cli.memory.working.store` (`Item`) as slotted dataclasses instead:
they are created thousands of times per run and validation there would dominate.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

# pending: not started; running: an attempt under way (counted when it starts); failed: its last
# attempt failed and another follows; verified: done, the harness saw its check pass; rejected:
# its attempts are used up; skipped: the human went on without it; nothing_to_do: its check
# passed before it started and it changed no file, so there was nothing to verify.
TaskStatus = Literal[
    "pending", "running", "failed", "verified", "rejected", "skipped", "nothing_to_do"
]
SETTLED: tuple[TaskStatus, ...] = ("verified", "skipped", "nothing_to_do")  # final outcomes
MAX_ATTEMPTS = 2  # a first attempt and one retry; each human hint adds one more

# The bounds matter where a server turns the schema into a grammar (llama.cpp, vLLM): a small
# model held to the schema may otherwise go on adding tasks until its reply is cut off.
MAX_TASKS = 30  # tasks in a plan or in a revision
MAX_TEXT = 600  # characters of a planned goal, acceptance, command or success criteria
MAX_REASON = 1000  # characters of a revision's reason
MAX_FACTS = 10
MAX_FACT_TEXT = 400
MAX_FACT_FILES = 10
MAX_PATH = 300
MAX_VERDICT_REASON = 2000


def _all_required(schema: dict[str, Any]) -> None:
    """Name every property as required on the wire, so that a grammar writes each one."""
    schema["required"] = list(schema.get("properties", {}))


_ANSWER = ConfigDict(strict=True, json_schema_extra=_all_required)


class Tally(BaseModel):
    """The tests a test runner's summary counted in one run of a check (judge/ran.py)."""

    passed: int = Field(0, ge=0)  # passed, or passed though expected to fail (xpassed)
    failed: int = Field(0, ge=0)  # failed, or in error
    skipped: int = Field(0, ge=0)  # skipped, or expected to fail (xfailed)


class Task(BaseModel):
    """One step of a plan; done only when the harness has seen its acceptance pass."""

    goal: str
    acceptance: str = ""
    acceptance_cmd: str | None = None
    status: TaskStatus = "pending"
    attempts: int = Field(0, ge=0)
    # the attempts of earlier sessions, before a resume gave the rejected task a fresh start
    earlier_attempts: int = Field(0, ge=0)
    last_reason: str = ""
    summary: str = ""
    commit: str | None = None
    exit_code: int | None = None
    max_attempts: int = Field(MAX_ATTEMPTS, ge=1)  # raised by one for each hint the human gives
    hints: list[str] = Field(default_factory=list)  # the human's words, oldest first
    left_files: list[str] = Field(default_factory=list)  # changes a skipped task left uncommitted
    baseline: Literal["pass", "fail"] | None = None  # its check on the state before the task
    # what the test runner of each of those commands counted then (judge/ran.py; none
    # in a state saved before they were kept)
    baseline_counts: dict[str, Tally] = Field(default_factory=dict)
    proof: Literal["red-green", "regression-only"] | None = None
    # files of its commit that its own check reads (the tests it names, pytest's settings)
    check_changed: list[str] = Field(default_factory=list)
    # 0-based: the earlier task whose check this task, added by the harness, makes pass again
    restores: int | None = Field(None, ge=0)

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
    """A plan to carry out: the goal, its tasks in order, and how success is judged."""

    goal: str
    tasks: list[Task] = Field(min_length=1)
    success_criteria: str = ""


class PlannedTask(BaseModel):
    """A task as `submit_plan` and `revise_plan` carry it: only the three planned fields.

    A model cannot hand itself a status or a commit: any other key is ignored.
    """

    model_config = _ANSWER

    goal: str = Field(max_length=MAX_TEXT)
    acceptance: str = Field(default="", max_length=MAX_TEXT)
    acceptance_cmd: Annotated[str, Field(max_length=MAX_TEXT)] | None = None

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a task needs a non-empty goal")
        return v

    def task(self) -> Task:
        """The pending task this planned one starts as."""
        return Task(goal=self.goal, acceptance=self.acceptance, acceptance_cmd=self.acceptance_cmd)


class SubmittedPlan(BaseModel):
    """The arguments of `submit_plan`: the goal, its tasks in order, and the success criteria."""

    model_config = _ANSWER

    goal: str = Field(max_length=MAX_TEXT)
    tasks: list[PlannedTask] = Field(min_length=1, max_length=MAX_TASKS)
    success_criteria: str = Field(default="", max_length=MAX_TEXT)

    def plan(self) -> Plan:
        """The plan to carry out, every task pending."""
        return Plan(
            goal=self.goal,
            tasks=[t.task() for t in self.tasks],
            success_criteria=self.success_criteria,
        )


class PlanRevision(BaseModel):
    """The arguments of `revise_plan`: keep the remaining tasks, or these instead of them."""

    model_config = ConfigDict(strict=True)

    keep: bool
    reason: str = Field(default="", max_length=MAX_REASON)
    tasks: Annotated[list[PlannedTask], Field(max_length=MAX_TASKS)] | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _tasks_when_replaced(self) -> PlanRevision:
        if not self.keep and self.tasks is None:
            raise ValueError(f'"keep": false needs "tasks", a list of at most {MAX_TASKS}')
        return self

    def new_tasks(self) -> list[Task]:
        """The pending tasks that replace the remaining ones."""
        return [t.task() for t in self.tasks or []]


def repo_path(path: str) -> bool:
    """Whether `path` is a plain relative path inside a repository."""
    if not path.strip() or len(path) > MAX_PATH:
        return False
    parts = PurePosixPath(path).parts
    return not PurePosixPath(path).is_absolute() and ".." not in parts and ".git" not in parts


class Fact(BaseModel):
    """A fact the model submitted: one sentence and the repository files it names."""

    model_config = _ANSWER

    text: str = Field(max_length=MAX_FACT_TEXT)
    files: list[str] = Field(max_length=MAX_FACT_FILES)

    @field_validator("text")
    @classmethod
    def _one_line(cls, v: str) -> str:
        text = " ".join(v.split())
        if not text:
            raise ValueError("a fact needs a non-empty text")
        return text

    @field_validator("files")
    @classmethod
    def _repository_files(cls, v: list[str]) -> list[str]:
        # A path outside the repository is dropped, not refused: the fact itself still holds.
        return [f for f in v if repo_path(f)]


class Facts(BaseModel):
    """The arguments of `submit_facts`: durable facts about the repository, maybe none."""

    model_config = _ANSWER

    facts: list[Fact] = Field(max_length=MAX_FACTS)


class ModelVerdict(BaseModel):
    """The arguments of `submit_verdict`: a model's pass or fail on a task, and why."""

    model_config = _ANSWER

    verdict: Literal["pass", "fail"]
    reason: str = Field(default="", max_length=MAX_VERDICT_REASON)


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


TIMED_OUT = "timed out after"  # in a Verdict's reason: the check ran until its timeout


class Verdict(BaseModel):
    """The harness's judgement of one attempt: passed or not, why, and what it saw."""

    passed: bool
    reason: str
    exit_code: int | None = None
    command: str | None = None
    output_tail: str = ""
    judge: Literal["command", "model", "none", "hook"] = "command"
    # the task's own command could not judge (refused, or its program gone) and the user's
    # --accept commands did: what is run again or read for this verdict is theirs
    by_accept: bool = False


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
    tools_used: list[str] = Field(default_factory=list)  # the distinct tools the run called
    topic: str = ""  # the repository's identity (see protocols.LongTermStore)
    summary: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    started_at: str = ""
    ended_at: str = ""
