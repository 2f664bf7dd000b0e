"""What one run shares across its tasks and attempts: the model, tools, memory, state and budgets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_cli.agent.ask.window import Window
from agent_cli.agent.attempt.freshness import FileViews
from agent_cli.core import events
from agent_cli.core.errors import BudgetExhausted

if TYPE_CHECKING:
    from agent_cli.agent.attempt.toolbox import Toolbox
    from agent_cli.agent.learn.instructions import Instructions
    from agent_cli.agent.run.journal import StepRecord
    from agent_cli.agent.run.roles import Role, RoleModels
    from agent_cli.agent.run.state import AgentState
    from agent_cli.core.protocols import ChatModel, Hooks, Workspace
    from agent_cli.memory.working.memory import WorkingMemory

Log = Callable[[dict[str, Any]], None]


@dataclass
class Limits:
    """The run's budgets and caps."""

    max_steps: int
    task_max_steps: int
    budget_usd: float
    tool_output_max_tokens: int
    context_window: int = 128_000  # the model's, in tokens (a setting, or what the server says)
    reserved_output_tokens: int = 4096

    def window(self) -> Window:
        """What a request may take: the context window less the answer's reserve."""
        return Window(self.context_window, self.reserved_output_tokens)


def _no_journal(record: StepRecord) -> None:
    """Where step records go when the run keeps no journal."""


@dataclass
class Runtime:
    """Everything one run shares across tasks and attempts; its own fields change by its methods."""

    model: ChatModel
    toolbox: Toolbox
    memory: WorkingMemory
    state: AgentState
    limits: Limits
    emit: events.Emit
    log: Log
    save: Callable[[], None]  # the whole state, at a task's boundaries
    journal: Callable[[StepRecord], None] = _no_journal  # one record per tool call
    recalled: str = ""
    instructions: Instructions | None = None
    spent_before: float = 0.0  # money spent by earlier sessions of a resumed run
    views: FileViews = field(default_factory=FileViews)  # items showing files (freshness.py)
    hooks: Hooks | None = None  # the user's hooks (hooked.py); None: none configured
    run_id: str = ""
    models: RoleModels | None = None  # each role's model (None: `model` plays every role)
    workspace: Workspace | None = None  # where an attempt's commits are taken back (executor)
    _fixes: str = field(default="", init=False)
    _unpin_asked: frozenset[str] = field(default=frozenset(), init=False)
    _malformed: int = field(default=0, init=False)

    def spent(self) -> float:
        """Dollars spent by the whole run so far."""
        usage = self.models.usage() if self.models else self.model.usage
        return self.spent_before + usage.cost_usd

    def role(self, name: Role) -> ChatModel:
        """The model `name` talks to: planning, the facts and the summary are the planner's."""
        return self.models.of(name) if self.models else self.model

    @property
    def fixes(self) -> str:
        """Fixes of earlier runs for the failure the current task just had."""
        return self._fixes

    def set_fixes(self, text: str) -> None:
        """Show `text` (earlier runs' fixes) to the next attempt; "" shows none."""
        self._fixes = text

    @property
    def unpin_asked(self) -> frozenset[str]:
        """The pinned notes the previous request asked the model to unpin."""
        return self._unpin_asked

    def ask_unpin(self, item_ids: list[str]) -> None:
        """The request being built asks the model to unpin `item_ids`."""
        self._unpin_asked = frozenset(item_ids)

    @property
    def malformed(self) -> int:
        """Malformed replies in a row."""
        return self._malformed

    def count_reply(self, malformed: bool) -> int:
        """One more reply: the malformed ones in a row so far (a good one resets the count)."""
        self._malformed = self._malformed + 1 if malformed else 0
        return self._malformed


def check_budgets(rt: Runtime, money: bool = True) -> None:
    """Raise BudgetExhausted when the run's step or (unless not `money`) money budget is used
    up. Money is spent by model calls only: the calls of a reply already paid for are checked
    against the step budget alone, so the reply that crosses the money budget still runs (its
    finish verified and committed), and the next model call is the one refused."""
    steps, lim = rt.state.step, rt.limits
    if steps >= lim.max_steps:
        raise BudgetExhausted(
            f"the step budget ran out: {steps} of {lim.max_steps} tool calls used",
            "raise --max-steps and continue with `agent run --resume`",
            budget="max_steps",
            used=steps,
            limit=lim.max_steps,
        )
    spent = rt.spent()
    if money and spent >= lim.budget_usd:
        raise BudgetExhausted(
            f"the money budget ran out: ${spent:.4f} of ${lim.budget_usd:.2f} used",
            "raise --budget-usd and continue with `agent run --resume`",
            budget="budget_usd",
            used=spent,
            limit=lim.budget_usd,
        )
