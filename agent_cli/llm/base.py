"""The seam between the agent and any model: a small `ChatModel` protocol and tool schemas."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agent_cli.models import ChatReply, Usage

Message = dict[str, Any]


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a chat with function tools and keeps a running usage total."""

    name: str
    usage: Usage

    def chat(self, messages: list[Message], tools: list[dict] | None = None,
             tool_choice: str | dict | None = None) -> ChatReply:
        """One assistant turn for `messages`, offering `tools`."""
        ...


def function_tool(name: str, description: str, properties: dict[str, Any],
                  required: list[str] | None = None) -> dict:
    """An OpenAI function-tool schema."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties,
                       "required": required if required is not None else list(properties)},
    }}


def force(name: str) -> dict:
    """A tool_choice that forces the model to call tool `name`."""
    return {"type": "function", "function": {"name": name}}


def cost(prompt_tokens: int, completion_tokens: int, price_in: float, price_out: float) -> float:
    """Dollars for a call, from prices per million tokens."""
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000
