"""The user's hooks as a run calls them (`core.protocols.Hooks`): match, run in order, report."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from agent_cli.core import strictjson
from agent_cli.core.events import HookRan
from agent_cli.core.protocols import HookStopped, HookTask
from agent_cli.core.redact import redact_all
from agent_cli.tools.held import HeldFiles, Started
from agent_cli.tools.hooks.config import HOOK_EVENTS, HookEvent, HooksConfig, HookSpec
from agent_cli.tools.hooks.outcome import (
    Block,
    HookOutcome,
    as_event,
    decide,
    stopped,
    tampered,
)
from agent_cli.tools.hooks.process import Finished, HookPlace, run_hook

RESULT_MAX = 50_000  # characters of a tool's result a post_tool hook is given


class UserHooks:
    """Runs the configured hooks of each point; at one point they run in order, and the first
    that blocks ends the round (the later ones do not run). Ctrl-C stops the hook at work and
    raises `HookStopped`, which carries the round's events, the stopped one's among them."""

    def __init__(
        self, config: HooksConfig, place: HookPlace, started: Started | None = None
    ) -> None:
        self.config = config
        self.place = place
        commands = [h.command for e in HOOK_EVENTS for h in config.at(e)]
        self.scripts = HeldFiles(place.root, commands, started)

    def before_tool(self, at: HookTask, tool: str, args: str) -> Sequence[HookRan]:
        return self._run("pre_tool", at, tool, {"tool": tool, "args": _arguments(args)})

    def after_tool(
        self, at: HookTask, tool: str, args: str, result: dict[str, Any]
    ) -> Sequence[HookRan]:
        shown = dict(result)
        if isinstance(shown.get("text"), str):
            shown["text"] = shown["text"][:RESULT_MAX]
        return self._run(
            "post_tool", at, tool, {"tool": tool, "args": _arguments(args), "result": shown}
        )

    def task_verified(self, at: HookTask, verdict: dict[str, Any]) -> Sequence[HookRan]:
        return self._run("task_verified", at, "", {"result": verdict})

    def run_end(self, at: HookTask, outcome: dict[str, Any], after: int = 0) -> Sequence[HookRan]:
        return self._run("run_end", at, "", {"result": outcome, "outcome": outcome}, after)

    def longest(self, event: str) -> float:
        return sum(h.timeout_s for h in self.config.at(event)) if event in HOOK_EVENTS else 0.0

    def _run(
        self, event: HookEvent, at: HookTask, tool: str, extra: dict[str, Any], after: int = 0
    ) -> list[HookRan]:
        specs = [h for h in self.config.at(event) if not tool or h.matches(tool)][after:]
        if not specs:
            return []
        payload = {
            "event": event,
            "run_id": at.run_id,
            "task": {"goal": at.goal, "index": at.index} if at.index >= 0 else None,
            "tool": tool or None,
            "args": None,
            "result": None,
            "repo": str(self.place.root),
            **extra,
        }
        stdin = json.dumps(redact_all(payload, self.place.secrets)).encode()
        ran: list[HookRan] = []
        where = (at.index, tool)
        for n, spec in enumerate(specs):
            begun = time.monotonic()
            try:
                finished, outcome = self._one(event, spec, stdin)
            except KeyboardInterrupt:  # the hook's process is gone (run_hook): say it was stopped
                finished, outcome = stopped(event, time.monotonic() - begun)
                ran.append(as_event(event, spec, finished, outcome, where, self.place.secrets))
                rest = specs[n + 1 :]
                raise HookStopped(ran, len(rest), sum(h.timeout_s for h in rest)) from None
            ran.append(as_event(event, spec, finished, outcome, where, self.place.secrets))
            if isinstance(outcome, Block):
                break
        return ran

    def _one(self, event: HookEvent, spec: HookSpec, stdin: bytes) -> tuple[Finished, HookOutcome]:
        """Run one hook, unless a file it runs changed since the run began."""
        changed = self.scripts.changed(spec.command)
        if changed:
            return tampered(event, changed)
        self.scripts.clear_bytecode(spec.command)  # no .pyc the model wrote is loaded
        finished = run_hook(spec.command, stdin, self.place, spec.timeout_s)
        return finished, decide(event, spec, finished, self.place.secrets)


def _arguments(args: str) -> Any:
    """The call's arguments as JSON data; the text as sent when it is not a JSON object."""
    try:
        return strictjson.loads(args or "{}")
    except ValueError:
        return args
