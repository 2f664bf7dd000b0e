"""What `agent` draws on a real pseudo-terminal at 80 and 120 columns: each text once, in the width."""

from __future__ import annotations

import sys

import pytest
from runkit import BAD_MEDIAN, GOAL, add_median, facts, finish, plan, task

from ttykit import Screen, run_on_pty

pytestmark = pytest.mark.slow
SUMMARY = (
    "I added median() to calc/stats.py; it sorts the values and, for an even count, returns "
    "the mean of the two middle ones. The tests in tests/test_stats.py pass now."
)


def agent_on_pty(agent_env, repo, *args: str, columns: int, answers=()) -> tuple[int, str]:
    """Run `agent ARGS` on a pty `columns` wide; (exit code, what stays on the screen)."""
    argv = [sys.executable, "-m", "agent_cli", *args]
    code, raw = run_on_pty(argv, cwd=repo, env=agent_env, columns=columns, answers=answers)
    return code, Screen(columns).feed(raw).text()


def fits(screen: str, columns: int) -> None:
    wide = [line for line in screen.splitlines() if len(line) > columns]
    assert not wide, f"lines wider than {columns}: {wide}\n{screen}"


def flat(screen: str) -> str:
    """The screen's words in order, box borders and line breaks removed."""
    return " ".join(screen.replace("│", " ").split())


@pytest.mark.parametrize("columns", [80, 120])
def test_the_streamed_closing_summary_is_on_screen_once(fake_server, agent_env, demo_repo, columns):
    srv = fake_server([plan(task()), add_median(), finish(), facts(), {"content": SUMMARY}])
    env = {**agent_env, "AGENT_FINAL_SUMMARY": "true"}
    args = ("run", GOAL, "--yes", "--base-url", srv.url)
    code, screen = agent_on_pty(env, demo_repo, *args, columns=columns)
    assert code == 0, screen
    assert srv.chat_requests[-1].get("stream"), "the summary was not streamed"
    assert flat(screen).count(SUMMARY) == 1, screen
    assert flat(screen).count("I added median()") == 1, screen
    assert "in the model's words" in screen
    fits(screen, columns)


@pytest.mark.parametrize("columns", [80, 120])
def test_the_escalation_shows_the_failure_once_each_attempts_changes_and_the_choices(
    fake_server, agent_env, demo_repo, columns
):
    srv = fake_server(
        [
            plan(task()),
            add_median(BAD_MEDIAN),
            finish("one"),
            finish("two"),
            {"content": "Not done."},
        ]
    )
    args = ("run", GOAL, "--yes", "--base-url", srv.url)
    answers = [("What now?", "q\n")]
    code, screen = agent_on_pty(agent_env, demo_repo, *args, columns=columns, answers=answers)
    assert code == 3, screen
    assert screen.count("2 failed, 2 passed") == 1, screen  # pytest's last line, once
    assert "(the same output as verify attempt 1)" in screen
    words = flat(screen)
    assert "(its output is above, under verify attempt 1)" in words
    assert (
        "What each attempt changed: attempt 1: edited calc/stats.py attempt 2: edited no files"
        in words
    )
    assert "Changes it left uncommitted: calc/stats.py | +5 -0" in words
    for choice in ("type a hint", "s: skip this task", "r [NOTE]: re-plan", "q: stop here"):
        assert choice in words.split("What to do next:")[1], screen
    fits(screen, columns)
