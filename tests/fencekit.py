"""Readers of recorded request text: whether its fences balance, and what a pointer stands for."""

from __future__ import annotations

import re

from agent_cli.core.fences import FENCE_TAGS

_BOUNDARY = re.compile(rf"<(/?)({'|'.join(FENCE_TAGS)})\b")
_POINTER = re.compile(
    r"^\(in WORKING MEMORY: (\[[a-z_]+ m\d+\])(?:, the same result \d+ times now)?\)"
)


def balanced(text: str) -> bool:
    """True when every fence opened in `text` is closed, in order, with no nesting."""
    open_tag = None
    for m in _BOUNDARY.finditer(text):
        closing, tag = m.group(1) == "/", m.group(2)
        if not closing and open_tag is None:
            open_tag = tag
        elif closing and open_tag == tag:
            open_tag = None
        else:
            return False
    return open_tag is None


def pointed_result(content: str, memory: str) -> str | None:
    """The result a tool message points to (`agent.ask.request.POINTER`), read back from the
    memory block it was sent with, then any text after the pointer; None for no pointer."""
    match = _POINTER.match(content)
    if not match:
        return None
    start = memory.index("\n", memory.index(match.group(1))) + 1
    end = memory.index("</tool_output>", start) + len("</tool_output>")
    return memory[start:end] + content[match.end() :]
