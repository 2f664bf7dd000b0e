"""The harness's judgement: commands by exit code, criteria by a forced model verdict."""

import shlex
import sys
from pathlib import Path

import pytest

from agent_cli.agent.judge.ran import counted, failures_counted, more_skipped, no_test_passed
from agent_cli.agent.judge.verifier import Proofs, verify
from agent_cli.core.models import Tally, Task
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.workspace.shell.runner import run_command


def runner(cwd: Path):
    return lambda argv: run_command(argv, cwd=cwd, timeout_s=10)


def model_for(server):
    return OpenAIChat(model="fake-model", base_url=server.url, api_key=None, backoff_s=0.01)


def test_exit_zero_passes_and_anything_else_fails_with_the_tail(tmp_path):
    ok = Task(goal="g", acceptance_cmd=f"{sys.executable} -c 'print(1)'")
    assert verify(ok, [], runner(tmp_path), None, str, "goal").passed
    bad = Task(
        goal="g", acceptance_cmd=f"{sys.executable} -c 'print(\"boom\"); raise SystemExit(3)'"
    )
    v = verify(bad, [], runner(tmp_path), None, str, "goal")
    assert not v.passed and v.exit_code == 3 and "exited 3" in v.reason and "boom" in v.reason


def test_commands_run_without_a_shell(tmp_path):
    task = Task(goal="g", acceptance_cmd="true && touch pwned")
    v = verify(task, [], runner(tmp_path), None, str, "goal")
    assert not (tmp_path / "pwned").exists() and v.command == "true && touch pwned"


def test_user_accept_commands_are_used_when_the_task_has_none(tmp_path):
    task = Task(goal="g", acceptance_cmd=None)
    v = verify(task, ["true", "false"], runner(tmp_path), None, str, "goal")
    assert not v.passed and v.command == "false"


