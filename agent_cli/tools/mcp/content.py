"""A tool result's content as text: text blocks as they are, anything else summarised."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

# What one result may carry into the harness before the tool registry bounds it again.
MAX_TEXT_CHARS = 200_000


def as_text(blocks: Iterable[Any], structured: Any = None) -> str:
    """The content blocks joined as text; images, audio and resources as one line each."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}, {_size(_decoded_len(getattr(block, 'data', '')))}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            parts.append(_resource(getattr(block, "resource", None)))
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if len(text) > MAX_TEXT_CHARS:
        cut = len(text) - MAX_TEXT_CHARS
        text = f"{text[:MAX_TEXT_CHARS]}\n[... {cut} characters cut ...]"
    return text


def _resource(resource: Any) -> str:
    uri = getattr(resource, "uri", "")
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return f"[resource {uri}]\n{text}"
    return f"[resource {uri}, {_size(_decoded_len(getattr(resource, 'blob', '')))}]"


def _decoded_len(data: Any) -> int:
    if isinstance(data, bytes):
        return len(data)
    text = str(data or "")
    try:
        return len(base64.b64decode(text, validate=False))
    except ValueError:
        return len(text)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{round(n / 1024)} KB"
    return f"{n / (1024 * 1024):.1f} MB"
