"""Tool schemas and prices for any model; the `ChatModel` seam itself is in `agent_cli.core.protocols`."""

from __future__ import annotations

from typing import Any

from agent_cli.core.models import Usage
from agent_cli.core.protocols import ChatModel, Message

__all__ = ["ChatModel", "Message", "cost", "force", "function_tool"]


def function_tool(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """An OpenAI function-tool schema."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required if required is not None else list(properties),
            },
        },
    }


def force(name: str) -> dict[str, Any]:
    """A tool_choice that forces the model to call tool `name`."""
    return {"type": "function", "function": {"name": name}}


def cost(
    prompt_tokens: int,
    completion_tokens: int,
    price_in: float,
    price_out: float,
    cached_tokens: int = 0,
    price_cached: float | None = None,
) -> float:
    """Dollars for a call, from prices per million tokens; cached input at `price_cached`
    (half the input price when unset)."""
    cached = min(cached_tokens, prompt_tokens)
    price_cached = price_in / 2 if price_cached is None else price_cached
    return (
        (prompt_tokens - cached) * price_in + cached * price_cached + completion_tokens * price_out
    ) / 1_000_000


def reply_cost(usage: Usage, prices: tuple[float, float, float | None]) -> float:
    """Dollars for one reply's usage at (input, output, cached input) prices."""
    return cost(
        usage.prompt_tokens,
        usage.completion_tokens,
        prices[0],
        prices[1],
        usage.cached_tokens,
        prices[2],
    )
