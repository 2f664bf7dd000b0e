"""Whether a server's tool can be offered to the model (its name and its input schema), and the
tool as the model is offered it: the server's descriptions free of control characters and
fence tags, marked as the server's words."""

from __future__ import annotations

import json
import re
from typing import Any

from agent_cli.core import fences
from agent_cli.core.text import clean

FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_SCHEMA_CHARS = 20_000
MAX_DESCRIPTION_CHARS = 1_000


def full_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by."""
    return f"mcp__{server}__{tool}"


def problem(server: str, tool: str, schema: Any) -> str | None:
    """Why the tool cannot be sent to the model, or None."""
    name = full_name(server, tool)
    if not tool:
        return "its name is empty"
    if not FUNCTION_NAME.fullmatch(name):
        return f"its name {name!r} is not a function name (letters, digits, _ and -, up to 64)"
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema is of type {schema.get('type')!r}, not an object"
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, dict) for v in props.values()):
        return "its input schema's properties are not a map of schemas"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "its input schema's required is not a list of names"
    try:
        text = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as e:
        return f"its input schema is not plain JSON ({e})"
    if len(text) > MAX_SCHEMA_CHARS:
        return f"its input schema is {len(text):,} characters (at most {MAX_SCHEMA_CHARS:,})"
    return None


def function_spec(
    server: str, tool: str, description: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """The tool as a Chat Completions function tool."""
    params = dict(_described(schema))
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    text = clean(description).strip() or f"Tool {tool} of the MCP server {server}."
    return {
        "type": "function",
        "function": {
            "name": full_name(server, tool),
            "description": f"[MCP server {server}] {fences.escape(text[:MAX_DESCRIPTION_CHARS])}",
            "parameters": params,
        },
    }


def _described(schema: Any) -> Any:
    """`schema` with each `description` and `title` in it (at any depth) as the model may read
    the server's words: without terminal escapes and control characters, and unable to open or
    close a fence (`</tool_output>`, `<human_hint>`), escaped as a tool result's text is."""
    if isinstance(schema, list):
        return [_described(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: fences.escape(clean(value))
        if key in ("description", "title") and isinstance(value, str)
        else _described(value)
        for key, value in schema.items()
    }
