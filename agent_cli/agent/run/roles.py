"""The model each role of a run talks to (planner, executor, verifier), and each role's usage.

Planning, re-planning, the facts and the closing summary are the planner's; a task's steps are
the executor's; the model verdict on a task without an acceptance command is the verifier's.
Roles with the same endpoint and model share one client (what it learned about its server
holds for all of them), so each role sees it through its own `Metered` view, which counts the
usage of that role's calls alone (`llm/metered.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_cli.core.models import Usage
from agent_cli.core.protocols import ChatModel
from agent_cli.llm.metered import Metered

Role = Literal["planner", "executor", "verifier"]
ROLES: tuple[Role, ...] = ("planner", "executor", "verifier")


class RoleUsage(BaseModel):
    """Tokens, calls and money of one role over a run, with the model it talked to."""

    model_config = ConfigDict(allow_inf_nan=False)  # read back from state.json, maybe edited

    model: str = ""
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    cached_tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)
    calls: int = Field(0, ge=0)

    def plus(self, usage: Usage, model: str) -> RoleUsage:
        """This usage with `usage` (of `model`, the role's model now) added."""
        return RoleUsage(
            model=model or self.model,
            prompt_tokens=self.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self.completion_tokens + usage.completion_tokens,
            cached_tokens=self.cached_tokens + usage.cached_tokens,
            cost_usd=self.cost_usd + usage.cost_usd,
            calls=self.calls + usage.calls,
        )


@dataclass(frozen=True)
class RoleModels:
    """The model of each role; the same object for roles that share an endpoint and model."""

    planner: ChatModel
    executor: ChatModel
    verifier: ChatModel

    @classmethod
    def one(cls, model: ChatModel) -> RoleModels:
        """Every role on `model`."""
        return cls(model, model, model)

    def of(self, role: Role) -> ChatModel:
        """The model `role` talks to."""
        model: ChatModel = getattr(self, role)
        return model

    def distinct(self) -> list[ChatModel]:
        """Each model once, in the order of the roles."""
        seen: dict[int, ChatModel] = {}
        for role in ROLES:
            seen.setdefault(id(self.of(role)), self.of(role))
        return list(seen.values())

    def metered(self) -> RoleModels:
        """A view per role that counts that role's usage (shared models stay shared below)."""
        return RoleModels(*(Metered(self.of(role)) for role in ROLES))

    def usage(self) -> Usage:
        """The usage of every model once."""
        total = Usage()
        for model in self.distinct():
            total.add(model.usage)
        return total

    def by_role(self, before: dict[str, RoleUsage] | None = None) -> dict[str, RoleUsage]:
        """Each role's usage, added to what earlier sessions of the run counted (`before`)."""
        before = before or {}
        return {
            role: before.get(role, RoleUsage()).plus(self.of(role).usage, self.of(role).name)
            for role in ROLES
        }
