"""A view of a chat model that counts the usage of the calls made through it alone.

Several views may share one model (its client, and what it learned about its server), each
counting its own part of the model's usage.
"""

from __future__ import annotations

from typing import Any

from agent_cli.core.models import ChatReply, Usage
from agent_cli.llm.base import ChatModel, Message


def _since(now: Usage, before: Usage) -> Usage:
    return Usage(
        prompt_tokens=now.prompt_tokens - before.prompt_tokens,
        completion_tokens=now.completion_tokens - before.completion_tokens,
        cached_tokens=now.cached_tokens - before.cached_tokens,
        cost_usd=now.cost_usd - before.cost_usd,
        calls=now.calls - before.calls,
    )


class Metered:
    """A view of a model: its calls go to the model, their usage is counted here too."""

    def __init__(self, model: ChatModel) -> None:
        self.inner = model
        self.name = model.name
        self._usage = Usage()

    @property
    def usage(self) -> Usage:
        """Tokens, calls and cost of the turns made through this view so far."""
        return self._usage

    @property
    def context_window(self) -> int | None:
        """The model's context window, when it knows one."""
        return self.inner.context_window

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> ChatReply:
        """The model's turn; what the model counted for it (a re-asked form too) counts here."""
        before = self.inner.usage.model_copy()
        try:
            return self.inner.chat(messages, tools, tool_choice)
        finally:
            self._usage.add(_since(self.inner.usage, before))
