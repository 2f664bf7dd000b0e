"""What the fake server answers: a scripted step as a whole completion or as SSE chunks, and
the checks by which it behaves like a particular real server (llama.cpp, vLLM, Ollama)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

Step = dict[str, Any]


@dataclass
class Behaviour:
    """How the fake server differs from a plain OpenAI endpoint.

    stream: "sse" streams when asked; "whole" ignores `stream` and answers whole (a server
        that does not stream); "refuse" answers 400 to a streamed request; "no_usage" streams
        but answers 400 to `stream_options`.
    object_choice / required_choice: "accept", "ignore" (answer as if `auto`: text, no call,
        no script step used; llama.cpp with the object form) or "refuse" (400).
    schema_choice: how a json_schema `response_format` is met: "accept" (the script step's
        call comes back as its arguments, a JSON object in `content`, as structured output
        does), "ignore" (text, no script step used) or "refuse" (400).
    none_choice: "accept" or "refuse" (400) for `tool_choice: "none"`.
    n_ctx: serve llama.cpp's `GET /props` and answer a longer request with its 400 overflow.
    max_model_len: list it in `/v1/models` like vLLM, and answer vLLM's 400 overflow.
    ollama_ctx: answer Ollama's `POST /api/show` with this `num_ctx`.
    strict_echo: answer 500 like llama.cpp when an echoed tool call's arguments are not a JSON
        object.
    slots: serve llama.cpp's `GET /slots` (busy while a reply is being produced).
    hide_window: enforce n_ctx / max_model_len without saying it (a proxy in front).
    any_model: answer a request for any model name, not only the listed ones (llama.cpp).
    loading: answer every request, whatever its path, with llama.cpp's 503 "Loading model", as
        it does while it loads its model (a test sets it to False once the model is loaded).
    """

    stream: str = "sse"
    object_choice: str = "accept"
    required_choice: str = "accept"
    schema_choice: str = "accept"
    none_choice: str = "accept"
    n_ctx: int | None = None
    max_model_len: int | None = None
    ollama_ctx: int | None = None
    strict_echo: bool = False
    slots: bool = True
    hide_window: bool = False
    any_model: bool = False
    loading: bool = False


def _error(status: int, message: str, **extra: Any) -> Step:
    return {
        "status": status,
        "body": json.dumps({"error": {"code": status, "message": message, **extra}}),
    }


def prompt_tokens(body: dict[str, Any]) -> int:
    """The fake's token count of a request: four characters a token."""
    return (
        len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("tools") or []))
    ) // 4


def _echo_is_broken(body: dict[str, Any]) -> bool:
    for message in body.get("messages", []):
        for call in message.get("tool_calls") or []:
            try:
                arguments = json.loads((call.get("function") or {}).get("arguments", ""))
            except (ValueError, TypeError):
                return True
            if not isinstance(arguments, dict):  # a template reads the arguments' items
                return True
    return False


CHOICES = ("none", "auto", "required")  # the strings `tool_choice` may be


def _bad_choice(choice: Any) -> bool:
    """Whether `tool_choice` is no value the protocol allows: one of CHOICES, or
    {"type": "function", "function": {"name": ...}} (OpenAI and llama.cpp answer 400)."""
    if choice is None or choice in CHOICES:
        return False
    if isinstance(choice, dict):
        function = choice.get("function")
        return not (
            choice.get("type") == "function"
            and isinstance(function, dict)
            and isinstance(function.get("name"), str)
        )
    return True


def _unanswered_calls(messages: list[dict[str, Any]]) -> str | None:
    """What OpenAI answers 400 about in a message list: tool calls some of whose ids no tool
    message right after them answers, or a tool message that answers no such call."""
    waiting: set[str] = set()
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            waiting.discard(call_id)
            continue
        if waiting:
            break
        waiting = {str(c.get("id")) for c in message.get("tool_calls") or []}
    if waiting:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(sorted(waiting))}"
        )
    return None


ROLES = ("system", "developer", "user", "assistant", "tool")


def _malformed(body: dict[str, Any]) -> str | None:
    """What OpenAI answers 400 about in a request's messages: one of no known role, one with
    no content (an assistant's may have tool calls instead), or tool calls out of order."""
    for at, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        if role not in ROLES:
            return f"Invalid value: {role!r}. Supported values are: {', '.join(ROLES)}."
        if message.get("content") is None and not (
            role == "assistant" and message.get("tool_calls")
        ):
            return f"Invalid value for 'messages[{at}].content': expected a string, got null."
    return _unanswered_calls(body.get("messages") or [])


