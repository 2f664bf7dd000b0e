"""The prompts, kept as Markdown files beside this module."""

from __future__ import annotations

from functools import cache
from importlib import resources

from agent_cli.core.fences import FENCE_RULE


@cache
def load(name: str) -> str:
    """The prompt `name` (system, planner, verifier) with the fence rule filled in."""
    text = resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return text.replace("{fence_rule}", FENCE_RULE).strip()
