"""A hook's line in the terminal log: shown when it blocks or fails, never when it went on."""

from __future__ import annotations

from agent_cli.core.events import HookRan
from agent_cli.ui.progress import RunState
from agent_cli.ui.render import event_line


def line(**fields: object) -> str | None:
    ev = HookRan(hook="pre_tool", command="python scripts/no_migrations.py", **fields)
    shown = event_line(ev, RunState())
    return None if shown is None else shown.plain


def test_a_hook_that_went_on_has_no_line():
    assert line(outcome="ok", exit_code=0, tool="write_file") is None


def test_a_blocking_hook_says_what_it_blocked_and_why():
    shown = line(
        outcome="blocked", blocks=True, exit_code=2, tool="write_file", message="no\x1b[31m\nmore"
    )
    assert shown == "  hook pre_tool `python scripts/no_migrations.py` blocked write_file: no"


def test_a_failed_and_a_timed_out_hook_say_so():
    assert line(outcome="failed", exit_code=1, message="exit 1: boom").endswith(
        "failed: exit 1: boom"
    )
    timed = line(outcome="timed_out", blocks=True, tool="run", message="the hook did not finish")
    assert "timed out, blocking run: the hook did not finish" in timed
    ev = HookRan(hook="task_verified", command="x", outcome="blocked", blocks=True, message="why")
    assert "blocked the task's verification: why" in event_line(ev, RunState()).plain
