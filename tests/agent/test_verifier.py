"""The harness's judgement: commands by exit code, criteria by a forced model verdict."""

import shlex
import sys
from pathlib import Path

import pytest

from agent_cli.agent.judge.ran import no_test_passed
from agent_cli.agent.judge.verifier import verify
from agent_cli.core.models import Task
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
