"""Keep a whole request within the model's context window, less the tokens kept for the answer.

A request is counted as its JSON (every message and the tools schema), which counts a few
more tokens than the model will (quotes, keys, escapes), so the limit holds with room to
spare. When it is over, the shrinkable parts are cut, the most volatile first: working
memory, then the request's own material (a file list, a diff), the previous exchange's
tool results, recalled memory, the run's state, the repository's instructions. The system
prompt, the task block and the goal are never cut; if they alone do not fit, that is an
error naming the window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

from agent_cli.core import fences, tokens
from agent_cli.core.errors import AgentError
from agent_cli.core.protocols import Message

Tools = list[dict[str, Any]]


class Parts(Protocol):
    """A request's parts (`ask.request.Request`, a dataclass): laid out, and cut one by one."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    exchange: list[Message]

    def messages(self) -> list[Message]: ...


R = TypeVar("R", bound=Parts)

SHRINK_ORDER = ("memory", "context", "exchange", "recalled", "state", "instructions")
NOTE = "\n[… cut to fit the model's context window]"
MIN_KEEP = 16


@dataclass(frozen=True)
class Window:
    """How many tokens a request may take: the context window less the reserved answer."""

    context_window: int = 128_000
    reserved_output_tokens: int = 4096

    @property
    def limit(self) -> int:
        return self.context_window - self.reserved_output_tokens


def request_tokens(messages: list[Message], tools: Tools | None) -> int:
    """Tokens of a request as JSON: its messages and its tools schema."""
    text = json.dumps(messages, ensure_ascii=False)
    if tools:
        text += json.dumps(tools, ensure_ascii=False)
    return tokens.count(text)


def _upper_bound(messages: list[Message], tools: Tools | None) -> int:
    """A cheap bound: a token is at least one byte."""
    size = len(json.dumps(messages, ensure_ascii=False).encode())
    return size + (len(json.dumps(tools, ensure_ascii=False).encode()) if tools else 0)


def fit(request: R, tools: Tools | None, window: Window | None) -> list[Message]:
    """The request's messages, its parts cut (most volatile first) until it fits `window`."""
    messages = request.messages()
    if window is None or _upper_bound(messages, tools) <= window.limit:
        return messages
    total = request_tokens(messages, tools)
    for part in SHRINK_ORDER:
        while total > window.limit:
            smaller = _shrink(request, part, total - window.limit)
            if smaller == request:
                break  # nothing left to cut in this part
            request, messages = smaller, smaller.messages()
            total = request_tokens(messages, tools)
    if total <= window.limit:
        return messages
    raise AgentError(
        f"the request needs {total} tokens even with memory and context cut, but "
        f"the context window leaves {window.limit} ({window.context_window} less "
        f"{window.reserved_output_tokens} kept for the answer)",
        "raise context_window (or lower reserved_output_tokens) to what the "
        "model serves, or use a model with a larger window",
    )


def _shrink(request: R, part: str, excess: int) -> R:
    """`request` with `part` shorter by at least `excess` tokens (or emptied)."""
    if part == "exchange":
        return replace(request, exchange=_shrink_exchange(request.exchange, excess))
    text: str = getattr(request, part)
    if not text:
        return request
    cut: dict[str, Any] = {part: cut_text(text, tokens.count(text) - excess - MIN_KEEP)}
    return replace(request, **cut)


def cut_text(text: str, keep: int) -> str:
    """`text` cut to about `keep` tokens (its head), a fence left open closed, the cut said."""
    if keep <= MIN_KEEP:
        return ""
    return fences.close_cut(tokens.truncate(text, keep)) + NOTE


def _shrink_exchange(exchange: list[Message], excess: int) -> list[Message]:
    """The exchange with its tool results cut, the longest first."""
    out = [dict(m) for m in exchange]
    results = sorted(
        (i for i, m in enumerate(out) if m.get("role") == "tool"),
        key=lambda i: -len(out[i].get("content") or ""),
    )
    for i in results:
        if excess <= 0:
            break
        content = out[i].get("content") or ""
        have = tokens.count(content)
        out[i]["content"] = cut_text(content, have - excess - MIN_KEEP) or NOTE.strip()
        excess -= have - tokens.count(out[i]["content"])
    return out
