"""Whole `agent run`s against the loopback server acting like a small llama.cpp server."""

from __future__ import annotations

import pytest

from reliability.relkit import (
    GOAL,
    calls,
    events,
    finish,
    make_done,
    plan,
    read_state,
    repo_with,
    task,
)

# A run starts its checks (`python -m pytest`) and git as real processes.
pytestmark = pytest.mark.slow

LLAMA_CPP = {"n_ctx": 4096, "object_choice": "ignore", "strict_echo": True}
TIMINGS = {
    "usage": {"prompt_tokens": 1000, "completion_tokens": 10},
    "timings": {"cache_n": 900, "prompt_n": 100},
}


def _script() -> list[dict]:
    return [
        {**step, **TIMINGS}
        for step in (
            plan(task()),
            calls(("search", '{"pattern":')),  # cut off: the next request echoes it
            make_done(),
            finish(),
        )
    ]


def test_a_run_on_a_small_llama_cpp_server_plans_fits_and_counts_the_cache(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(_script(), **LLAMA_CPP)
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, "--model", "fake-model", cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reqs = srv.chat_requests
    assert reqs[0]["tool_choice"] == "required"  # the object form would have been ignored
    assert all(r["max_tokens"] <= 1024 for r in reqs)  # a quarter of the 4,096-token window
    echoed = reqs[2]["messages"]
    assert [c["function"]["arguments"] for m in echoed for c in m.get("tool_calls") or []] == ["{}"]
    assert any('{"pattern":' in (m.get("content") or "") for m in echoed if m["role"] == "tool")

    evs = events(proc.stdout)
    notices = [e["text"] for e in evs if e["event"] == "notice"]
    assert any(
        "context window is 4,096 tokens: working memory 752 and tool output 614" in n
        for n in notices
    ), notices
    done = evs[-1]
    assert done["event"] == "run_done" and done["cached_tokens"] == 4 * 900
    assert done["prompt_tokens"] == 4 * 1000
    assert read_state(repo)["usage"]["cached_tokens"] == 4 * 900


def test_the_report_line_shows_cached_tokens(agent_in_process, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(_script(), **LLAMA_CPP)
    proc = agent_in_process(
        "run", GOAL, "--yes", "--base-url", srv.url, "--model", "fake-model", cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4,000 prompt (3,600 cached) + 40 completion tokens" in proc.stdout


def test_a_reply_cut_at_the_length_limit_is_reported_as_such(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    cut = {"content": "First I will carefully consider", "finish_reason": "length"}
    srv = fake_server([plan(task()), cut, make_done(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [e for e in events(proc.stdout) if e["event"] == "tool_result"]
    assert "cut at the length limit" in results[0]["summary"]
    nudge = srv.chat_requests[2]["messages"][-1]["content"]
    assert "your last reply was cut at the length limit" in nudge and "no tool call" not in nudge


def test_a_request_larger_than_the_server_context_ends_the_run_with_a_clear_line(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task())], n_ctx=300)
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    # the window is learned from /props, so the request is found too big before it is sent
    assert "context window leaves 225 (300 less 75" in error, error
    assert srv.chat_requests == []
