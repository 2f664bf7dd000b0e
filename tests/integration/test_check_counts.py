"""End to end: a check is read by its test runner's counts, not by its exit code alone.

The code under test (calc/stats.py, the only file the model changes) decides what the check
prints and how it exits: an `atexit` function that exits 0 after pytest counted failures, or a
median() that skips or xfails the tests that call it. Neither is a pass; fixing the failing
tests while adding one skipped on this platform is.
"""

from __future__ import annotations

import sys

import pytest
from runkit import GOAL, PYTEST, add_median, events_of, facts, finish, plan, state_of, task

from conftest import git

# Every run here runs its acceptance command, `python -m pytest`.
pytestmark = pytest.mark.slow

EXIT_0_AT_EXIT = "\n\nimport atexit as _a, os as _o\n_a.register(lambda: _o._exit(0))\n"
SKIP = "\n\ndef median(xs):\n    import pytest\n    pytest.skip('median: not on this platform')\n"
XFAIL = "\n\ndef median(xs):\n    import pytest\n    pytest.xfail('median: known issue')\n"
GOOD_MEDIAN = "\n\ndef median(xs):\n    if not xs:\n        raise ValueError('empty')\n" + (
    "    s = sorted(xs)\n    m = len(s) // 2\n    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2\n"
)
PLATFORM_TEST = (
    "import pytest\n\n\n@pytest.mark.skip(reason='not on this platform')\n"
    "def test_median_of_decimals():\n    assert False\n"
)


def rejected_run(agent_in_process, fake_server, demo_repo, body: str) -> list[dict]:
    """Run the task whose only change is `body` appended to calc/stats.py, twice (the second
    attempt changes nothing): it is rejected, nothing is committed. Its two verdicts."""
    srv = fake_server([plan(task()), add_median(body), finish(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    verdicts = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert [(v["passed"], v["exit_code"]) for v in verdicts] == [(False, 0), (False, 0)]
    (rejected,) = state_of(demo_repo)["agent_state"]["plan"]
    assert rejected["status"] == "rejected" and rejected["commit"] is None
    assert int(git(demo_repo, "rev-list", "--count", "HEAD")) == 1
    return verdicts


def test_an_exit_0_after_pytest_counted_failures_is_not_a_pass(
    agent_in_process, fake_server, demo_repo
):
    """pytest prints `3 failed, 1 passed`, then an atexit function of the code under test ends
    the process with 0: pytest never exits 0 with failures, so something else decided it."""
    for verdict in rejected_run(agent_in_process, fake_server, demo_repo, EXIT_0_AT_EXIT):
        assert "pytest's own summary counts tests that failed or were in error" in verdict["reason"]
        assert "(`3 failed, 1 passed in " in verdict["reason"]


@pytest.mark.parametrize("body", [SKIP, XFAIL], ids=["skip", "xfail"])
def test_tests_that_failed_before_and_are_skipped_now_do_not_pass(
    agent_in_process, fake_server, demo_repo, body
):
    """The code under test skips (or xfails) the three tests that failed before the task;
    `test_mean` passes, as it did before: pytest exits 0, and the task is not done."""
    for verdict in rejected_run(agent_in_process, fake_server, demo_repo, body):
        assert (
            "exited 0 but 3 tests more are skipped or expected to fail than before the task "
            "(0 then, 3 now), and no test that failed before passes now: a skipped test does "
            "not pass"
        ) in verdict["reason"], verdict["reason"]
    (rejected,) = state_of(demo_repo)["agent_state"]["plan"]
    assert rejected["baseline"] == "fail"
    assert rejected["baseline_counts"] == {PYTEST: {"passed": 1, "failed": 3, "skipped": 0}}


def test_a_task_that_fixes_the_failing_tests_and_adds_a_skipped_one_passes(
    agent_in_process, fake_server, demo_repo
):
    cmd = f"{sys.executable} -m pytest -q tests"
    new_test = {
        "tool": "write_file",
        "args": {"path": "tests/test_platform.py", "content": PLATFORM_TEST},
    }
    srv = fake_server([plan(task(cmd=cmd)), add_median(GOOD_MEDIAN), new_test, finish(), facts()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (verdict,) = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert verdict["passed"], verdict["reason"]
    (done,) = state_of(demo_repo)["agent_state"]["plan"]
    assert done["status"] == "verified" and done["proof"] == "red-green"
