"""What a run emits, in order; the console renders them and `--json` prints one per line.

Every event is a pydantic model with a literal `event` name, so `model_dump()` is the
JSON line. The loop never prints: it calls `emit(event)` and the console decides. Its text is
UTF-8 text whatever git gave (`EventModel`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, Required, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from agent_cli.core.models import Tally, Task, TaskStatus
from agent_cli.core.text import readable_all


class PlannedTask(TypedDict, total=False):
    """A task of a plan as events carry it: every field of `models.Task`."""

    goal: Required[str]
    acceptance: str
    acceptance_cmd: str | None
    status: TaskStatus
    attempts: int
    earlier_attempts: int
    last_reason: str
    summary: str
    commit: str | None
    exit_code: int | None
    max_attempts: int
    hints: list[str]
    left_files: list[str]
    baseline: Literal["pass", "fail"] | None
    baseline_counts: dict[str, Tally]
    proof: Literal["red-green", "regression-only"] | None
    check_changed: list[str]
    restores: int | None


class TaskReport(TypedDict, total=False):
    """A task as the end of a run reports it; `status` is never "running": "unfinished"."""

    goal: Required[str]
    attempts: int
    status: Required[str]
    acceptance_cmd: str | None
    exit_code: int | None
    commit: str | None
    proof: str | None
    check_changed: list[str]
    restores: int | None  # 0-based: the earlier task whose check this added task restored


def planned(tasks: Iterable[Task]) -> list[PlannedTask]:
    """The tasks as a plan event carries them."""
    return [
        PlannedTask(
            goal=t.goal,
            acceptance=t.acceptance,
            acceptance_cmd=t.acceptance_cmd,
            status=t.status,
            attempts=t.attempts,
            earlier_attempts=t.earlier_attempts,
            last_reason=t.last_reason,
            summary=t.summary,
            commit=t.commit,
            exit_code=t.exit_code,
            max_attempts=t.max_attempts,
            hints=list(t.hints),
            left_files=list(t.left_files),
            baseline=t.baseline,
            baseline_counts=dict(t.baseline_counts),
            proof=t.proof,
            check_changed=list(t.check_changed),
            restores=t.restores,
        )
        for t in tasks
    ]


def reported(tasks: Iterable[Task], accept_cmds: list[str]) -> list[TaskReport]:
    """The tasks as the end of a run reports them (a task cut short by the end: "unfinished")."""
    return [
        TaskReport(
            goal=t.goal,
            attempts=t.attempts,
            status="unfinished" if t.status == "running" else t.status,
            acceptance_cmd=t.acceptance_cmd or "; ".join(accept_cmds) or None,
            exit_code=t.exit_code,
            commit=t.commit,
            proof=t.proof,
            check_changed=list(t.check_changed),
            restores=t.restores,
        )
        for t in tasks
    ]


class EventModel(BaseModel):
    """What every event is: a model whose text, given or assigned, is made `readable` first.
    A file name git gives that is not UTF-8 (in a diff stat, a list of changed files, a
    message naming them) reaches git's text as lone surrogates, which no terminal, `--json`
    line or log file can be written with: an event shows them as `\\xNN` instead."""

    model_config = ConfigDict(validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _readable(cls, value: Any) -> Any:
        return readable_all(value)


class RunStarted(EventModel):
    event: Literal["run_started"] = "run_started"
    run_id: str
    goal: str
    repo: str
    branch: str
    resumed: bool = False
    base: str = ""  # the branch the run started from, which its work is meant to go back to


class Planning(EventModel):
    """The model is being asked for a plan (a terminal shows a spinner until it comes)."""

    event: Literal["planning"] = "planning"
    goal: str


class PlanMade(EventModel):
    event: Literal["plan"] = "plan"
    goal: str
    tasks: list[PlannedTask]
    success_criteria: str = ""
    accept_cmds: list[str] = Field(default_factory=list)


class TaskStarted(EventModel):
    event: Literal["task_started"] = "task_started"
    index: int  # 0-based position in the plan
    goal: str
    attempt: int  # 1 or 2


class ToolCalled(EventModel):
    event: Literal["tool_call"] = "tool_call"
    index: int
    step: int  # tool calls so far in the run, this one included
    name: str
    arguments: str  # raw JSON text as the model sent it, secrets redacted


class ToolRan(EventModel):
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


class Verified(EventModel):
    event: Literal["verify"] = "verify"
    index: int  # -1 for the run's final gate
    attempt: int
    passed: bool
    judge: str  # "command", "model" or "none"
    command: str | None = None
    exit_code: int | None = None
    reason: str = ""


class TaskDone(EventModel):
    event: Literal["task_done"] = "task_done"
    index: int
    status: str  # verified or rejected
    attempts: int
    commit: str | None = None
    summary: str = ""  # the model's own words, labelled as such when shown
    # "red-green": its check failed before the task and passes after; "regression-only":
    # it passed before too; None: not judged by a command.
    proof: str | None = None
    check_changed: list[str] = Field(default_factory=list)  # judge/touched.py
    diff_stat: str = ""  # `git diff --stat` of the task's commit


class Escalated(EventModel):
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
    asks: bool = False  # the human is asked at the terminal right after this event


class PlanRevised(EventModel):
    """The tasks from `start` on were replaced (verified and skipped tasks never are)."""

    event: Literal["plan_revised"] = "plan_revised"
    start: int  # 0-based index of the first replaced task
    reason: str
    old: list[PlannedTask]  # the replaced tasks
    new: list[PlannedTask]  # the tasks that replace them
    # "harness" (after a verified task), "human", or "recheck" (an earlier check fails at the end)
    asked_by: str = "harness"


class HintGiven(EventModel):
    event: Literal["hint"] = "hint"
    index: int
    text: str  # the human's words, as given
    attempt: int  # the attempt that will carry it


class TaskSkipped(EventModel):
    event: Literal["task_skipped"] = "task_skipped"
    index: int
    goal: str
    left_files: list[str] = Field(default_factory=list)  # changes left uncommitted


class LoopDetected(EventModel):
    event: Literal["loop_detected"] = "loop_detected"
    index: int
    name: str  # the repeated tool
    repeats: int  # identical calls in a row, this one included
    stopped: bool = False  # True when the attempt was ended for it


class FinalSummary(EventModel):
    """The model's closing words for the human (not checked by the harness)."""

    event: Literal["final_summary"] = "final_summary"
    text: str


