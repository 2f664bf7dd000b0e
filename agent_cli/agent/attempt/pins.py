"""Pinned notes past their share of working memory: the model is asked to unpin, then demoted.

Before each request: if the model was asked (in the previous request) to unpin notes and
pinned notes are still over their share, the oldest of those it was asked about is demoted
to an ordinary note, with a notice. If pinned notes are over their share now (working memory
shows the ones past it shortened), the request says which to `unpin` or merge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_cli.core import events

if TYPE_CHECKING:
    from agent_cli.agent.attempt.runtime import Runtime


def before_request(rt: Runtime) -> str:
    """Demote what the model left pinned after being asked; what to ask in this request."""
    memory = rt.memory
    over = memory.pinned_over()
    asked = [i for i in over if i in rt.unpin_asked]
    if asked:
        memory.demote(asked[0])
        over = memory.pinned_over()
    for item_id in memory.take_demoted():
        rt.emit(
            events.Notice(
                text=f"pinned note {item_id} was demoted to an ordinary note: "
                "pinned notes were over their share of working memory"
            )
        )
    rt.ask_unpin(over)
    if not over:
        return ""
    return (
        f"PINNED NOTES are over their share of working memory: the oldest are shown shortened. "
        f"Call unpin(id) on those no longer needed among: {', '.join(over)}, or take one note "
        f"that merges them and unpin those it replaces. Otherwise {over[0]} becomes an "
        "ordinary note before the next request."
    )
