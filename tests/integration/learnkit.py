"""Runs of the real wiring in this process: the loopback server, a real git repo, real Chroma.

`run_in_process` builds the run exactly as `agent run` does (settings from the environment
and flags, the OpenAI client over HTTP, Chroma on disk), without spawning a process. The
embedder is the server's `/embeddings` (a deterministic bag of words), so what is recalled
depends only on the words used.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_cli.cli.wiring import RunOptions, execute
from conftest import QUICK_PYTEST_ENV


def set_run_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Set the environment `agent run` would see in a clean account whose HOME is `home`."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AGENT_RC", os.devnull)  # no user settings
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AGENT_RETRY_BACKOFF_S", "0.01")
    monkeypatch.setenv("AGENT_EMBEDDING_MODEL", "fake-embed")
    for var, value in QUICK_PYTEST_ENV.items():
        monkeypatch.setenv(var, value)


@pytest.fixture
def run_env(monkeypatch, tmp_path):
    """The environment `agent run` would see in a clean account, set for this process."""
    set_run_env(monkeypatch, tmp_path / "home")
    return monkeypatch


def run_once(base: Path, repo: Path, goal: str, replies: list[dict]) -> tuple[int, list[dict], Any]:
    """`agent run GOAL --yes --json` in `repo` against a server of `replies`, for a fixture
    wider than one test (no capsys there): in `run_env`'s environment with `base` for HOME
    and the user cache. The exit code, the events printed and the (stopped) server."""
    from agent_cli.llm.fake.server import FakeOpenAIServer

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as env, FakeOpenAIServer(replies) as server:
        set_run_env(env, base / "home")
        env.setenv("XDG_CACHE_HOME", str(base / "user-cache"))
        with contextlib.redirect_stdout(out):
            code = execute(_run_options(repo, goal, server.url))
    events = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return code, events, server


def run_in_process(capsys, repo: Path, goal: str, server, **flags) -> tuple[int, list[dict]]:
    """`agent run GOAL --yes --json` against `server`; the exit code and the events printed."""
    capsys.readouterr()
    code = execute(_run_options(repo, goal, server.url, **flags))
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _run_options(repo: Path, goal: str, url: str, **flags) -> RunOptions:
    """`agent run GOAL --yes --json --base-url URL` in `repo`, with `flags` as settings."""
    return RunOptions(
        goal=goal,
        repo=repo,
        yes=True,
        json_out=True,
        flags={"base_url": url, "approval": "auto", **flags},
    )


def request_text(request: dict) -> str:
    """Every message of one chat request as one string."""
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def planning_requests(server) -> list[dict]:
    return [r for r in server.chat_requests if _forced(r) == "submit_plan"]


def planned_request(capsys, server, repo: Path, goal: str) -> str:
    """A plan-only run of `goal` in `repo` against `server`: the text of its planning request."""
    opts = RunOptions(
        goal=goal,
        repo=repo,
        plan_only=True,
        json_out=True,
        flags={"base_url": server.url, "approval": "auto"},
    )
    assert execute(opts) == 0
    capsys.readouterr()
    return request_text(planning_requests(server)[0])


def task_requests(server) -> list[dict]:
    return [r for r in server.chat_requests if r.get("tool_choice") == "auto"]


def facts_requests(server) -> list[dict]:
    return [r for r in server.chat_requests if _forced(r) == "submit_facts"]


def _forced(request: dict) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        return choice.get("function", {}).get("name")
    tools = request.get("tools") or []
    if choice == "required" and len(tools) == 1:  # "required" with a single tool forces it too
        return tools[0]["function"]["name"]
    return None
