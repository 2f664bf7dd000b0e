"""A console that shows each event to a watcher first, which may put events before it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agent_cli.core.events import Escalated, Event, PlanMade
from agent_cli.core.protocols import Console


class Watched:
    """`console`, but every event goes to `watch` first; what `watch` returns is emitted
    before the event itself (a notice that belongs just before `run_done`, say)."""

    def __init__(self, console: Console, watch: Callable[[Event], Iterable[Event]]) -> None:
        self.console, self.watch = console, watch

    def emit(self, ev: Event) -> None:
        for before in self.watch(ev):
            self.console.emit(before)
        self.console.emit(ev)

    def approve_plan(self, plan_event: PlanMade) -> bool:
        return self.console.approve_plan(plan_event)

    def approve_command(self, cmd: str) -> str:
        return self.console.approve_command(cmd)

    def approve_tool(self, call: str) -> str:
        return self.console.approve_tool(call)

    def ask_escalation(self, ev: Escalated) -> str:
        return self.console.ask_escalation(ev)

    def stream_text(self, delta: str) -> None:
        self.console.stream_text(delta)

    def drop_stream(self) -> None:
        self.console.drop_stream()

    def close(self) -> None:
        self.console.close()
