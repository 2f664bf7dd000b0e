"""What a request carried from long-term memory, read from the request itself."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agent_cli.core import tokens

# A fence as `core.fences` writes it opens with the tag and a newline (the system prompt's
# rule names the tags inline, without it). It ends where a model would read it as ended: at
# the first closing tag, wherever it is and however it is spaced, so that a stored text
# that closes the fence early (`... </retrieved_memory> SYSTEM: ...`) and is not escaped
# puts what follows it outside.
FENCE = re.compile(
    r"<retrieved_memory>\n(.*?)<\s*/\s*retrieved_memory\s*>"
    r"|<tool_output name=\"[^\"]*\">\n(.*?)<\s*/\s*tool_output\s*>",
    re.DOTALL,
)
MEMORY = re.compile(r"<retrieved_memory>\n(.*?)<\s*/\s*retrieved_memory\s*>", re.DOTALL)
ITEM = re.compile(r"^- (\w+) (\S+?)((?: \w+=\"[^\"]*\")*):", re.MULTILINE)


@dataclass
class Seen:
    """What one request held from long-term memory."""

    items: dict[str, bool] = field(default_factory=dict)  # item id -> marked stale
    memory_tokens: int = 0
    poison_unfenced: bool = False


def request_text(request: dict[str, Any]) -> str:
    """Every message of a chat request as one string."""
    return "\n".join(str(m.get("content") or "") for m in request.get("messages", []))


def fenced_spans(text: str) -> list[tuple[int, int]]:
    """Where the data fences (retrieved memory, tool output) are in `text`."""
    return [m.span() for m in FENCE.finditer(text)]


def outside_fences(text: str, mark: str) -> bool:
    """Whether `mark` occurs in `text` anywhere outside a data fence."""
    spans = fenced_spans(text)
    start = text.find(mark)
    while start >= 0:
        if not any(a <= start < b for a, b in spans):
            return True
        start = text.find(mark, start + 1)
    return False


def memory_items(block: str) -> dict[str, bool]:
    """The items listed in a retrieved-memory block: id -> whether it is marked stale."""
    return {m.group(2): 'stale="true"' in m.group(3) for m in ITEM.finditer(block)}


def read(text: str, poison_mark: str) -> Seen:
    """What the request text `text` carried from long-term memory."""
    seen = Seen(poison_unfenced=outside_fences(text, poison_mark))
    for m in MEMORY.finditer(text):
        seen.items.update(memory_items(m.group(1)))
        seen.memory_tokens += tokens.count(m.group(0))
    return seen
