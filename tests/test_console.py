"""The run console: JSON lines, plain text, the live view, the report, and the prompts."""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
import sys
import termios
import textwrap
import threading
import time

import pytest
from rich.console import Console

from agent_cli.core.events import (
    BudgetExhausted,
    Escalated,
    HookRan,
    LoopDetected,
    Notice,
    PlanMade,
    RunDone,
    RunStarted,
    TaskDone,
    TaskStarted,
    ToolCalled,
    ToolRan,
    Verified,
)
from agent_cli.ui.console import confirmed, make_console, pick_mode
from agent_cli.ui.render import MODEL_SUMMARIES
from ttykit import Screen

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
MARKUP_GOAL = "fix [bold]parser[/] and [red]"
PLAN = PlanMade(
    goal="add median()",
    success_criteria="tests pass",
    accept_cmds=["make lint"],
    tasks=[
        {
            "goal": "add median()",
            "acceptance": "tests pass",
            "acceptance_cmd": "pytest -q",
            "status": "pending",
            "attempts": 0,
        },
        {
            "goal": MARKUP_GOAL,
            "acceptance": "the parser handles [/]",
            "acceptance_cmd": None,
            "status": "pending",
            "attempts": 0,
        },
    ],
)
ESCALATED = Escalated(
    index=1,
    goal=MARKUP_GOAL,
    summary="I fixed it [/] honestly",
    reason="exit 1\nE   AssertionError [bold]boom",
    next_steps="Look at tests/test_parser.py, then run `agent run --resume`.",
)


def run_events() -> list:
    """A whole run: one task verified on its second attempt, one escalated."""
    return [
        RunStarted(
            run_id="r1", goal="add median()", repo="/tmp/repo", branch="agent/r1", base="main"
        ),
        PLAN,
        TaskStarted(index=0, goal="add median()", attempt=1),
        ToolCalled(index=0, step=1, name="run", arguments='{"cmd": "pytest -q"}'),
        ToolRan(
            index=0,
            step=1,
            name="run",
            ok=True,
            summary="exit 1",
            prompt_tokens=100,
            completion_tokens=20,
            cost_usd=0.001,
        ),
        ToolCalled(index=0, step=2, name="edit_file", arguments='{"path": "stats.py"}'),
        ToolRan(
            index=0,
            step=2,
            name="edit_file",
            ok=False,
            summary="\x1b[31mold not found\x1b[0m",
            prompt_tokens=50,
            completion_tokens=10,
            cost_usd=0.0005,
        ),
        Verified(
            index=0,
            attempt=1,
            passed=False,
            judge="command",
            command="pytest -q",
            exit_code=1,
            reason="1 failed",
        ),
        Notice(text="retrying [task 1] with the failure"),
        TaskStarted(index=0, goal="add median()", attempt=2),
        Verified(
            index=0, attempt=2, passed=True, judge="command", command="pytest -q", exit_code=0
        ),
        TaskDone(
            index=0,
            status="verified",
            attempts=2,
            commit="abc123def456",
            summary="Added median() [green]and it works[/]",
            diff_stat=" calc/stats.py | 9 +++++++++\n 1 file changed, 9 insertions(+)",
        ),
        TaskStarted(index=1, goal=MARKUP_GOAL, attempt=1),
        Verified(index=1, attempt=2, passed=False, judge="model", reason="not fixed"),
        ESCALATED,
        TaskDone(index=1, status="rejected", attempts=2),
        BudgetExhausted(budget="max_steps", used=40, limit=40),
        Verified(
            index=-1, attempt=1, passed=False, judge="command", command="make lint", exit_code=2
        ),
        RunDone(
            run_id="r1",
            status="escalated",
            exit_code=3,
            steps=2,
            prompt_tokens=150,
            completion_tokens=30,
            cost_usd=0.0015,
            branch="agent/r1",
            base="main",
            message="task 2 needs you",
            tasks=[
                {
                    "goal": "add median()",
                    "status": "verified",
                    "attempts": 2,
                    "acceptance_cmd": "pytest -q",
                    "exit_code": 0,
                    "commit": "abc123def456",
                },
                {
                    "goal": MARKUP_GOAL,
                    "status": "rejected",
                    "attempts": 2,
                    "acceptance_cmd": "python -m parser_check",
                    "exit_code": 7,
                },
            ],
        ),
    ]


