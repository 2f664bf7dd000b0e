"""Whether a server's tool can be offered to the model (its name and its input schema), and the
tool as the model is offered it: the server's descriptions free of control characters and
fence tags, marked as the server's words."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from agent_cli.core import fences
from agent_cli.core.text import clean

FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
MAX_SCHEMA_CHARS = 20_000
MAX_DESCRIPTION_CHARS = 1_000


def full_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by: a character a function name cannot hold
    (`git.status`, `fs/read`, a space) becomes `_`, and a call by it reaches the tool."""
    return f"mcp__{server}__{NOT_IN_NAMES.sub('_', tool)}"


def problem(server: str, tool: str, schema: Any) -> str | None:
    """Why the tool cannot be sent to the model, or None."""
    name = full_name(server, tool)
    if not tool:
        return "its name is empty"
    if not FUNCTION_NAME.fullmatch(name):
        return f"its name {name} is {len(name)} characters, over the 64 of a function name"
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema is of type {schema.get('type')!r}, not an object"
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, (dict, bool)) for v in props.values()):
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
    wrong = _malformed(schema, schema, "")
    return f"its input schema is not valid JSON Schema ({wrong})" if wrong else None


# JSON Schema's types, and the keys whose values are schemas: one, a map of them, or a list.
TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
ONE = (
    *("items", "additionalProperties", "not", "contains", "if", "then", "else"),
    *("propertyNames", "additionalItems", "unevaluatedItems", "unevaluatedProperties"),
)
MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
LIST = ("anyOf", "oneOf", "allOf", "prefixItems")


def _malformed(node: Any, root: dict[str, Any], where: str) -> str | None:
    """The first thing in the (sub)schema `node` at `where` that a model's endpoint refuses,
    which would fail every request of the run: a type that is none, a `$ref` that points
    nowhere in the schema, a subschema that is no schema. A `$ref` may point back (a tree)."""
    if isinstance(node, bool):
        return None
    if not isinstance(node, dict):
        return f"{where or 'the schema'} is not a schema"
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) and kind else [kind]
    if "type" in node and not all(isinstance(k, str) and k in TYPES for k in kinds):
        return f"{where or 'the schema'} has type {kind!r}"
    ref = node.get("$ref")
    if ref is not None and (not isinstance(ref, str) or _pointed(root, ref) is None):
        return f"{where or 'the schema'} has $ref {ref!r}, which points nowhere in the schema"
    for key in ("required", "enum"):
        if key in node and not isinstance(node[key], list):
            return f"{where or 'the schema'}'s {key} is not a list"
    subschemas: list[tuple[str, Any]] = [(f"{where}.{k}", node[k]) for k in ONE if k in node]
    for key in MAP:
        table = node.get(key, {})
        if not isinstance(table, dict):
            return f"{where}.{key} is not a map of schemas"
        subschemas += [(f"{where}.{key}.{name}", sub) for name, sub in table.items()]
    for key in LIST:
        items = node.get(key, [])
        if not isinstance(items, list):
            return f"{where}.{key} is not a list of schemas"
        subschemas += [(f"{where}.{key}.{n}", sub) for n, sub in enumerate(items)]
    if isinstance(node.get("items"), list):  # draft 7's tuple form
        subschemas = [(w, sub) for w, sub in subschemas if w != f"{where}.items"]
        subschemas += [(f"{where}.items.{n}", sub) for n, sub in enumerate(node["items"])]
    return next(
        (wrong for w, sub in subschemas if (wrong := _malformed(sub, root, w.lstrip(".")))),
        None,
    )


def _pointed(root: dict[str, Any], ref: str) -> Any:
    """What the local reference `ref` (`#`, `#/$defs/node`) points at in `root`; None when it
    points nowhere in it (or outside it: a URL is never fetched)."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


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
