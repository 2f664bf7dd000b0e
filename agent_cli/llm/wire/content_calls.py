"""Tool calls that a model wrote into its text instead of `tool_calls`.

Local chat templates often make a model answer `<tool_call>{"name": ..., "arguments": ...}
</tool_call>` (Hermes, Qwen) or a bare JSON object, and a server that does not parse them
passes them on as `content`. Only calls to a tool the request offered are taken; for a
request that forced one tool, a bare object of that tool's arguments is taken too.
Plain string search, no regular expressions: the text comes from the model.
"""

from __future__ import annotations

import json
from typing import Any

from agent_cli.core import strictjson
from agent_cli.core.models import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def _tagged(text: str) -> tuple[list[str], str]:
    """The bodies of `<tool_call>` blocks and the text outside them."""
    bodies, outside, pos = [], [], 0
    while (start := text.find(OPEN, pos)) != -1:
        outside.append(text[pos:start])
        end = text.find(CLOSE, start)
        bodies.append(text[start + len(OPEN) : end if end != -1 else len(text)])
        pos = len(text) if end == -1 else end + len(CLOSE)
    outside.append(text[pos:])
    return bodies, "".join(outside).strip()


def _unfenced(text: str) -> str:
    """The text without a surrounding Markdown code fence."""
    text = text.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        text = text[3:-3]
        first_line, _, rest = text.partition("\n")
        text = rest if first_line.strip().isalpha() or not first_line.strip() else text
    return text.strip()


def _load(text: str) -> Any:
    try:
        return strictjson.loads(_unfenced(text))
    except ValueError:
        return None


def _as_call(obj: Any, tools: dict[str, set[str]], forced: str | None) -> tuple[str, Any] | None:
    """(name, arguments) when `obj` is a call to an offered tool."""
    if not isinstance(obj, dict):
        return None
    inner = obj.get("function")
    fn: dict[str, Any] = inner if isinstance(inner, dict) else obj
    name = fn.get("name")
    args = fn.get("arguments", fn.get("parameters", {}))
    if isinstance(name, str) and name in tools:
        return name, args
    # A forced tool's arguments sent bare: every key is one of that tool's parameters.
    if forced and name is None and obj and set(obj) <= tools.get(forced, set()):
        return forced, obj
    return None


def calls_from_content(
    content: str, tools: list[dict[str, Any]], forced: str | None, whole_arguments: bool = False
) -> tuple[list[ToolCall], str | None]:
    """The calls written in `content` and the text left beside them; ([], content) if none.

    With `whole_arguments` (the request asked for the forced tool's arguments as structured
    output), a JSON object that is the whole content is that tool's arguments, whatever its keys.
    """
    if forced and whole_arguments and isinstance(_load(content), dict):
        return [ToolCall(id="call_text_0", name=forced, arguments=_unfenced(content))], None
    offered = {
        t["function"]["name"]: set(t["function"].get("parameters", {}).get("properties", {}))
        for t in tools
        if isinstance(t.get("function"), dict)
    }
    bodies, rest = _tagged(content)
    candidates = [_load(b) for b in bodies] if bodies else [_load(content)]
    if not bodies and isinstance(candidates[0], list):
        candidates = candidates[0]
    found = [_as_call(c, offered, forced) for c in candidates]
    calls = [
        ToolCall(
            id=f"call_text_{i}",
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args),
        )
        for i, (name, args) in enumerate(f for f in found if f)
    ]
    if not calls:
        return [], content
    return calls, (rest or None) if bodies else None