class BudgetExhausted(EventModel):
    event: Literal["budget_exhausted"] = "budget_exhausted"
    budget: Literal["max_steps", "budget_usd"]
    used: float  # tool calls made, or dollars spent
    limit: float  # the budget: tool calls, or dollars


class RunDone(EventModel):
    event: Literal["run_done"] = "run_done"
    run_id: str
    status: str  # verified, escalated, skipped, budget_exhausted, interrupted, failed, planned
    exit_code: int
    tasks: list[TaskReport]
    steps: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached_tokens: int = 0  # the part of prompt_tokens read from the server's prompt cache
    branch: str = ""
    base: str = ""  # the branch the run started from
    message: str = ""
    # per role ("planner", "executor", "verifier"): its model, tokens, calls and cost
    usage_by_role: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Notice(EventModel):
    """A line of information: a retry, a resumed run, a saved state."""

    event: Literal["notice"] = "notice"
    text: str


class HookRan(EventModel):
    """One of the user's hooks ran: at which point, around what, and how it ended."""

    event: Literal["hook"] = "hook"
    hook: str  # pre_tool, post_tool, task_verified or run_end
    command: str  # its argv as one line
    outcome: Literal["ok", "blocked", "failed", "timed_out"]
    blocks: bool = False  # the tool did not run, or the task's verification failed
    exit_code: int | None = None  # None: killed at its timeout, stopped by Ctrl-C, or not run
    index: int = -1  # the task (0-based); -1 at the end of the run
    tool: str = ""
    message: str = ""  # its stderr (the reason when it blocks), bounded and redacted
    duration_s: float = 0.0


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
    HookRan,
]
Emit = Callable[[Event], None]
