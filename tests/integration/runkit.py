"""Scripted model replies and checks shared by the end-to-end `agent run` tests."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

PYTEST = f"{sys.executable} -m pytest -q tests/test_stats.py"
GOAL = "Add a median function to calc/stats.py so that tests/test_stats.py passes"

GOOD_MEDIAN = '''

def median(xs):
    """The middle value of a non-empty list (mean of the two middle values when even)."""
    if not xs:
        raise ValueError("median of an empty list")
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
'''

BAD_MEDIAN = '''

def median(xs):
    """The middle value."""
    return sorted(xs)[len(xs) // 2]
'''

MEAN_TAIL = "    return sum(xs) / len(xs)\n"


def plan(*tasks: dict, goal: str = GOAL) -> dict:
    """A submit_plan reply."""
    return {
        "tool": "submit_plan",
        "args": {"goal": goal, "tasks": list(tasks), "success_criteria": "the tests pass"},
    }


def task(goal: str = "Add median() to calc/stats.py", cmd: str | None = PYTEST) -> dict:
    return {"goal": goal, "acceptance": "tests/test_stats.py passes", "acceptance_cmd": cmd}


def add_median(body: str = GOOD_MEDIAN) -> dict:
    """An edit_file reply appending `body` after mean()."""
    return {
        "tool": "edit_file",
        "args": {"path": "calc/stats.py", "old": MEAN_TAIL, "new": MEAN_TAIL + body},
    }


def replace_median(old: str, new: str) -> dict:
    return {"tool": "edit_file", "args": {"path": "calc/stats.py", "old": old, "new": new}}


def finish(summary: str = "added median()") -> dict:
    return {"tool": "finish", "args": {"summary": summary}}


def facts(*items: tuple[str, list[str]]) -> dict:
    """A submit_facts reply (the request at the end of a run)."""
    return {
        "tool": "submit_facts",
        "args": {"facts": [{"text": text, "files": files} for text, files in items]},
    }


def read_stats() -> dict:
    return {"tool": "read_file", "args": {"path": "calc/stats.py"}}


def run_tests() -> dict:
    return {"tool": "run", "args": {"cmd": PYTEST}}


def last_text(request: dict) -> str:
    """The content of the last message of a chat request."""
    return request["messages"][-1]["content"] or ""


def brief_text(request: dict) -> str:
    """The brief of a step request: its task, check, hints, plan and last failure, which hold
    for the whole attempt ("" for a request that has none)."""
    briefs = [
        m["content"]
        for m in request["messages"]
        if m["role"] == "user" and str(m.get("content") or "").startswith("CURRENT TASK (")
    ]
    assert len(briefs) <= 1, briefs
    return briefs[0] if briefs else ""


def state_of(repo: Path) -> dict:
    """The newest run's state.json."""
    states = sorted((repo / ".agent" / "runs").glob("*/state.json"))
    return json.loads(states[-1].read_text())


def events_of(stdout: str) -> list[dict]:
    """Every stdout line parsed as a JSON event."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


class Held:
    """A script for `FakeOpenAIServer` whose steps marked `"held": True` are answered only once
    the test calls `release()` (or after `timeout` seconds): a run waits for its model for as
    long as the test needs it live, and not a moment longer. `script` is a list of steps or a
    callable script such as `routes.ByGoal`; a `with` block releases at its end."""

    def __init__(self, script: list[dict] | Callable[[dict], dict], timeout: float = 300) -> None:
        self.script = script
        self.timeout = timeout
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._served = 0

    def __call__(self, body: dict[str, Any]) -> dict:
        if callable(self.script):
            step = self.script(body)
        else:
            with self._lock:
                n, self._served = self._served, self._served + 1
            if n >= len(self.script):
                message = f"fake server: script has only {len(self.script)} replies"
                return {"status": 500, "body": json.dumps({"error": {"message": message}})}
            step = self.script[n]
        if step.get("held"):
            self._released.wait(self.timeout)
            step = {k: v for k, v in step.items() if k != "held"}
        return step

    def release(self) -> None:
        self._released.set()

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
