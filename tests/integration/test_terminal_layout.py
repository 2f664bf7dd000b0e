"""What `agent` draws on a real pseudo-terminal at 80 and 120 columns: each text once, in the width."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from runkit import BAD_MEDIAN, GOAL, PYTEST, add_median, facts, finish, plan, task

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
    report = screen[screen.index("Run report") : screen.index("\nproof: ")].splitlines()
    assert all(line.startswith("  ") for line in report[1:]), report  # wrapped under its task
    assert f"`{PYTEST}` -> exit 0" in flat(screen)


def test_a_streamed_reply_cut_and_asked_again_shows_only_the_retry(
    fake_server, agent_env, demo_repo
):
    words = "I will add median() to calc/stats.py now, then run the tests."
    reply = {**add_median(), "content": words}
    srv = fake_server(
        [
            plan(task()),
            {**reply, "cut": 6},  # cut a few words in; the retry answers whole
            reply,
            finish(),
            facts(),
            {"content": SUMMARY, "cut": 9},
            {"content": SUMMARY},
        ]
    )
    env = {**agent_env, "AGENT_FINAL_SUMMARY": "true"}
    code, screen = agent_on_pty(
        env, demo_repo, "run", GOAL, "--yes", "--base-url", srv.url, columns=100
    )
    assert code == 0, screen
    assert flat(screen).count("retry 1 of") == 2, screen  # both streams were cut and retried
    assert flat(screen).count("I will add") == 1 and words in flat(screen), screen
    assert flat(screen).count("I added median()") == 1, screen  # drawn once, in its box
    assert SUMMARY in flat(screen), screen


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


LONG_GOAL = (
    "Refactor the parser so that quoted strings with escaped quotes are tokenised correctly "
    "and add tests for every escape sequence we support, including unicode ones"
)
FACT = (
    "The parser tests run with pytest tests/test_parser.py and need the fixtures in "
    "tests/fixtures/quotes, which hold one file per escape sequence"
)
NOTE = "remember to update the README section on quoting and the escape rules"


def cut_only_at_the_width(screen: str, text: str, columns: int) -> None:
    """`text` is on screen in full, or cut with … where a line reaches the width."""
    if text in flat(screen):
        return
    lines = [line for line in screen.splitlines() if text[:30] in line]
    assert lines, screen
    for line in lines:
        assert line.endswith("…") and len(line) >= columns - 12, (line, screen)
        assert text.startswith(line[line.index(text[:30]) : -1].rstrip()), line


@pytest.fixture
def seeded(tmp_path):
    """A repository with long-term memory (a fact with a long text) and a run's working memory."""
    from agent_cli.core.models import Episode
    from agent_cli.memory import SqliteStore, WorkingMemory
    from agent_cli.memory.embed import WordLlamaEmbedder
    from agent_cli.memory.longterm.chroma import LongTermMemory

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    mem = LongTermMemory(repo / ".agent" / "chroma", WordLlamaEmbedder())
    mem.add_fact(FACT, "harness, run 20250314-090000-bbbb")
    mem.add_episode(
        Episode(
            run_id="20250314-090000-bbbb",
            goal=LONG_GOAL,
            status="verified",
            summary="escaped quotes in the tokenizer",
            started_at="2025-03-14T09:00:00+00:00",
        )
    )
    run = repo / ".agent" / "runs" / "20250314-090000-bbbb"
    run.mkdir(parents=True)
    wm = WorkingMemory(store=SqliteStore(run / "memory.db"), embedder=None, max_tokens=300)
    wm.set_goal("quote the parser")
    wm.note("update the README", NOTE)
    wm.add("edit", "def verbose(): pass", "edit cli.py")
    state = {
        "run_id": "20250314-090000-bbbb",
        "goal": LONG_GOAL,
        "status": "verified",
        "steps": 12,
        "started_at": "2025-03-14T09:00:00+00:00",
        "updated_at": "2025-03-14T09:00:00+00:00",
        "memory": wm.export_state(),
    }
    (run / "state.json").write_text(json.dumps(state))
    return repo


@pytest.mark.parametrize("columns", [80, 120])
def test_recall_fits_the_width_with_each_text_in_full(seeded, agent_env, columns):
    code, screen = agent_on_pty(agent_env, seeded, "recall", "parser tests", columns=columns)
    assert code == 0, screen
    fits(screen, columns)
    assert FACT in flat(screen), screen
    if columns < 100:  # stacked: a header line per result, its text under it
        head = next(line for line in screen.splitlines() if "trust 1.0" in line)
        assert head.split()[1] == "fact" and "hits" in head
        assert len(screen.splitlines()) <= 12, screen


@pytest.mark.parametrize("columns", [80, 120])
def test_memory_show_fits_the_width_with_each_summary_in_full(seeded, agent_env, columns):
    code, screen = agent_on_pty(agent_env, seeded, "memory", "show", columns=columns)
    assert code == 0, screen
    fits(screen, columns)
    assert "Hot zone of run 20250314-090000-bbbb" in screen and "edit cli.py" in screen
    if columns < 100:
        assert NOTE in flat(screen), screen
        assert any(line.startswith("    remember to update") for line in screen.splitlines())
    else:
        cut_only_at_the_width(screen, NOTE, columns)


@pytest.mark.parametrize("columns", [80, 120])
def test_runs_fits_the_width_and_shows_the_goal(seeded, agent_env, columns):
    code, screen = agent_on_pty(agent_env, seeded, "runs", columns=columns)
    assert code == 0, screen
    fits(screen, columns)
    if columns < 100:
        lines = screen.splitlines()
        at = next(i for i, line in enumerate(lines) if "20250314-090000-bbbb" in line)
        assert lines[at + 1].strip() == "verified, 12 steps"  # on its own line: never cut
        assert LONG_GOAL in flat(screen), screen
    else:
        cut_only_at_the_width(screen, LONG_GOAL, columns)
