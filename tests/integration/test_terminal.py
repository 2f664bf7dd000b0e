"""`agent run` on a real pseudo-terminal against the loopback server: the log that stays."""

from __future__ import annotations

import sys

import pytest
from ptykit import pty_agent  # noqa: F401 (fixture)
from runkit import GOAL, add_median, finish, plan, read_stats, run_tests, state_of, task

from conftest import git
from ttykit import SPINNER_FRAMES, Screen, run_on_pty

pytestmark = pytest.mark.slow  # every test here starts the agent on a pty

TOOL_STEPS = [read_stats(), run_tests(), add_median(), run_tests(), finish("added median()")]
FORCED_DEFAULTS = {"revise_plan": {"keep": True}, "submit_facts": {"facts": []}}


def scripted(steps: list[dict]):
    """The plan, then `steps` for the task; any other forced tool gets a neutral answer."""
    queue = list(steps)

    def reply(request: dict) -> dict:
        choice, tools = request.get("tool_choice"), request.get("tools") or []
        forced = (
            choice["function"]["name"]
            if isinstance(choice, dict)
            else tools[0]["function"]["name"]
            if len(tools) == 1
            else None
        )
        if forced == "submit_plan":
            return plan(task())
        if forced in FORCED_DEFAULTS:
            return {"tool": forced, "args": FORCED_DEFAULTS[forced]}
        if not request.get("tools"):
            return {"content": "Added median()."}
        return queue.pop(0)

    return reply


@pytest.fixture
def on_pty(fake_server, agent_env, demo_repo):
    """Run `agent run GOAL --yes EXTRA...` on a pty; (exit code, screen text, raw output)."""

    def run(*extra: str, steps=TOOL_STEPS, answers=()) -> tuple[int, str, str]:
        srv = fake_server(scripted(steps))
        argv = [sys.executable, "-m", "agent_cli", "run", GOAL, "--base-url", srv.url, *extra]
        code, raw = run_on_pty(argv, cwd=demo_repo, env=agent_env, answers=answers)
        return code, Screen().feed(raw).text(), raw

    return run


def test_the_terminal_keeps_a_log_and_ends_with_how_to_take_the_work(on_pty, demo_repo):
    code, screen, raw = on_pty("--yes")
    assert code == 0, screen
    run_id = state_of(demo_repo)["run_id"]
    assert "\x1b[" in raw  # a terminal: colours and the spinner were drawn
    assert any(frame in raw for frame in SPINNER_FRAMES)
    # the spinner erased itself: none of its frames stays on screen or in the scrollback
    assert not any(frame in screen for frame in SPINNER_FRAMES), screen
    for running in (
        "planning: the model is writing the plan",
        "task 1/1: the model is working",
        "run /",
    ):  # drawn while it ran, then erased
        assert running in raw and running not in screen, running
    assert "between tasks" not in screen
    for line in (
        "step 1 read_file: calc/stats.py",
        "step 2 run: ",
        "tests/test_stats.py -> FAILED: exit 1",
        "step 3 edit_file: calc/stats.py -> +9 -0",
        "tests/test_stats.py -> exit 0",
        "step 5 finish: added median()",
        "calc/stats.py | 9 +++++++++",
        "1 file changed, 9 insertions(+)",
    ):
        assert line in screen, line
    assert screen.count("Run report") == 1 and screen.count("Acceptance command") == 1
    assert screen.rstrip().splitlines()[-2:] == [
        f"review: git diff main...agent/{run_id}",
        f"take it: git switch main && git merge agent/{run_id}",
    ]
    assert "def median" not in screen  # diffs only with --verbose
    assert git(demo_repo, "branch", "--show-current").strip() == f"agent/{run_id}"


def test_verbose_shows_each_edits_diff(on_pty):
    code, screen, _ = on_pty("--yes", "--verbose")
    assert code == 0, screen
    after = screen[screen.index("step 3 edit_file") :]
    assert "+def median(xs):" in after and "+    if not xs:" in after
    assert after.index("+def median(xs):") < after.index("step 4 run")


def test_prompts_take_the_spinner_off_the_screen_and_stay_in_the_log(on_pty):
    steps = [read_stats(), {"tool": "run", "args": {"cmd": "ls calc"}}, *TOOL_STEPS[1:]]
    code, screen, _ = on_pty(
        steps=steps, answers=[("Run this plan? [y/N]", "y\n"), ("[a]lways this command", "y\n")]
    )
    assert code == 0, screen
    assert "Run this plan? [y/N] y\n" in screen
    assert "Run `ls calc`? [y]es / [n]o / [a]lways this command y\n  step 2 run: ls calc" in screen
    assert not any(frame in screen for frame in SPINNER_FRAMES), screen
    assert screen.count("Acceptance command") == 1  # the plan, shown once for its approval


def test_the_models_words_stream_in_under_the_task(on_pty):
    words = "Let me look at the stats module first."
    steps = [{**read_stats(), "content": words}, *TOOL_STEPS[1:]]
    code, screen, raw = on_pty("--yes", steps=steps)
    assert code == 0, screen
    assert f"\n    {words}\n  step 1 read_file: calc/stats.py\n" in screen
    assert "\x1b[2m" in raw  # dim


def test_ctrl_c_at_a_command_prompt_keeps_the_question_and_brings_no_spinner_back(
    pty_agent, fake_server, demo_repo
):
    srv = fake_server(scripted([read_stats(), {"tool": "run", "args": {"cmd": "ls calc"}}]))
    live = {"NO_COLOR": "", "TERM": "xterm-256color"}  # colours and the spinner
    agent = pty_agent("run", GOAL, "--base-url", srv.url, cwd=demo_repo, env=live)
    agent.expect("Run this plan? [y/N]")
    agent.type("y\n")
    agent.expect("[a]lways this command")
    agent.type("\x03")
    assert agent.wait() == 130, agent.text
    raw = agent.buffer
    asked = raw.rindex("[a]lways this command")
    assert not any(frame in raw[asked:] for frame in SPINNER_FRAMES), raw[asked:]
    screen = Screen().feed(raw).text()
    assert "Run `ls calc`? [y]es / [n]o / [a]lways this command ^C\n" in screen, screen
    assert raw.rfind("\x1b[?25h") > raw.rfind("\x1b[?25l")  # the cursor is shown at the end
    assert state_of(demo_repo)["status"] == "interrupted"
