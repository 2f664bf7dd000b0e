"""One fake server for several runs at once: each run's replies, chosen by the goal it asks about.

The goal is the last thing of every request a run makes, so the script whose key comes
last in a request's last message is that run's; each script is served in order. A run
recalling another's episode carries that goal too, but earlier in the request.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping
from typing import Any

from agent_cli.llm.fake.replies import Step


class ByGoal:
    """A callable script for `FakeOpenAIServer`: `scripts[key]` answers the run whose goal has key.

    `delay` (seconds, or a (low, high) range drawn from for each reply) makes every reply wait
    like a real model's would."""

    def __init__(
        self,
        scripts: Mapping[str, list[Step]],
        delay: float | tuple[float, float] = 0.0,
        seed: int = 0,
    ) -> None:
        self.scripts = {key: list(steps) for key, steps in scripts.items()}
        self.served = dict.fromkeys(self.scripts, 0)
        self.delay = delay
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Step:
        key = self.key_of(body)
        with self._lock:
            if key is None:
                return _error("fake server: no script's goal is in this request")
            n = self.served[key]
            self.served[key] = n + 1
            wait = self._wait()
        steps = self.scripts[key]
        if n >= len(steps):
            return _error(f"fake server: the script of {key!r} has only {len(steps)} replies")
        step = steps[n]
        return {**step, "delay": step.get("delay", wait)} if wait else step

    def key_of(self, body: dict[str, Any]) -> str | None:
        """The script whose key comes last in the request's last message."""
        messages = body.get("messages") or [{}]
        content = messages[-1].get("content") or ""
        text = content if isinstance(content, str) else json.dumps(content)
        found = [(text.rfind(key), key) for key in self.scripts if key in text]
        return max(found)[1] if found else None

    def _wait(self) -> float:
        if isinstance(self.delay, tuple):
            return self._random.uniform(*self.delay)
        return self.delay


def _error(message: str) -> Step:
    return {"status": 500, "body": json.dumps({"error": {"message": message}})}