def render(mode: str, events=None, **kwargs) -> tuple[str, str]:
    """Emit `events` (default: a whole run) in `mode`; return (stdout, stderr) text."""
    out, err = io.StringIO(), io.StringIO()
    rc = make_console(mode, out, err, **kwargs)
    for ev in run_events() if events is None else events:
        rc.emit(ev)
    rc.close()
    return out.getvalue(), err.getvalue()


def test_json_mode_prints_only_event_lines_on_stdout():
    out, err = render("json")
    lines = out.splitlines()
    assert [json.loads(line)["event"] for line in lines] == [e.event for e in run_events()]
    assert json.loads(lines[-1])["exit_code"] == 3
    assert err == ""


def test_json_mode_prompts_go_to_stderr():
    out, err = io.StringIO(), io.StringIO()
    rc = make_console("json", out, err, stdin=io.StringIO("y\na\n"))
    assert rc.approve_plan(PLAN) is True
    assert rc.approve_command("pytest -q") == "a"
    assert out.getvalue() == ""
    assert "Run this plan? [y/N]" in err.getvalue() and "pytest -q" in err.getvalue()


def test_plain_mode_lines_and_no_escape_codes():
    out, _ = render("plain")
    assert not ANSI.search(out)
    assert "[task 1/2] attempt 1: add median()" in out
    assert "  step 1 run: pytest -q -> exit 1" in out
    assert "  step 3 read_file: calc/stats.py\n" in render("plain", READ)[0]
    assert "  step 2 edit_file: stats.py -> FAILED: old not found" in out
    assert "verify attempt 1: `pytest -q` -> exit 1: did not pass" in out
    assert "[task 1/2] verified after 2 attempts (commit abc123def4)" in out
    assert "budget ran out: 40 of 40 tool calls used (raise --max-steps" in out
    assert "final check: `make lint` -> exit 2: did not pass" in out


