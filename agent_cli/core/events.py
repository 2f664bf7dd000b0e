"""What a run emits, in order; the console renders them and `--json` prints one per line.

Every event is a pydantic model with a literal `event` name, so `model_dump()` is the
JSON line. The loop never prints: it calls `emit(event)` and the console decides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Union

from pydantic import BaseModel, Field


class RunStarted(BaseModel):
    event: Literal["run_started"] = "run_started"
    run_id: str
    goal: str
    repo: str
    branch: str
    resumed: bool = False
    base: str = ""  # the branch the run started from, which its work is meant to go back to


class Planning(BaseModel):
    """The model is being asked for a plan (a terminal shows a spinner until it comes)."""

    event: Literal["planning"] = "planning"
    goal: str


class PlanMade(BaseModel):
    event: Literal["plan"] = "plan"
    goal: str
    tasks: list[dict]  # Task.model_dump(): goal, acceptance, acceptance_cmd, status, attempts
    success_criteria: str = ""
    accept_cmds: list[str] = Field(default_factory=list)


class TaskStarted(BaseModel):
    event: Literal["task_started"] = "task_started"
    index: int  # 0-based position in the plan
    goal: str
    attempt: int  # 1 or 2


class ToolCalled(BaseModel):
    event: Literal["tool_call"] = "tool_call"
    index: int
    step: int  # tool calls so far in the run, this one included
    name: str
    arguments: str  # raw JSON text as the model sent it, secrets redacted


class ToolRan(BaseModel):
    event: Literal["tool_result"] = "tool_result"
    index: int
    step: int
    name: str
    ok: bool
    summary: str  # one line: what happened
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    diff: str = ""  # the unified diff of an edit (write_file, edit_file); empty otherwise


class Verified(BaseModel):
    event: Literal["verify"] = "verify"
    index: int  # -1 for the run's final gate
    attempt: int
    passed: bool
    judge: str  # "command", "model" or "none"
    command: str | None = None
    exit_code: int | None = None
    reason: str = ""


class TaskDone(BaseModel):
    event: Literal["task_done"] = "task_done"
    index: int
    status: str  # verified or rejected
    attempts: int
    commit: str | None = None
    summary: str = ""  # the model's own words, labelled as such when shown
    # "red-green": its check failed before the task and passes after; "regression-only":
    # it passed before too; None: not judged by a command.
    proof: str | None = None
    diff_stat: str = ""  # `git diff --stat` of the task's commit


class Escalated(BaseModel):
    event: Literal["escalated"] = "escalated"
    index: int
    goal: str
    summary: str  # the last attempt's summary, in the model's words
    reason: str  # why it did not pass: the verifier's reason with the output tail
    next_steps: str
    attempts: int = 0  # attempts made at the task
    hints: list[str] = Field(default_factory=list)  # the human's hints so far
    diff_stat: str = ""  # the uncommitted changes the last attempt left, per file
    hints_left: int = 0  # how many more hints the task can take


class PlanRevised(BaseModel):
    """The tasks from `start` on were replaced (verified and skipped tasks never are)."""

    event: Literal["plan_revised"] = "plan_revised"
    start: int  # 0-based index of the first replaced task
    reason: str
    old: list[dict]  # the replaced tasks
    new: list[dict]  # the tasks that replace them
    asked_by: str = "harness"  # "harness" (after a verified task) or "human"


class HintGiven(BaseModel):
    event: Literal["hint"] = "hint"
    index: int
    text: str  # the human's words, as given
    attempt: int  # the attempt that will carry it


class TaskSkipped(BaseModel):
    event: Literal["task_skipped"] = "task_skipped"
    index: int
    goal: str
    left_files: list[str] = Field(default_factory=list)  # changes left uncommitted


class LoopDetected(BaseModel):
    event: Literal["loop_detected"] = "loop_detected"
    index: int
    name: str  # the repeated tool
    repeats: int  # identical calls in a row, this one included
    stopped: bool = False  # True when the attempt was ended for it


class FinalSummary(BaseModel):
    """The model's closing words for the human (not checked by the harness)."""

    event: Literal["final_summary"] = "final_summary"
    text: str


class BudgetExhausted(BaseModel):
    event: Literal["budget_exhausted"] = "budget_exhausted"
    budget: Literal["max_steps", "budget_usd"]
    used: float  # tool calls made, or dollars spent
    limit: float  # the budget: tool calls, or dollars


class RunDone(BaseModel):
    event: Literal["run_done"] = "run_done"
    run_id: str
    status: str  # verified, escalated, skipped, budget_exhausted, interrupted, failed, planned
    exit_code: int
    tasks: list[dict]  # goal, status (never "running": "unfinished"), attempts, acceptance_cmd...
    steps: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached_tokens: int = 0  # the part of prompt_tokens read from the server's prompt cache
    branch: str = ""
    base: str = ""  # the branch the run started from
    message: str = ""


class Notice(BaseModel):
    """A line of information: a retry, a resumed run, a saved state."""

    event: Literal["notice"] = "notice"
    text: str


Event = Union[  # noqa: UP007 (a union of 20 classes reads better as a list)
    RunStarted,
    Planning,
    PlanMade,
    TaskStarted,
    ToolCalled,
    ToolRan,
    Verified,
    TaskDone,
    Escalated,
    BudgetExhausted,
    RunDone,
    Notice,
    PlanRevised,
    HintGiven,
    TaskSkipped,
    LoopDetected,
    FinalSummary,
]
Emit = Callable[[Event], None]
