"""One `agent run` in this process against the loopback fake server: what the server received.

The run is built by the same wiring as the `agent run` command (settings from the
environment and flags, the OpenAI client over HTTP, Chroma on disk under `home`), with
scripted replies; the server records every request and when it arrived.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cli.agent.learn import codemap, lexical
from agent_cli.cli.wiring import RunOptions, execute
from agent_cli.llm.fake.server import FakeOpenAIServer

Step = dict[str, Any]


def isolate(scratch: Path) -> None:
    """The environment a clean account would give `agent run` (no user .agentrc, no key)."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(var, None)
    for var in [v for v in os.environ if v.startswith("AGENT_")]:
        os.environ.pop(var)
    (scratch / "home").mkdir(parents=True, exist_ok=True)
    os.environ.update(
        AGENT_RC=os.devnull,  # no user settings
        HOME=str(scratch / "home"),
        AGENT_RETRY_BACKOFF_S="0.01",
        AGENT_REPLAN="off",
        AGENT_FINAL_SUMMARY="false",
        NO_COLOR="1",
    )


@dataclass
class Recorded:
    """What one run sent: its exit code, its events, the chat requests and their arrival."""

    code: int
    events: list[dict[str, Any]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrived_s: list[float] = field(default_factory=list)  # seconds from the run's start

    @property
    def run_id(self) -> str:
        return str(self.events[-1].get("run_id", "")) if self.events else ""

    @property
    def why(self) -> str:
        """What the last failed check said, in brief: its first line and its last ("" when
        no check failed)."""
        for event in reversed(self.events):
            if event.get("event") == "verify" and not event.get("passed"):
                said = [s.strip() for s in str(event.get("reason", "")).splitlines() if s.strip()]
                brief = said[0] if len(said) < 2 else f"{said[0]} ... {said[-1]}"
                return brief if len(brief) <= 300 else brief[:299] + "…"
        return ""


def run(repo: Path, goal: str, script: list[Step], home: Path, plan_only: bool = False) -> Recorded:
    """`agent run GOAL --yes --json [--plan-only]` in `repo` with its state in `home`."""
    steps = list(script)
    arrived: list[float] = []
    start = time.monotonic()

    def reply(body: dict[str, Any]) -> Step:
        arrived.append(time.monotonic() - start)
        n = len(arrived) - 1
        return steps[n] if n < len(steps) else {"status": 500, "body": '{"error": "no reply"}'}

    server = FakeOpenAIServer(reply).start()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            start = time.monotonic()
            code = execute(
                RunOptions(
                    goal=goal,
                    repo=repo,
                    yes=True,
                    json_out=True,
                    plan_only=plan_only,
                    flags={"base_url": server.url, "approval": "auto", "home": str(home)},
                )
            )
    finally:
        server.stop()
    events = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return Recorded(code, events, server.chat_requests, arrived)


def as_new_process() -> None:
    """Forget what an earlier run in this process read and would reuse, as a new `agent run`
    process starts without it: the code map of the repository and the words of names. The
    embedder stays loaded (a new process loads it in a worker while git checks the
    repository)."""
    codemap._READ.clear()
    lexical._token_words.cache_clear()
    lexical._part_of.cache_clear()


def scratch_dir(keep: Path | None) -> Path:
    """Where the benchmark's repositories and stores go: `keep`, or a new temporary folder."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return keep
    return Path(tempfile.mkdtemp(prefix="codemem-"))


# -- scripted replies ------------------------------------------------------------------------


def call(name: str, **args: Any) -> Step:
    return {"tool": name, "args": args}


def plan(goal: str, cmd: str | None) -> Step:
    task = {"goal": goal, "acceptance": "the check passes", "acceptance_cmd": cmd}
    return call("submit_plan", goal=goal, tasks=[task], success_criteria="the check passes")


def facts(*items: tuple[str, list[str]]) -> Step:
    return call("submit_facts", facts=[{"text": t, "files": f} for t, f in items])