def test_plain_plan_table_lists_acceptance_commands(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # wide enough that no cell wraps, whatever runs us
    out, _ = render("plain", [PLAN])
    assert "plan: 2 tasks for: add median()" in out
    assert re.search(r"\| 1 \| add median\(\)\s+\| pytest -q", out)
    # a task without a command is judged by the user's --accept, not by the model
    assert "make lint (your --accept)" in out and "the model judges" not in out
    alone, _ = render("plain", [PLAN.model_copy(update={"accept_cmds": []})])
    assert "the model judges: the parser handles [/]" in alone


def test_the_plan_table_says_nothing_judges_a_task_without_command_or_criteria(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    bare = {"goal": "tidy up", "acceptance": "  ", "acceptance_cmd": None}
    out, _ = render("plain", [PLAN.model_copy(update={"accept_cmds": [], "tasks": [bare]})])
    assert re.search(r"\| 1 \| tidy up\s+\| \(none; nothing judges it: it cannot pass\)", out)
    assert "the model judges" not in out, out
    yours, _ = render("plain", [PLAN.model_copy(update={"tasks": [bare]})])
    assert "make lint (your --accept)" in yours


def test_plain_report_shows_exit_codes_and_model_words_apart():
    out, _ = render("plain")
    report = out[out.index("Run report") :]
    assert "  1. add median()\n     verified, 2 attempts; `pytest -q` -> exit 0" in report
    assert "     rejected, 2 attempts; `python -m parser_check` -> exit 7" in report
    assert "2 steps, 150 prompt + 30 completion tokens, $0.0015" in report
    table, words = report.split(MODEL_SUMMARIES)
    assert "Added median()" not in table
    assert "task 1: Added median() [green]and it works[/]" in words
    assert "run r1 escalated (exit code 3): task 2 needs you" in words


def test_the_log_ends_with_how_to_review_and_take_the_work():
    lines = render("plain")[0].rstrip().splitlines()
    assert lines[-2:] == [
        "review: git diff main...agent/r1",
        "take it: git switch main && git merge agent/r1",
    ]
    assert render("plain")[0].count("Run report") == 1


def test_nothing_committed_says_so_instead_of_a_merge():
    done = run_events()[-1].model_copy(
        update={"tasks": [{"goal": "g", "status": "rejected", "attempts": 2, "commit": None}]}
    )
    out, _ = render("plain", [done])
    assert out.rstrip().splitlines()[-1] == "branch: agent/r1 (nothing committed on it)"
    assert "git merge" not in out


def test_a_verified_task_shows_its_diff_stat():
    out, _ = render("plain")
    assert (
        "[task 1/2] verified after 2 attempts (commit abc123def4)\n"
        "    calc/stats.py | 9 +++++++++\n    1 file changed, 9 insertions(+)\n"
    ) in out


READ = [
    ToolCalled(index=0, step=3, name="read_file", arguments='{"path": "calc/stats.py"}'),
    ToolRan(index=0, step=3, name="read_file", ok=True, summary="read calc/stats.py"),
]
EDIT = [
    ToolCalled(index=0, step=3, name="edit_file", arguments='{"path": "calc/stats.py"}'),
    ToolRan(
        index=0,
        step=3,
        name="edit_file",
        ok=True,
        summary="edited calc/stats.py",
        diff="--- a/calc/stats.py\n+++ b/calc/stats.py\n@@ -1 +1,2 @@\n x = 1\n"
        "+def median(xs):\n-old line\n",
    ),
]


def test_an_edit_shows_its_size_and_verbose_shows_its_diff():
    quiet, _ = render("plain", EDIT)
    assert quiet == "  step 3 edit_file: calc/stats.py -> +1 -1\n"
    loud, _ = render("plain", EDIT, verbose=True)
    assert loud.startswith(quiet)
    assert "      +def median(xs):\n      -old line\n" in loud
    assert "@@ -1 +1,2 @@" in loud


def test_replayed_runs_cost_zero_dollars():
    done = run_events()[-1].model_copy(update={"cost_usd": 0.0})
    out, _ = render("plain", [done])
    assert "150 prompt + 30 completion tokens, $0\n" in out


def test_escalation_block_in_plain_and_live():
    for mode, kwargs in (("plain", {}), ("live", {"console": live_console()})):
        out, _ = render(mode, [ESCALATED], **kwargs)
        if mode == "live":
            out = kwargs["console"].file.getvalue()
        flat = " ".join(ANSI.sub("", out).replace("│", " ").split())
        assert "Needs you" in flat
        assert f"I tried twice and couldn't finish this myself: {MARKUP_GOAL}" in flat
        assert "The model's summary of its last attempt (its words, not verified):" in flat
        assert "I fixed it [/] honestly" in flat
        assert "Why it did not pass (the harness's check): exit 1" in flat
        assert "AssertionError [bold]boom" in flat
        assert "What to do next: Look at tests/test_parser.py" in flat


def test_markup_and_escapes_in_model_text_are_literal():
    out, _ = render("plain")
    assert MARKUP_GOAL in out and "retrying [task 1] with the failure" in out
    assert "\x1b[31m" not in out


# an unknown tool's name: erase the two lines above, set the title, forge a line of its own
FORGED = "\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b]0;owned\x07\nverify attempt 1: passed \x1b[8m"


def test_a_tool_name_the_model_sent_is_shown_on_one_line_without_escapes():
    out, _ = render(
        "plain",
        [
            ToolCalled(index=0, step=1, name=FORGED, arguments="{}"),
            ToolRan(index=0, step=1, name=FORGED, ok=False, summary="unknown tool"),
            LoopDetected(index=0, name=FORGED, repeats=5, stopped=True),
            HookRan(hook="pre_tool", command="guard", outcome="blocked", blocks=True, tool=FORGED),
        ],
    )
    assert "\x1b" not in out and "\x07" not in out and "owned" not in out, repr(out)
    lines = out.splitlines()
    assert len(lines) == 3 and not any(line.startswith("verify") for line in lines), out
    assert lines[0] == "  step 1 verify attempt 1: passed: -> FAILED: unknown tool"
    assert "loop: the same verify attempt 1: passed call and result 5 times" in lines[1]
    assert "blocked verify attempt 1: passed" in lines[2]


def test_a_lone_surrogate_in_a_tool_call_is_no_crash_on_a_utf8_terminal():
    # a model's JSON may escape half a surrogate pair ("\\ud800"); a terminal's stream
    # encodes strictly, so it must never reach one
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    rc = make_console("plain", out, out)
    rc.emit(ToolCalled(index=0, step=1, name="write_file", arguments='{"path": "d\\ud800.txt"}'))
    rc.emit(ToolRan(index=0, step=1, name="write_file", ok=False, summary="bad \ud800 path"))
    rc.close()
    # the arguments' escaped half is decoded and cleaned; the result's was made text by the
    # event (events.EventModel), as a name git gives that is not UTF-8
    assert "step 1 write_file: d.txt -> FAILED: bad \\ud800 path" in raw.getvalue().decode()


def live_console() -> Console:
    """A rich Console that believes it is a terminal, writing into memory."""
    return Console(file=io.StringIO(), force_terminal=True, width=110, color_system="truecolor")


def test_live_mode_renders_and_ends_with_the_report():
    con = live_console()
    stdout = sys.stdout
    out, err = render("live", console=con)
    text = con.file.getvalue()
    assert out == "" and err == "" and sys.stdout is stdout
    assert "\x1b[" in text
    plain = ANSI.sub("", text)
    assert "step 2" in plain and "edit_file" in plain and "$0.0015" in plain
    assert MARKUP_GOAL in plain and "Needs you" in plain
    tail = plain[plain.rindex("Run report") :]
    assert "python -m parser_check" in tail and MODEL_SUMMARIES in tail
    assert "run r1 escalated (exit code 3)" in tail


def test_live_view_pauses_for_a_prompt_and_resumes():
    con = live_console()
    rc = make_console("live", io.StringIO(), io.StringIO(), stdin=io.StringIO("y\n"), console=con)
    for ev in run_events()[:4]:
        rc.emit(ev)
    assert rc._live is not None and rc._live.is_started
    assert rc.approve_command("rm -rf [bold]build") == "y"
    assert rc._live is not None and rc._live.is_started
    rc.close()
    rc.close()
    assert "Run `rm -rf [bold]build`? [y]es / [n]o / [a]lways this command" in ANSI.sub(
        "", con.file.getvalue()
    )


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("y\n", True),
        ("yes\n", True),
        ("n\n", False),
        ("\n", False),
        ("", False),
        ("maybe\ny\n", True),
        ("x\n" * 10, False),
    ],
)
def test_approve_plan(typed, expected):
    out = io.StringIO()
    rc = make_console("plain", out, io.StringIO(), stdin=io.StringIO(typed))
    assert rc.approve_plan(PLAN) is expected
    text = out.getvalue()
    assert "pytest -q" in text and "Run this plan? [y/N]" in text
    assert ("please answer y or n" in text) == (typed.startswith(("maybe", "x")))