def test_model_verdict_pass_fail_and_unparseable(tmp_path, fake_server):
    task = Task(goal="write docs", acceptance="README mentions median")
    srv = fake_server(
        [
            {"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "README has it"}},
            {"tool": "submit_verdict", "args": {"verdict": "fail", "reason": "missing"}},
            {"tool": "submit_verdict", "args": {"verdict": "maybe"}},
            {"tool": "submit_verdict", "args": {"verdict": "maybe"}},  # asked once more
            {"content": "looks fine to me"},
            {"content": "looks fine to me"},
        ]
    )
    model = model_for(srv)
    results = [
        verify(task, [], runner(tmp_path), model, lambda: "+median", "the goal") for _ in range(4)
    ]
    assert [r.passed for r in results] == [True, False, False, False]
    assert all(r.judge == "model" for r in results)
    assert "unparseable" in results[2].reason and "unparseable" in results[3].reason
    assert len(srv.chat_requests) == 6
    again = srv.chat_requests[3]["messages"][-2]["content"]
    assert again.startswith("Your previous verdict was rejected: invalid verdict at verdict")
    req = srv.chat_requests[0]
    assert req["tool_choice"] == "required" and [t["function"]["name"] for t in req["tools"]] == [
        "submit_verdict"
    ]
    assert req["messages"][-1]["content"].endswith("the goal")
    assert "+median" in req["messages"][1]["content"]


def test_neither_command_nor_criteria_is_not_trusted(tmp_path, fake_server):
    srv = fake_server([])
    v = verify(Task(goal="g"), [], runner(tmp_path), model_for(srv), str, "goal")
    assert not v.passed and "not trusted" in v.reason and srv.chat_requests == []


UNITTEST_MAIN = "import unittest; unittest.main(module=None, argv=['unittest', *ARGS])"


def test_unittest_that_ran_no_test_does_not_pass_whatever_its_exit_code(tmp_path):
    """Before Python 3.12 `python -m unittest` exits 0 when it finds no test; the verdict is
    the same on every version: a check that ran no test proves nothing."""
    (tmp_path / "test_one.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_it(self):\n        pass\n"
    )

    def check(*args: str) -> str:
        code = UNITTEST_MAIN.replace("*ARGS", ", ".join(repr(a) for a in args))
        return f"{sys.executable} -c {shlex.quote(code)}"

    none = Task(goal="g", acceptance_cmd=check("discover", "-s", ".", "-p", "nomatch_*.py"))
    v = verify(none, [], runner(tmp_path), None, str, "goal")
    assert not v.passed and "ran no test" in v.reason, v.reason
    one = Task(goal="g", acceptance_cmd=check("discover", "-s", ".", "-p", "test_*.py"))
    assert verify(one, [], runner(tmp_path), None, str, "goal").passed
    quoted = Task(goal="g", acceptance_cmd=f"{sys.executable} -c 'print(\"said: Ran 0 tests in\")'")
    assert verify(quoted, [], runner(tmp_path), None, str, "goal").passed  # not unittest's line


SKIPPED_AND_XFAILED = (
    "import pytest\n\n"
    "@pytest.mark.skip\ndef test_skipped():\n    assert False\n\n"
    "@pytest.mark.xfail\ndef test_expected_to_fail():\n    assert False\n"
)


@pytest.mark.slow
def test_pytest_run_whose_every_test_was_skipped_or_xfailed_does_not_pass(tmp_path):
    """pytest exits 0 when each test is skipped or expected to fail, as after a task marks the
    failing test `skip`: the check proved nothing, with or without -q or colours."""
    (tmp_path / "test_x.py").write_text(SKIPPED_AND_XFAILED)
    for options in ("-q", "-rA", "--color=yes"):
        task = Task(
            goal="g", acceptance_cmd=f"{sys.executable} -m pytest -p no:cacheprovider {options}"
        )
        v = verify(task, [], runner(tmp_path), None, str, "goal")
        assert not v.passed and v.exit_code == 0, (options, v.reason)
        assert "pytest ran no test that passed" in v.reason
    (tmp_path / "test_y.py").write_text("def test_ok():\n    pass\n")
    both = Task(goal="g", acceptance_cmd=f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert verify(both, [], runner(tmp_path), None, str, "goal").passed


def test_unittest_run_whose_every_test_was_skipped_does_not_pass(tmp_path):
    (tmp_path / "test_one.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n"
        "    @unittest.skip('later')\n    def test_a(self):\n        assert False\n\n"
        "    @unittest.expectedFailure\n    def test_b(self):\n        assert False\n"
    )
    code = UNITTEST_MAIN.replace("*ARGS", "'discover', '-s', '.'")
    task = Task(goal="g", acceptance_cmd=f"{sys.executable} -c {shlex.quote(code)}")
    v = verify(task, [], runner(tmp_path), None, str, "goal")
    assert not v.passed and "ran no test that passed" in v.reason, v.reason
    (tmp_path / "test_two.py").write_text(
        "import unittest\n\nclass U(unittest.TestCase):\n    def test_c(self):\n        pass\n"
    )
    assert verify(task, [], runner(tmp_path), None, str, "goal").passed


@pytest.mark.parametrize(
    "output",
    [
        "3 passed, 1 skipped in 0.10s",
        "===== 1 xpassed, 2 xfailed in 0.1s =====",
        "1 passed, 2 subtests passed, 1 skipped in 0.01s",
        "said: 1 skipped in 0.01s",  # not pytest's line
        "Ran 2 tests in 0.001s\n\nOK (skipped=1)",
        "all good",
    ],
)
def test_output_that_reports_a_pass_or_no_runner_passes(output):
    assert no_test_passed(output) is None


@pytest.mark.parametrize(
    "output",
    [
        "1 skipped in 0.02s",
        "==== 2 skipped in 0.02 seconds ====",
        "3 tests collected in 1.20s",
        # in colour, and with the escapes a terminal acts on beside colours (erase to the end)
        "\x1b[33m==== \x1b[1m2 skipped\x1b[0m\x1b[K in 0.02s ====\x1b[0m",
        "\x1b]0;pytest\x07\x1b[32m1 skipped in 0.02s\x1b[0m",
    ],
)
def test_a_pytest_summary_without_a_pass_is_read_in_each_form(output):
    assert "pytest ran no test that passed" in (no_test_passed(output) or "")


@pytest.mark.slow
def test_pytest_run_that_code_under_test_ends_early_with_exit_0_does_not_pass(tmp_path):
    """Code the tests import that calls os._exit(0) ends pytest before it reports anything:
    exit 0, no summary line. Told to print no summary (-qq), the run is judged by its code."""
    (tmp_path / "calc.py").write_text("import os\n\nos._exit(0)\n")
    (tmp_path / "test_calc.py").write_text("import calc\n\n\ndef test_it():\n    assert False\n")
    pytest_cmd = f"{sys.executable} -m pytest -p no:cacheprovider"
    for options in ("-q", "", "-v -q", f"--rootdir={tmp_path}"):
        task = Task(goal="g", acceptance_cmd=f"{pytest_cmd} {options}")
        v = verify(task, [], runner(tmp_path), None, str, "goal")
        assert not v.passed and v.exit_code == 0, (options, v.reason)
        assert "pytest printed no summary line" in v.reason
    quiet = Task(goal="g", acceptance_cmd=f"{pytest_cmd} -qq")
    assert verify(quiet, [], runner(tmp_path), None, str, "goal").passed
    script = Task(goal="g", acceptance_cmd=f"sh -c {shlex.quote(pytest_cmd)}")  # began, no end
    v = verify(script, [], runner(tmp_path), None, str, "goal")
    assert not v.passed and "pytest printed no summary line" in v.reason, v.reason
    (tmp_path / "calc.py").write_text("")
    (tmp_path / "test_calc.py").write_text("def test_it():\n    pass\n")
    fine = Task(goal="g", acceptance_cmd=f"{pytest_cmd} -q")
    assert verify(fine, [], runner(tmp_path), None, str, "goal").passed


@pytest.mark.slow
def test_pytest_told_to_be_quiet_by_the_repositorys_settings_is_judged_by_its_progress(tmp_path):
    """`addopts = -qq` in the repository's own settings: pytest prints no summary line, only
    its progress. A run that reached 100% with a test passed passes; one whose every test was
    skipped does not, nor one that code under test ended before any progress."""
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -qq -p no:cacheprovider\n")
    (tmp_path / "test_calc.py").write_text("def test_it():\n    pass\n")
    check = Task(goal="g", acceptance_cmd=f"{sys.executable} -m pytest")
    passed = verify(check, [], runner(tmp_path), None, str, "goal")
    assert passed.passed, passed.reason
    (tmp_path / "test_calc.py").write_text(
        "import pytest\n\n\n@pytest.mark.skip\ndef test_it():\n    assert False\n"
    )
    skipped = verify(check, [], runner(tmp_path), None, str, "goal")
    assert not skipped.passed and "pytest ran no test that passed" in skipped.reason
    (tmp_path / "calc.py").write_text("import os\n\nos._exit(0)\n")
    (tmp_path / "test_calc.py").write_text("import calc\n\n\ndef test_it():\n    assert False\n")
    ended = verify(check, [], runner(tmp_path), None, str, "goal")
    assert not ended.passed and "pytest printed no summary line" in ended.reason


@pytest.mark.slow
def test_unittest_run_that_code_under_test_ends_early_with_exit_0_does_not_pass(tmp_path):
    (tmp_path / "calc.py").write_text("import os\n\nos._exit(0)\n")
    (tmp_path / "test_calc.py").write_text(
        "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n"
        "    def test_it(self):\n        self.fail()\n"
    )
    for options in ("", "-q", "discover -s ."):
        task = Task(goal="g", acceptance_cmd=f"{sys.executable} -m unittest {options}")
        v = verify(task, [], runner(tmp_path), None, str, "goal")
        assert not v.passed and v.exit_code == 0, (options, v.reason)
        assert "unittest printed no `Ran N tests` line" in v.reason
    (tmp_path / "calc.py").write_text("")
    (tmp_path / "test_calc.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_it(self):\n        pass\n"
    )
    fine = Task(goal="g", acceptance_cmd=f"{sys.executable} -m unittest -q")
    assert verify(fine, [], runner(tmp_path), None, str, "goal").passed


def test_a_check_holding_a_nul_character_fails_without_raising(tmp_path):
    task = Task(goal="g", acceptance_cmd="python -c 'print(1)\0'")
    v = verify(task, [], runner(tmp_path), None, str, "goal")
    assert not v.passed and "NUL character" in v.reason


@pytest.mark.parametrize(
    "output, tally",
    [
        ("3 failed, 1 passed in 0.03s", Tally(passed=1, failed=3)),
        ("==== 1 passed, 1 error, 2 warnings in 0.1s ====", Tally(passed=1, failed=1)),
        ("2 errors in 0.1s", Tally(failed=2)),
        ("1 passed, 1 rerun in 0.1s", Tally(passed=1)),  # pytest-rerunfailures: passed at last
        ("2 passed, 1 xpassed, 3 deselected in 0.1s", Tally(passed=3)),
        ("1 passed, 2 skipped, 1 xfailed in 0.1s", Tally(passed=1, skipped=3)),
        ("1 failed, 1 passed, 2 subtests passed in 0.1s", Tally(passed=3, failed=1)),
        (
            "\x1b[31m==== \x1b[1m1 failed\x1b[0m, 2 passed in 0.1s ====\x1b[0m",
            Tally(passed=2, failed=1),
        ),
        (".Fs.x [100%]", Tally(passed=2, failed=1, skipped=2)),  # -qq: its progress
        ("Ran 4 tests in 0.01s\n\nOK (skipped=1, expected failures=1)", Tally(passed=2, skipped=2)),
        (
            "Ran 6 tests in 0.01s\n\nFAILED (failures=2, errors=1, skipped=1, "
            "expected failures=1, unexpected successes=1)",
            Tally(passed=0, failed=4, skipped=2),
        ),
        # two runs (`make test`) add up
        (
            "1 failed, 1 passed in 0.1s\n2 passed, 1 skipped in 0.1s",
            Tally(passed=3, failed=1, skipped=1),
        ),
    ],
)
def test_a_test_runners_summary_is_counted_as_passed_failed_and_skipped(output, tally):
    assert counted(output) == tally


def test_what_counts_of_a_command_that_runs_pytest_itself_is_its_first_summary():
    """pytest's own summary comes first; one printed after it (code under test, at exit) is
    not pytest's. A command that runs pytest some other way may run it more than once."""
    output = "3 failed, 1 passed in 0.03s\n4 passed in 0.01s\n"
    assert counted(output, ["pytest", "-q"]) == Tally(passed=1, failed=3)
    assert counted(output, ["make", "test"]) == Tally(passed=5, failed=3)
    assert counted("all good") is None and counted("no tests ran in 0.01s") == Tally()


@pytest.mark.parametrize(
    "output, says",
    [
        ("...FFF [100%]\n3 failed, 1 passed in 0.03s", "(`3 failed, 1 passed in 0.03s`)"),
        ("==== 1 error in 0.10s ====", "(`1 error in 0.10s`)"),
        ("E [100%]", "(`E [100%]`)"),
        ("Ran 2 tests in 0.01s\n\nFAILED (failures=1)", "unittest's own summary"),
        ("Ran 2 tests in 0.01s\n\nFAILED (errors=2)", "(`FAILED (errors=2)`)"),
    ],
)
def test_an_exit_0_with_failures_in_the_runners_own_summary_is_not_a_pass(output, says):
    why = failures_counted(output, ["pytest", "-q"]) or ""
    assert says in why and "never exits 0 then" in why, why
    assert "something other than the test runner decided the exit code" in why


@pytest.mark.parametrize(
    "output",
    [
        "1 passed, 1 rerun in 0.1s",
        "1 xpassed in 0.1s",
        "2 passed, 5 warnings in 0.1s",
        "1 passed, 2 skipped, 1 xfailed in 0.1s",
        "Ran 2 tests in 0.01s\n\nOK (skipped=1)",
        # a summary after pytest's first is not pytest's (code under test printing at exit)
        "1 passed in 0.1s\n1 failed in 0.1s",
    ],
)
def test_a_summary_without_failures_is_not_read_as_failures(output):
    assert failures_counted(output, ["python", "-m", "pytest"]) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "script",
    ["PYTEST -q | sed -n p", "PYTEST -q || (true)", "PYTEST -q | awk 1"],
)
def test_a_wrapper_that_exits_0_whatever_pytest_counted_does_not_pass(tmp_path, script):
    """The exit code is the filter's or the subshell's; pytest's own summary says 1 failed."""
    (tmp_path / "test_x.py").write_text("def test_ok():\n    pass\n\ndef test_no():\n    1 / 0\n")
    pytest_cmd = f"{shlex.quote(sys.executable)} -m pytest -p no:cacheprovider"
    cmd = f"sh -c {shlex.quote(script.replace('PYTEST', pytest_cmd))}"
    v = verify(Task(goal="g", acceptance_cmd=cmd), [], runner(tmp_path), None, str, "goal")
    assert not v.passed and v.exit_code == 0, v.reason
    assert "pytest's own summary counts tests that failed" in v.reason
    assert "(`1 failed, 1 passed in " in v.reason


BEFORE = Tally(passed=1, failed=3, skipped=0)


@pytest.mark.parametrize(
    "now, why",
    [
        (
            Tally(passed=1, skipped=3),
            "3 tests more are skipped or expected to fail than before the task (0 then, 3 now), "
            "and no test that failed before passes now: a skipped test does not pass",
        ),
        (
            Tally(passed=2, skipped=2),
            "2 tests more are skipped or expected to fail than before the task (0 then, 2 now), "
            "and only 1 test more passes than before, of the 3 that failed then: a skipped test "
            "does not pass",
        ),
        (Tally(passed=0, skipped=1), "1 test more is skipped"),
        (Tally(passed=4, skipped=1), None),  # the failing tests fixed, one skipped added
        (Tally(passed=4), None),
        (Tally(passed=1), None),  # not skipped: (a test deleted is check_changed's to name)
    ],
)
def test_more_tests_skipped_than_before_do_not_pass_for_those_that_failed(now, why):
    got = more_skipped(BEFORE, now)
    assert (got is None) if why is None else (why in (got or "")), got


def test_a_run_before_the_task_whose_tests_did_not_fail_counts_no_skip_against_it():
    assert more_skipped(Tally(passed=5), Tally(passed=5, skipped=2)) is None
    assert more_skipped(Tally(passed=5, skipped=2), Tally(passed=5, skipped=2)) is None


COUNTED = (
    "import sys; sys.stdout.write(open('out.txt').read()); sys.exit(int(open('code.txt').read()))"
)


def test_the_counts_before_the_task_are_kept_per_command_and_tree_and_judge_its_pass(tmp_path):
    """The check's run before the task (Proofs.baseline) keeps what its runner counted; a
    passing run with the failing tests skipped fails against it, and not without those counts
    (a run resumed from a state saved before they were kept)."""
    cmd = f"{sys.executable} -c {shlex.quote(COUNTED)}"
    (tmp_path / "out.txt").write_text("3 failed, 1 passed in 0.03s\n")
    (tmp_path / "code.txt").write_text("1")
    runs = []

    def run_argv(argv):
        runs.append(argv)
        return run_command(argv, cwd=tmp_path, timeout_s=10)

    proofs = Proofs()
    assert proofs.baseline([cmd], "tree1", run_argv) == "fail"
    assert proofs.tallies([cmd], "tree1") == {cmd: Tally(passed=1, failed=3)}
    assert proofs.baseline([cmd], "tree1", run_argv) == "fail" and len(runs) == 1
    assert proofs.tallies([cmd], "tree2") == {}
    task = Task(goal="g", acceptance_cmd=cmd, baseline_counts=proofs.tallies([cmd], "tree1"))
    (tmp_path / "out.txt").write_text("1 passed, 3 skipped in 0.03s\n")
    (tmp_path / "code.txt").write_text("0")
    v = verify(task, [], run_argv, None, str, "goal")
    assert not v.passed and v.exit_code == 0
    assert "3 tests more are skipped or expected to fail than before the task" in v.reason
    old = Task.model_validate({"goal": "g", "acceptance_cmd": cmd, "baseline": "fail"})
    assert old.baseline_counts == {} and verify(old, [], run_argv, None, str, "goal").passed
    (tmp_path / "out.txt").write_text("4 passed, 1 skipped in 0.03s\n")
    assert verify(task, [], run_argv, None, str, "goal").passed
    small = Proofs(limit=2)  # the oldest results go first, their counts with them
    small.baseline([cmd], "tree1", run_argv)
    small.remember(["a"], "t", False, {"a": Tally(failed=1)})
    small.remember(["b"], "t", True)
    assert small.tallies([cmd], "tree1") == {} and small.tallies(["a"], "t") == {
        "a": Tally(failed=1)
    }
    assert set(small.counts) <= set(small.seen)
