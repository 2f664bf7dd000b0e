"""The closing summary: one request with no tools, the model's words for the human at the end.

It is asked only when the run ended in an orderly way (every task verified, a task escalated,
or tasks skipped), never after a crash or a spent budget. A failed or empty reply is not an
error: the run's outcome stands, with a notice.
"""

from __future__ import annotations

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.window import send
from agent_cli.agent.attempt.runtime import Runtime
from agent_cli.core import events
from agent_cli.core.errors import AgentError

MAX_CHARS = 3000


def record(rt: Runtime, outcome: str) -> str:
    """What the run did, task by task, as the harness saw it."""
    lines = []
    for i, t in enumerate(rt.state.plan):
        commit = f", commit {t.commit[:10]}" if t.commit else ""
        summary = " ".join(t.summary.split())[:300]
        lines.append(
            f"{i + 1}. [{t.status}, {t.attempts} attempt(s){commit}] "
            f"{' '.join(t.goal.split())}" + (f"\n   its summary: {summary}" if summary else "")
        )
    revised = len(rt.state.revisions)
    extra = f"\nThe plan was revised {revised} time(s) during the run." if revised else ""
    return f"THE RUN ENDED: {outcome}\n\nTASKS:\n" + "\n".join(lines) + extra


def summarise(rt: Runtime, outcome: str) -> str:
    """Ask for the summary, emit and save it; "" when the model gave none, or when the money
    budget is spent (checked before every model call: the reply that crossed it still ran)."""
    if rt.spent() >= rt.limits.budget_usd:
        rt.emit(events.Notice(text="no closing summary: the money budget is spent"))
        return ""
    ask = Request(
        system=prompts.load("summary"), goal=rt.state.goal, task=record(rt, outcome)
    ).fitted(None, rt.limits.window())
    try:
        reply = send(
            rt.role("planner"), ask, None, None, window=rt.limits.window(), log=rt.log, again=True
        )
    except AgentError as e:
        rt.emit(events.Notice(text=f"no closing summary from the model ({e.message})"))
        return ""
    rt.log({"type": "reply", "reply": reply.model_dump()})
    whole = (reply.content or "").strip()
    text = whole[:MAX_CHARS]
    if not text:
        rt.emit(events.Notice(text="the model gave no closing summary"))
        return ""
    rt.state.closing_summary = text
    rt.save()
    rt.emit(events.FinalSummary(text=text))
    if reply.finish_reason == "length":
        rt.emit(events.Notice(text="the closing summary was cut at the reply's length limit"))
    elif len(whole) > MAX_CHARS:
        rt.emit(
            events.Notice(
                text=f"the closing summary is cut: its first {MAX_CHARS:,} characters are kept"
            )
        )
    return text
