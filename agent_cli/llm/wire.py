"""Reading what a Chat Completions server sends: strict JSON, the completion body, usage.

The parser is strict where Python's `json` is lenient: `NaN`, `Infinity`, numbers that
overflow to infinity, integers of hundreds of digits and nesting deeper than `MAX_DEPTH`
are refused, so such a reply is a `MalformedReply` and never an internal error later on.
"""

from __future__ import annotations

import json
import math
from typing import Any

from agent_cli.errors import MalformedReply
from agent_cli.models import ChatReply, ToolCall, Usage

MAX_DEPTH = 64
MAX_INT_DIGITS = 300
NOT_A_COMPLETION = "check that --base-url points at a Chat Completions API"


class StrictJSONError(ValueError):
    """Valid JSON syntax that we refuse: non-finite numbers, huge integers, deep nesting."""


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"the non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"the number {text[:20]} overflows")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise StrictJSONError(f"an integer of {len(text)} digits")
    return int(text)


def _depth_over(data: Any, limit: int) -> bool:
    """Whether containers nest deeper than `limit` (iterative: no recursion to exhaust)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return False


def load_json(text: str | bytes) -> Any:
    """Parse JSON strictly; json.JSONDecodeError for bad syntax, StrictJSONError for the rest."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                          parse_int=_bounded_int)
    except RecursionError:
        raise StrictJSONError("nesting that exhausts recursion") from None
    if _depth_over(data, MAX_DEPTH):
        raise StrictJSONError(f"nesting deeper than {MAX_DEPTH} levels")
    return data


def load_body(raw: str | bytes) -> Any:
    """A response body as JSON, or MalformedReply saying why it is not usable."""
    try:
        return load_json(raw)
    except StrictJSONError as e:
        raise MalformedReply(f"the endpoint's reply holds {e}", NOT_A_COMPLETION) from None
    except (ValueError, UnicodeDecodeError):
        raise MalformedReply("the endpoint's reply is not JSON", NOT_A_COMPLETION) from None


def _count(value: Any) -> int:
    """A token count from a usage field: a non-negative int (floats are truncated)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, type(None))):
        raise TypeError(f"a token count must be a number, not {type(value).__name__}")
    return max(0, int(value or 0))


def read_usage(body: dict) -> Usage:
    """Prompt, completion and cached tokens; cached from `prompt_tokens_details` or llama.cpp's
    `timings.cache_n`."""
    usage = body.get("usage") or {}
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details") or {}
    cached = _count(details.get("cached_tokens"))
    timings = body.get("timings") or {}
    if not cached and isinstance(timings, dict):
        cached = _count(timings.get("cache_n"))
        # llama.cpp without `usage` still reports what it read (prompt_n) and reused (cache_n).
        prompt = prompt or cached + _count(timings.get("prompt_n"))
    return Usage(prompt_tokens=prompt, completion_tokens=_count(usage.get("completion_tokens")),
                 cached_tokens=min(cached, prompt), calls=1)


def _arguments(raw: Any) -> str:
    """Tool-call arguments as JSON text; MalformedReply when they hold what we refuse."""
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        load_json(text)
    except StrictJSONError as e:
        raise MalformedReply(f"a tool call's arguments hold {e}",
                             "the model sent arguments no tool can use") from None
    except ValueError:
        pass  # plain bad syntax (often a cut-off reply): the tool says so to the model
    return text


def parse_completion(body: Any) -> ChatReply:
    """A chat-completion JSON body as a ChatReply; MalformedReply if it is not one."""
    if not isinstance(body, dict):
        raise MalformedReply("the endpoint's reply is not a JSON object")
    try:
        return _parse_fields(body)
    except (AttributeError, TypeError, ValueError, OverflowError) as e:  # a field of the wrong shape
        raise MalformedReply(f"the endpoint's reply is not a chat completion ({e})",
                             NOT_A_COMPLETION) from None


def _parse_fields(body: dict) -> ChatReply:
    """The ChatReply in a body; AttributeError/TypeError/ValueError when a field has the wrong shape."""
    reply = ChatReply(usage=read_usage(body))
    choices = body.get("choices") or []
    if not choices:
        reply.finish_reason = "no_choices"
        return reply
    message = choices[0].get("message") or {}
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError("the message content is not text")
    reply.content = content
    reason = choices[0].get("finish_reason")
    reply.finish_reason = None if reason is None else str(reason)
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        reply.tool_calls.append(ToolCall(
            id=str(call.get("id") or f"call_{i}"), name=str(fn.get("name") or ""),
            arguments=_arguments(fn.get("arguments", "{}"))))
    return reply
