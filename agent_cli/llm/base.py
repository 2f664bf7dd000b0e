"""Tool schemas and prices for any model; the `ChatModel` seam itself is in `agent_cli.protocols`."""

from __future__ import annotations

from typing import Any

from agent_cli.protocols import ChatModel, Message

__all__ = ["ChatModel", "Message", "cost", "force", "function_tool"]


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