def refusal(body: dict[str, Any], b: Behaviour) -> Step | None:
    """The error (or ignored forcing) a real server of this behaviour would answer, if any."""
    if "tools" in body and not body["tools"]:
        return _error(400, "[] is too short - 'tools'", param="tools")
    malformed = _malformed(body)
    if malformed:
        return _error(400, malformed, param="messages")
    choice = body.get("tool_choice")
    if _bad_choice(choice):
        return _error(
            400,
            f"Invalid value: {choice!r}. Supported values are: 'none', 'auto', and 'required'.",
            param="tool_choice",
        )
    if body.get("stream") and b.stream == "refuse":
        return _error(400, "'stream' is not supported by this server")
    if body.get("stream_options") and b.stream == "no_usage":
        return _error(400, "Unrecognized request argument supplied: stream_options")
    for form, rule in (("object", b.object_choice), ("required", b.required_choice)):
        is_form = isinstance(choice, dict) if form == "object" else choice == "required"
        if is_form and rule == "refuse":
            return _error(400, "Wrong type supplied for parameter 'tool_choice'")
        if is_form and rule == "ignore":
            return {"content": "Sure, here is what I would do next.", "ignored": True}
    if choice == "none" and b.none_choice == "refuse":
        return _error(400, "Invalid value for 'tool_choice': 'none' is not supported")
    if (body.get("response_format") or {}).get("type") == "json_schema":
        if b.schema_choice == "refuse":
            return _error(400, "response_format of type json_schema is not supported")
        if b.schema_choice == "ignore":
            return {"content": "Sure, here is what I would do next.", "ignored": True}
    if b.strict_echo and _echo_is_broken(body):
        return _error(500, "Failed to parse tool call arguments as JSON")
    return _overflow(body, b)


def _overflow(body: dict[str, Any], b: Behaviour) -> Step | None:
    n = prompt_tokens(body)
    if b.n_ctx and n > b.n_ctx:
        return _error(
            400,
            f"request ({n} tokens) exceeds the available context size "
            f"({b.n_ctx} tokens), try increasing it",
            type="exceed_context_size_error",
            n_prompt_tokens=n,
            n_ctx=b.n_ctx,
        )
    reply = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    if b.max_model_len and n + reply > b.max_model_len:
        return _error(
            400,
            f"This model's maximum context length is {b.max_model_len} tokens. "
            f"However, you requested {n + reply} tokens ({n} in the messages, "
            f"{reply} in the completion). Please reduce the length of the "
            "messages or completion.",
        )
    return None


def structured(step: Step, body: dict[str, Any]) -> Step:
    """A step answering a request for structured output: its (first) call's arguments (with
    its name, when the schema is any of several tools) as the content, and no tool call."""
    if (body.get("response_format") or {}).get("type") != "json_schema":
        return step
    calls = step.get("tool_calls") or (
        [{"name": step["tool"], "arguments": step.get("args", {})}] if "tool" in step else []
    )
    if not calls:
        return step
    args = calls[0].get("arguments", {})
    rest = {k: v for k, v in step.items() if k not in ("tool", "args", "tool_calls")}
    if "anyOf" in body["response_format"].get("json_schema", {}).get("schema", {}):
        text = args if isinstance(args, str) else json.dumps(args)  # a call of any one tool
        return {
            **rest,
            "content": f'{{"name": {json.dumps(calls[0]["name"])}, "arguments": {text}}}',
        }
    return {**rest, "content": args if isinstance(args, str) else json.dumps(args)}


def _tool_call(i: int, name: str, arguments: Any) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def _usage(step: Step) -> dict[str, Any]:
    usage = {"prompt_tokens": 100, "completion_tokens": 20, **step.get("usage", {})}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


def completion_body(step: Step, model: str, n: int) -> dict[str, Any]:
    """The JSON body of a chat completion for one script step."""
    body = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "usage": _usage(step),
        "choices": [],
    }
    if "timings" in step:
        body["timings"] = step["timings"]
    if step.get("no_choices"):
        return body
    calls = step.get("tool_calls") or (
        [{"name": step["tool"], "arguments": step.get("args", {})}] if "tool" in step else []
    )
    message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
    if calls:
        message["tool_calls"] = [
            _tool_call(n * 100 + i, c["name"], c.get("arguments", {})) for i, c in enumerate(calls)
        ]
    reason = step.get("finish_reason") or ("tool_calls" if calls else "stop")
    body["choices"] = [{"index": 0, "message": message, "finish_reason": reason}]
    return body


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_chunks(body: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A whole completion body as the chunks of an OpenAI-style stream (text in words,
    each tool call's arguments in three pieces)."""
    head = {k: body[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    chunks = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        chunks.append({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    if not body["choices"]:
        chunks.append({**head, "choices": []})
    else:
        message = body["choices"][0]["message"]
        chunk({"role": "assistant", "content": ""})
        for word in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
            chunk({"content": word})
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call["function"]
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in _pieces(fn["arguments"], 3):
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        chunk({}, body["choices"][0]["finish_reason"])
    tail = {**head, "choices": []}
    if include_usage:
        tail["usage"] = body["usage"]
    if "timings" in body:
        tail["timings"] = body["timings"]
    if len(tail) > len(head) + 1:
        chunks.append(tail)
    return chunks
