"""Shaping a request before it is sent: echoed tool calls, the forced-tool form, max_tokens."""

from __future__ import annotations

import json
from typing import Any

from agent_cli.core import fences, strictjson

CHARS_PER_TOKEN = 3  # conservative for code and for local tokenizers
MIN_REPLY_TOKENS = 256


def _valid_json(text: Any) -> bool:
    """Whether a server can read `text` as a call's arguments: a JSON object (strict JSON: no
    NaN or Infinity, bounded nesting). A chat template reads the arguments' items, and a
    gateway to another API passes them on as the call's input object, so a list, a string or
    null is refused like broken JSON."""
    if not isinstance(text, str):
        return False
    try:
        return isinstance(strictjson.loads(text), dict)
    except ValueError:
        return False


def sanitize(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every echoed tool call's arguments a valid JSON object.

    Servers that re-parse the conversation (llama.cpp answers 500 "Failed to parse tool call
    arguments as JSON") refuse a broken call sent back to them, so its arguments become `{}`
    and the raw text moves into that call's tool result, where the model still sees it. No
    arguments at all (an empty text: a call of a tool that needs none) become `{}` without a
    word, being no mistake.
    """
    broken: dict[str, str] = {}
    out = []
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls and any(
            not _valid_json((c.get("function") or {}).get("arguments")) for c in calls
        ):
            message = {**message, "tool_calls": [_fixed(c, broken) for c in calls]}
        elif message.get("role") == "tool" and message.get("tool_call_id") in broken:
            raw = broken[message["tool_call_id"]]
            message = {
                **message,
                "content": f"{message.get('content') or ''}\n(the arguments "
                f"you sent, which are not a valid JSON object: {fences.escape(raw[:2000])})",
            }
        out.append(message)
    return out


def _fixed(call: dict[str, Any], broken: dict[str, str]) -> dict[str, Any]:
    fn = call.get("function") or {}
    arguments = fn.get("arguments")
    if _valid_json(arguments):
        return call
    if arguments is not None and not (isinstance(arguments, str) and not arguments.strip()):
        broken[str(call.get("id"))] = str(arguments)  # none at all is no mistake to point out
    return {**call, "function": {**fn, "arguments": "{}"}}


def forced_name(tools: list[dict[str, Any]] | None, tool_choice: Any) -> str | None:
    """The tool a request forces when it offers exactly that one tool, else None."""
    if not tools or len(tools) != 1:
        return None
    found = tools[0].get("function", {}).get("name")
    name = found if isinstance(found, str) else None
    if tool_choice == "required":
        return name
    if isinstance(tool_choice, dict) and (tool_choice.get("function") or {}).get("name") == name:
        return name
    return None


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """A cheap upper estimate of a request's prompt tokens."""
    return len(json.dumps(messages, ensure_ascii=False)) // CHARS_PER_TOKEN + (
        len(json.dumps(tools)) // CHARS_PER_TOKEN if tools else 0
    )


def reply_budget(
    window: int, cap: int, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> int:
    """max_tokens for a request: within `cap` and within what the window leaves free."""
    room = window - estimate_tokens(messages, tools) - 64
    return max(MIN_REPLY_TOKENS, min(cap, room))