def test_approve_plan_does_not_repeat_a_plan_just_shown():
    out = io.StringIO()
    rc = make_console("plain", out, io.StringIO(), stdin=io.StringIO("y\n"))
    rc.emit(PLAN)
    assert rc.approve_plan(PLAN) is True
    assert out.getvalue().count("plan: 2 tasks") == 1


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("y\n", "y"),
        ("n\n", "n"),
        ("a\n", "a"),
        ("always\n", "a"),
        ("what\n\ny\n", "y"),
        ("", "n"),
        ("?\n" * 10, "n"),
    ],
)
def test_approve_command(typed, expected):
    out = io.StringIO()
    rc = make_console("plain", out, io.StringIO(), stdin=io.StringIO(typed))
    assert rc.approve_command("pytest -q") == expected
    asked = out.getvalue().count("Run `pytest -q`? [y]es / [n]o / [a]lways this command")
    assert asked == {"what\n\ny\n": 3, "?\n" * 10: 5}.get(typed, 1)


def test_pick_mode(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    master, slave = os.openpty()
    with open(slave, "w") as tty:
        assert pick_mode(True, tty) == "json"
        assert pick_mode(False, tty) == "live"
        assert pick_mode(False, io.StringIO()) == "plain"
        monkeypatch.setenv("TERM", "dumb")
        assert pick_mode(False, tty) == "plain"
        monkeypatch.setenv("TERM", "xterm")
        monkeypatch.setenv("NO_COLOR", "1")
        assert pick_mode(False, tty) == "plain"
    os.close(master)


def test_make_console_rejects_an_unknown_mode():
    with pytest.raises(ValueError):
        make_console("fancy")


SCRIPT = textwrap.dedent("""
    import sys
    from agent_cli.ui.console import confirmed, make_console, pick_mode
    from agent_cli.core.events import RunDone, RunStarted, TaskStarted
    rc = make_console(pick_mode(False, sys.stdout))
    print(rc.mode, flush=True)
    rc.emit(RunStarted(run_id="r9", goal="g", repo=".", branch="agent/r9"))
    rc.emit(TaskStarted(index=0, goal="only [bold]task", attempt=1))
    print("stray print from the loop", flush=True)
    rc.emit(RunDone(run_id="r9", status="verified", exit_code=0, steps=1, prompt_tokens=1,
                    completion_tokens=1, cost_usd=0.0, tasks=[{"goal": "only [bold]task",
                    "status": "verified", "attempts": 1, "acceptance_cmd": "true",
                    "exit_code": 0}]))
    rc.close()
""")


@pytest.mark.slow
def test_live_mode_on_a_real_terminal():
    master, slave = os.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {
        "TERM": "xterm-256color",
        "COLUMNS": "100",
        "LINES": "30",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=slave,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=30) == 0
    os.close(master)
    text = ANSI.sub("", b"".join(chunks).decode())
    assert text.lstrip().startswith("live")
    assert "stray print from the loop" in text and "only [bold]task" in text
    assert "run r9 verified (exit code 0)" in text


def test_streamed_words_show_dim_under_the_task_and_end_before_the_next_line():
    con = live_console()
    rc = make_console("live", io.StringIO(), io.StringIO(), console=con)
    rc.emit(TaskStarted(index=0, goal="add median()", attempt=1))
    for delta in ("I will read", " the file.\nThen \x1b[31medit", " it."):
        rc.stream_text(delta)
    rc.emit(READ[0])
    rc.emit(READ[1])
    rc.stream_text("Done")
    rc.close()
    raw = con.file.getvalue()
    assert "\x1b[2mI will read" in raw  # dim
    screen = Screen().feed(raw).text()
    assert screen == (
        "[task 1/1] attempt 1: add median()\n"
        "    I will read the file.\n"
        "    Then edit it.\n"
        "  step 3 read_file: calc/stats.py\n"
        "    Done\n"
    )


@pytest.mark.parametrize("mode", ["plain", "json"])
def test_streamed_words_are_not_printed_off_a_terminal(mode):
    out, err = io.StringIO(), io.StringIO()
    rc = make_console(mode, out, err)
    rc.stream_text("I will read the file.")
    rc.close()
    assert out.getvalue() == "" and err.getvalue() == ""


def test_a_task_a_hook_refused_after_its_command_passed_says_so_in_the_report():
    from rich.console import Console as RichConsole

    from agent_cli.core.events import RunDone
    from agent_cli.ui.render import _report_tasks

    done = RunDone(
        run_id="r1", status="escalated", exit_code=3, steps=2, prompt_tokens=0,
        completion_tokens=0, cost_usd=0.0, message="task 1 needs you",
        tasks=[{"goal": "add median()", "attempts": 2, "status": "rejected",
                "acceptance_cmd": "pytest -q", "exit_code": 0}],
    )  # fmt: skip
    from agent_cli.core.events import Verified
    from agent_cli.ui.progress import RunState

    def shown(state: RunState) -> str:
        console = RichConsole(width=120, record=True, color_system=None)
        console.print(_report_tasks(done, state))
        return console.export_text()

    state = RunState()
    state.apply(
        Verified(index=0, attempt=2, passed=False, judge="hook", command="pytest -q", exit_code=0)
    )
    assert "`pytest -q` -> exit 0, then refused by a task_verified hook" in shown(state)
    # no hook refused it here (the run stopped first, its commit refused): none is named
    assert "`pytest -q` -> exit 0, not verified" in shown(RunState())
    assert "hook" not in shown(RunState())


def test_an_attempt_that_ended_before_its_check_says_nothing_judged_it():
    from agent_cli.ui.progress import verify_line

    stuck = Verified(index=0, attempt=1, passed=False, judge="none", reason="stuck repeating run")
    assert verify_line(stuck) == "verify attempt 1: nothing judged it: did not pass"
    by_model = Verified(index=0, attempt=2, passed=True, judge="model", reason="ok")
    assert verify_line(by_model) == "verify attempt 2 (model judge): passed"


def test_a_check_that_timed_out_is_said_so_not_called_not_run():
    from rich.console import Console as RichConsole

    from agent_cli.core.events import RunDone
    from agent_cli.ui.progress import RunState, verify_line
    from agent_cli.ui.render import _report_tasks

    cmd = "sh -c 'sleep 100'"
    slow = Verified(
        index=0, attempt=1, passed=False, judge="command", command=cmd,
        reason=f"`{cmd}` timed out after 2 s\n",
    )  # fmt: skip
    assert verify_line(slow) == f"verify attempt 1: `{cmd}` -> timed out: did not pass"
    never = slow.model_copy(update={"reason": "the work tree could not be restored"})
    assert verify_line(never) == f"verify attempt 1: `{cmd}` -> not run: did not pass"
    done = RunDone(
        run_id="r1", status="escalated", exit_code=3, steps=2, prompt_tokens=0,
        completion_tokens=0, cost_usd=0.0, message="task 1 needs you",
        tasks=[{"goal": "g", "attempts": 1, "status": "rejected", "acceptance_cmd": cmd,
                "exit_code": None}],
    )  # fmt: skip
    for ev, said in ((slow, "timed out"), (never, "not run")):
        state = RunState()
        state.apply(ev)
        console = RichConsole(width=120, record=True, color_system=None)
        console.print(_report_tasks(done, state))
        assert f"`{cmd}` -> {said}" in console.export_text()


def test_a_narrow_plan_table_folds_a_long_command_and_cuts_nothing():
    """Approving the plan approves its commands: each is shown whole at any width."""
    from rich.console import Console as RichConsole

    from agent_cli.core.events import planned
    from agent_cli.core.models import Task
    from agent_cli.ui.render import plan_table

    cmd = "python -m pytest -q --basetemp=/tmp/probe_under_the_users_home/tests/test_stats.py"
    table = plan_table(planned([Task(goal="add median()", acceptance_cmd=cmd)]), plain=True)
    for width in (40, 60, 80):
        console = RichConsole(width=width, record=True, color_system=None)
        console.print(table)
        lines = console.export_text().splitlines()
        body = lines[next(i for i, line in enumerate(lines) if "-+-" in line) + 1 :]
        cells = [row[3].strip() for row in (line.split("|") for line in body) if len(row) == 5]
        assert "".join(cells).replace(" ", "") == cmd.replace(" ", ""), (width, cells)


def test_a_live_run_keeps_every_column_of_agent_runs_and_says_where_it_is_below():
    from rich.console import Console as RichConsole

    from agent_cli.agent.run.live import shown
    from agent_cli.ui.render import runs_view

    tree = "/home/someone/projects/calc/.agent/worktrees/20261206-101010-abcd"
    rows = [
        {"run_id": "20261205-090000-0001", "started_at": "2026-12-05T09:00:00+00:00",
         "status": "verified", "steps": 12, "goal": "Add a median function to calc/stats.py"},
        shown({"run_id": "20261206-101010-abcd", "started_at": "2026-12-06T10:10:10+00:00",
               "status": "running", "steps": 1, "goal": "Add a mode function to calc/stats.py",
               "live": True, "pid": 4242, "task": 1, "tasks": 2, "step": 3, "worktree": tree}),
    ]  # fmt: skip
    for width in (100, 120, 160):
        console = RichConsole(width=width, record=True, color_system=None)
        console.print(runs_view(rows))
        text = console.export_text()
        assert "steps" in text and "goal" in text, (width, text)
        assert "Add a median function" in text and "Add a mode function" in text, (width, text)
        flat = " ".join(text.split())  # the path whole, on the next line when it must
        assert f"20261206-101010-abcd live: pid 4242, task 1/2, step 3, in {tree}" in flat
    for width in (40, 60):
        console = RichConsole(width=width, record=True, color_system=None)
        console.print(runs_view(rows))
        flat = " ".join(console.export_text().split())
        assert "verified, 12 steps" in flat and "live, 1 step: pid 4242" in flat, (width, flat)
        assert "pid 4242" in flat and "Add a mode function" in flat


def test_a_run_still_planning_shows_in_agent_runs_as_starting_with_its_pid():
    from rich.console import Console as RichConsole

    from agent_cli.agent.run.live import shown
    from agent_cli.ui.render import runs_view

    rows = [
        shown({"run_id": None, "started_at": "2026-12-06T10:10:10+00:00", "status": "starting",
               "steps": 0, "goal": "", "live": True, "pid": 4242, "worktree": None}),
    ]  # fmt: skip
    for width in (40, 120):
        console = RichConsole(width=width, record=True, color_system=None)
        console.print(runs_view(rows))
        flat = " ".join(console.export_text().split())
        assert "starting" in flat and "pid 4242" in flat, (width, flat)
        assert "live" not in flat, (width, flat)
    console = RichConsole(width=120, record=True, color_system=None)
    console.print(runs_view(rows))
    assert "(new) starting: pid 4242" in " ".join(console.export_text().split())


def test_an_edit_too_large_to_diff_is_said_so_not_as_no_change():
    from agent_cli.ui.progress import edit_size

    diff = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n a\n-b\n+c\n+d"
    assert edit_size(diff) == "+2 -1"
    huge = (
        "big.json: 0 -> 17000000 characters; the diff of a file this large is not shown "
        "(read a range of it to check the change)"
    )
    shown = edit_size(huge)
    assert shown.startswith("big.json: 0 -> 17000000 characters") and "+0 -0" not in shown


def test_a_streamed_closing_summary_kept_only_in_part_is_drawn_once_in_its_box():
    # the run keeps the first MAX_CHARS characters of a longer summary: what streamed is longer
    # than the box's text, and is still the same summary, so its preview goes and the box stays
    from agent_cli.agent.ask.closing import MAX_CHARS
    from agent_cli.core.events import FinalSummary

    con = live_console()
    rc = make_console("live", io.StringIO(), io.StringIO(), console=con)
    words = " ".join(f"word{i}" for i in range(MAX_CHARS // 4))
    for at in range(0, len(words), 50):
        rc.stream_text(words[at : at + 50])
    rc.emit(FinalSummary(text=words[:MAX_CHARS].strip()))
    rc.close()
    screen = " ".join(Screen().feed(con.file.getvalue()).text().replace("│", " ").split())
    assert screen.count("word1 word2 word3") == 1, screen
    assert "word10 word11" in screen


def test_streamed_words_taller_than_the_terminal_show_their_newest_lines():
    con = Console(file=io.StringIO(), force_terminal=True, width=60, height=10)
    rc = make_console("live", io.StringIO(), io.StringIO(), console=con)
    rc.emit(TaskStarted(index=0, goal="add median()", attempt=1))
    words = "".join(f"line {i} of the reply\n" for i in range(30))
    for at in range(0, len(words), 40):
        rc.stream_text(words[at : at + 40])
    preview = Screen(60).feed(con.file.getvalue()).text().splitlines()[1:]
    assert len(preview) <= 9, preview  # within the terminal's 10 rows, the cursor's included
    assert preview[0].strip() == "… 22 more lines above", preview
    assert preview[-1].strip() == "line 29 of the reply", preview
    rc.emit(READ[0])
    rc.close()
    screen = Screen(60).feed(con.file.getvalue()).text()
    assert all(f"line {i} of the reply" in screen for i in range(30)), screen  # kept whole
    assert "more lines above" not in screen, screen


# -- what is entered at a question on a real pseudo-terminal ------------------------------------


@pytest.fixture
def terminal():
    """A real pseudo-terminal: (the keyboard's end, the program's stdin on it, its output)."""
    keys, fd = os.openpty()
    stdin = open(fd, encoding="utf-8", closefd=False)  # as Python opens sys.stdin
    output = open(fd, "w", encoding="utf-8", closefd=False)
    yield keys, stdin, output
    stdin.close()
    output.close()
    os.close(fd)
    os.close(keys)


def on_screen(keys: int) -> str:
    """What the program wrote to the terminal (and the terminal echoed) so far."""
    got = b""
    while select.select([keys], [], [], 0.05)[0]:
        got += os.read(keys, 65536)
    return ANSI.sub("", got.decode(errors="replace")).replace("\r", "")


def type_once_shown(keys: int, shown: io.StringIO, needle: str, text: str) -> None:
    """Type `text` once `needle` shows, as a person answering a question asked again."""

    def answer() -> None:
        end = time.monotonic() + 10
        while needle not in shown.getvalue() and time.monotonic() < end:
            time.sleep(0.01)
        os.write(keys, text.encode())

    threading.Thread(target=answer, daemon=True).start()


@pytest.mark.parametrize(
    "pasted, hint",
    [
        (
            "Use sorted(xs).\n\nAlso raise ValueError.\n",
            "Use sorted(xs).\n\nAlso raise ValueError.",
        ),
        ("first line\nlast, no newline", "first line\nlast, no newline"),
    ],
    ids=["a-blank-line-inside", "no-newline-at-the-end"],
)
def test_a_paste_at_the_escalation_question_is_one_hint_and_leaves_nothing_typed(
    terminal, pasted, hint
):
    keys, stdin, _ = terminal
    out = io.StringIO()
    rc = make_console("plain", out, io.StringIO(), stdin=stdin)
    os.write(keys, pasted.encode())  # a paste comes at once
    assert rc.ask_escalation(ESCALATED) == hint  # every line, as pasted
    assert termios.tcgetattr(stdin)[3] & termios.ICANON  # the terminal's line mode is back
    os.write(keys, b"q\n")
    assert rc.ask_escalation(ESCALATED) == "q"  # no line of the paste answers this one
    assert not select.select([stdin], [], [], 0)[0]  # nor is left for the shell
    assert out.getvalue().count("What now?") == 2


@pytest.mark.parametrize("ask", ["plan", "command"])
def test_a_paste_at_a_yes_no_question_answers_nothing_and_it_is_asked_again(terminal, ask):
    keys, stdin, _ = terminal
    out = io.StringIO()
    rc = make_console("plain", out, io.StringIO(), stdin=stdin)
    os.write(keys, b"y\nrm -rf build\n")  # pasted: no line of it approves anything
    type_once_shown(keys, out, "2 lines came at once (a paste): answer", "n\n")
    answer = rc.approve_plan(PLAN) if ask == "plan" else rc.approve_command("make")
    assert answer in (False, "n"), out.getvalue()
    assert not select.select([stdin], [], [], 0)[0]


def test_answers_typed_ahead_answer_the_next_questions_in_turn(terminal):
    """Lines that are each an answer word, come at once, are answers typed ahead, not a
    paste: each answers one question; an escalation question takes none of them."""
    keys, stdin, _ = terminal
    out = io.StringIO()
    rc = make_console("plain", out, io.StringIO(), stdin=stdin)
    os.write(keys, b"y\nn\na\ny\n")
    assert rc.approve_plan(PLAN) is True
    assert [rc.approve_command(c) for c in ("one", "two")] == ["n", "a"]
    os.write(keys, b"q\n")
    assert rc.ask_escalation(ESCALATED) == "q"  # the `y` left over is no hint
    assert "1 answer(s) typed ahead are not taken for this one" in out.getvalue()
    assert not select.select([stdin], [], [], 0)[0]


def test_end_of_input_at_a_question_is_logged_with_the_answer_it_stands_for(terminal):
    # `agent run ... > run.log`: the questions on the terminal (stderr), the log in the file
    keys, stdin, tty = terminal
    log = io.StringIO()
    rc = make_console("plain", log, tty, stdin=stdin)
    os.write(keys, b"\x04")  # Ctrl-D
    assert rc.approve_command("echo one > one.txt") == "n"
    os.write(keys, b"\x04")
    assert rc.ask_escalation(ESCALATED) == "q"
    logged = log.getvalue()
    assert "Run `echo one > one.txt`? [y]es / [n]o / [a]lways this command n (end of input)\n" in (
        logged
    )
    assert "What now? (no hints left for this task) s, r [NOTE] or q: q (end of input)\n" in (
        logged
    )


def test_with_the_log_in_a_file_the_notice_why_a_question_is_asked_again_shows_with_it(
    terminal,
):
    keys, stdin, tty = terminal
    log = io.StringIO()
    rc = make_console("plain", log, tty, stdin=stdin)
    rc.emit(Notice(text="retrying the request"))  # the log's alone: no answer led to it
    rc.emit(ESCALATED)
    os.write(keys, b"r split it\n")
    assert rc.ask_escalation(ESCALATED) == "r split it"
    rc.emit(Notice(text="the model kept the plan; task 2 is still rejected"))
    os.write(keys, b"q\n")
    assert rc.ask_escalation(ESCALATED) == "q"
    screen = on_screen(keys)
    kept = screen.index("-- the model kept the plan; task 2 is still rejected\n")
    assert screen.index("r split it") < kept < screen.rindex("What now?"), screen
    assert "retrying the request" not in screen and "retrying the request" in log.getvalue()


def test_a_paste_at_a_confirmation_is_no_yes_and_leaves_nothing_typed(terminal, monkeypatch):
    keys, stdin, tty = terminal
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", tty)
    os.write(keys, b"y\nrm -rf build\n")
    assert confirmed("move the branch back?") is False
    assert not select.select([stdin], [], [], 0)[0]  # nothing left for the shell to run
    os.write(keys, b"y\n")
    assert confirmed("move the branch back?") is True  # a line typed alone still is
