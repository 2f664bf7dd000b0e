"""A message from an MCP server that the SDK could not read: a broken reply, or noise.

A connection serves one request at a time, so a reply that cannot be read (invalid JSON, a
`result` that is no object, an error whose code is no integer, a batch, `null`) belongs to
the request in flight even when its id cannot be read: that request fails at once with what
is wrong, instead of waiting out its timeout. A line that is no JSON at all (a server's log
line on stdout, `[INFO] listening` among them: a bracket that opens no array of messages) is
noise, and so is a malformed request or notification from the server.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agent_cli.core import strictjson

MAX_REASON = 200


def broken_reply(error: Exception) -> str | None:
    """What is wrong with the reply `error` stands for, on one line; None when it is noise."""
    if not isinstance(error, ValidationError) or not error.errors():
        return None
    errors = error.errors()
    first = errors[0]
    data: Any = first.get("input")
    if first["type"] == "json_invalid":
        raw = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        try:
            data = strictjson.loads(raw)
        except ValueError:
            if not _opens_message(raw):
                return None  # not JSON: a log line
        if isinstance(data, dict) and "method" in data:
            return None
        return _line(f"a reply that is not valid JSON ({first['msg']})")
    if not isinstance(data, dict):
        return _line(f"a reply that is no JSON-RPC message (got {_kind(data)})")
    if "method" in data or not ({"result", "error"} & set(data)):
        return None  # a request or notification from the server, not a reply
    branch = "JSONRPCError" if "error" in data else "JSONRPCResponse"
    said = next((e for e in errors if tuple(e["loc"])[:1] == (branch,)), first)
    where = ".".join(str(part) for part in tuple(said["loc"])[1:]) or "the reply"
    return _line(f"a reply that does not follow JSON-RPC ({where}: {said['msg']})")


def _opens_message(raw: str) -> bool:
    """Whether text that is no valid JSON begins as a message would: an object (`{`), or an
    array of them (a batch: `[{`, `[]`). `[INFO] ...` or `[1/3] loading` is a log line."""
    text = raw.lstrip()
    if text[:1] == "{":
        return True
    return text[:1] == "[" and text[1:].lstrip()[:1] in ("{", "]", "")


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, list):
        return "an array: a batch" if data else "an empty array"
    if isinstance(data, bool):
        return "a boolean"
    return "a string" if isinstance(data, str) else "a number"


def _line(text: str) -> str:
    return " ".join(text.split())[:MAX_REASON]
