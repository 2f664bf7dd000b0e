"""Chat messages as the OpenAI chat protocol has them, typed for every layer that builds them."""

from __future__ import annotations

from typing import Literal, TypedDict


class FunctionCall(TypedDict):
    """The function a tool call names, with its arguments as the raw JSON text sent."""

    name: str
    arguments: str


class ToolCallPart(TypedDict):
    """One tool call inside an assistant message."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str


class AssistantMessage(TypedDict):
    """An assistant turn: text, or tool calls with no text."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ToolCallPart]


class ToolMessage(TypedDict):
    """The result of one tool call, answering the call with the same id."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage
