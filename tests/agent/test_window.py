"""Requests fitted to the context window: counted whole, cut from the most volatile part."""

from __future__ import annotations

import pytest

from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.window import Window, narrowed, request_tokens
from agent_cli.agent.attempt.toolbox import TOOLS
from agent_cli.core import fences
from agent_cli.core.errors import AgentError
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.llm.server.info import fit_window
from fencekit import balanced


def _request(memory_words: int = 3000, result_words: int = 10) -> Request:
    return Request(
        system="You are careful.",
        goal="make the tests pass",
        instructions=fences.repo_instructions("AGENTS.md", "Run make check."),
        recalled=fences.retrieved_memory("- fact: tests run with make check"),
        memory="[edit m1] edited a.py\n" + "alpha beta " * memory_words,
        exchange=[
            {"role": "assistant", "content": None, "tool_calls": []},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": fences.tool_output("run", "line\n" * result_words),
            },
        ],
        task="CURRENT TASK: fix it",
        state="PLAN: 1 task",
    )


def test_a_request_within_the_window_is_left_alone():
    req = _request(memory_words=50)
    assert req.fitted(TOOLS, Window(128_000, 4096)) == req.messages()


def test_working_memory_is_cut_first_and_the_rest_kept():
    req = _request()
    window = Window(4000, 1000)
    assert request_tokens(req.messages(), TOOLS) > window.limit
    fitted = req.fitted(TOOLS, window)
    assert request_tokens(fitted, TOOLS) <= window.limit
    text = "\n".join(str(m.get("content")) for m in fitted)
    assert "cut to fit the model's context window" in text
    assert "Run make check." in text and "tests run with make check" in text  # untouched
    assert fitted[-1]["content"].endswith("make the tests pass")  # the goal is still last
    assert all(balanced(str(m.get("content") or "")) for m in fitted)


def test_the_previous_exchange_is_cut_after_memory():
    req = _request(memory_words=10, result_words=3000)
    fitted = req.fitted(TOOLS, Window(4000, 1000))
    assert request_tokens(fitted, TOOLS) <= 3000
    assert "cut to fit" in fitted[-2]["content"] and fitted[-2]["role"] == "tool"


def test_a_window_too_small_for_the_fixed_parts_is_a_clear_error():
    req = Request(system="rules " * 2000, goal="g")
    with pytest.raises(AgentError, match="context window leaves 1000"):
        req.fitted(TOOLS, Window(2000, 1000))


def test_a_goal_too_long_for_the_window_says_to_shorten_the_goal():
    """A pasted issue as the goal: the fix is a shorter goal, not a setting the server's own
    window overrides."""
    req = Request(system="You are careful.", goal="word " * 3000)
    with pytest.raises(AgentError) as err:
        req.fitted(TOOLS, Window(4096, 1024))
    assert "the goal and its task take" in err.value.message and "3072" in err.value.message
    assert "shorter goal" in (err.value.hint or "") and "context_window" not in (
        err.value.hint or ""
    )


def test_an_attempts_brief_is_cut_from_its_end_after_recalled_memory_never_the_last_message():
    brief = "CURRENT TASK (1 of 2), attempt 2 of 2:\nfix it\n\nLAST FAILURE:\n" + "E  x\n" * 3000
    req = Request(
        system="You are careful.",
        goal="make the tests pass",
        recalled=fences.retrieved_memory("- fact: " + "old " * 400),
        brief=brief,
        memory="[edit m1] edited a.py\n" + "alpha beta " * 500,
        task="NOW: task 1 of 2, attempt 2 of 2: fix it\nTool calls left in this attempt: 3",
    )
    window = Window(4000, 1000)
    fitted = req.fitted(TOOLS, window)
    assert request_tokens(fitted, TOOLS) <= window.limit
    text = [str(m["content"]) for m in fitted]
    assert not any("alpha beta" in t for t in text) and not any("old old" in t for t in text)
    kept = next(t for t in text if t.startswith("CURRENT TASK (1 of 2)"))
    assert "fix it\n\nLAST FAILURE:" in kept and kept.endswith(
        "cut to fit the model's context window]"
    )
    assert fitted[-1] == req.messages()[-1]  # the step's own line and the goal, whole


def served_with(size: int) -> OpenAIChat:
    """A client of a hosted API that has not answered yet: its window is its setting, `size`."""
    return OpenAIChat(
        model="m", base_url="https://api.example.com/v1", api_key="k", context_window=size
    )


@pytest.mark.parametrize(
    "size, reserved", [(1024, 4096), (4096, 1000), (4096, 4096), (32_768, 8192), (128_000, 4096)]
)
def test_caps_made_for_the_models_own_window_are_left_as_they_are(size, reserved):
    memory, tool_output, _ = fit_window(size, 8000, 3000, reserved)
    window = Window(size, min(reserved, size // 4))  # as the run's limits have it
    assert narrowed(window, served_with(size), memory, tool_output) == (memory, tool_output)
    assert narrowed(window, served_with(size * 2), memory, tool_output) == (memory, tool_output)


def test_caps_follow_a_window_found_smaller_as_the_start_would_have_made_them():
    began = Window(128_000, 4096)
    memory, tool_output, _ = fit_window(4096, 8000, 3000, 4096)
    assert narrowed(began, served_with(4096), 8000, 3000) == (memory, tool_output) == (752, 614)
    assert narrowed(Window(4096, 1024), served_with(128_000), 8000, 3000) == (752, 614)
