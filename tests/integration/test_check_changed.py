"""A task that changes its own check's files is verified, and says so for review."""

from __future__ import annotations

import os
import sys

import pytest
from runkit import GOAL, add_median, events_of, finish, plan, state_of, task

from agent_cli.agent.judge.touched import check_files

SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip)\n"
)
A_FIXTURE = "import pytest\n\n\n@pytest.fixture\ndef numbers():\n    return [3, 1, 2]\n"


@pytest.mark.parametrize(
    "cmds, changed, named",
    [
        (["pytest -q tests/test_stats.py"], ["calc/stats.py", "tests/test_stats.py"], 1),
        (["pytest -q tests/test_stats.py::test_median"], ["tests/test_stats.py"], 1),
        (["python -m pytest -q tests/"], ["tests/unit/test_x.py", "tests2/a.py"], 1),
        (["pytest -q"], ["conftest.py", "sub/conftest.py", "pyproject.toml", "x.pth"], 4),
        (["pytest -q"], ["calc/stats.py", "README.md"], 0),
        (["make check"], ["pytest.py", "sitecustomize.py"], 2),
    ],
)
def test_the_files_of_a_check_are_those_it_names_and_pytests_settings(cmds, changed, named):
    assert len(check_files(cmds, changed)) == named


@pytest.mark.parametrize(
    "cmd, changed, named",
    [
        ("pytest -q tests", ["tests/test_stats.py", "calc/stats.py"], ["tests/test_stats.py"]),
        ("sh -c 'pytest -q tests/test_stats.py'", ["tests/test_stats.py"], ["tests/test_stats.py"]),
        ("python -m unittest tests.test_stats", ["tests/test_stats.py"], ["tests/test_stats.py"]),
        ("python -m pytest -q", ["tests/test_stats.py", "calc/stats.py"], ["tests/test_stats.py"]),
        ("py.test -q", ["test_top.py", "calc/stats.py"], ["test_top.py"]),
        ("python -m unittest", ["tests/test_stats.py"], ["tests/test_stats.py"]),
        ("make check", ["Makefile", "calc/stats.py"], ["Makefile"]),
        ("pytest -q", ["pytest.toml", ".pytest.toml"], [".pytest.toml", "pytest.toml"]),
        ("bash run_checks.sh", ["run_checks.sh", "calc/stats.py"], ["run_checks.sh"]),
        # what the check does not read stays out
        ("pytest -q tests/test_stats.py", ["tests/test_other.py"], []),
        ("python -m pytest -q -k median", ["calc/stats.py", "docs/test.md"], []),
        ("python run_checks.py", ["tests/test_stats.py"], []),
        ("pytest -q -k " + "x" * 300, ["calc/stats.py"], []),  # a word too long for a file name
        ("x" * 300 + " -q", ["calc/stats.py"], []),
        # a copy of the package under test where the tests import it first
        ("pytest -q tests/test_stats.py", ["tests/calc/stats.py"], ["tests/calc/stats.py"]),
        ("pytest -q tests/test_stats.py", ["tests/calc.py", "calc/stats.py"], ["tests/calc.py"]),
        ("pytest -q tests/test_stats.py", ["calc/stats.py", "calc/sub/calc.py"], []),
        (
            "pytest -q tests/test_stats.py",
            ["tests/unit/calc/__init__.py"],
            ["tests/unit/calc/__init__.py"],
        ),
    ],
)
def test_a_check_reads_the_folders_scripts_and_modules_it_names_and_what_it_finds(
    cmd, changed, named, tmp_path
):
    for path in ("tests/test_stats.py", "calc/__init__.py", "run_checks.sh", "Makefile"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text("")
    assert check_files([cmd], changed, tmp_path) == named


EDIT_TEST = {
    "tool": "edit_file",
    "args": {
        "path": "tests/test_stats.py",
        "old": "import pytest\n",
        "new": "import pytest  # ok\n",
    },
}


@pytest.mark.slow
def test_a_task_that_edits_the_tests_its_check_finds_is_named(
    agent_in_process, fake_server, demo_repo
):
    """`pytest -q tests` names a folder: a test file the task edits there is the check's."""
    cmd = f"{sys.executable} -m pytest -q tests"
    srv = fake_server([plan(task(cmd=cmd)), add_median(), EDIT_TEST, finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (done,) = [e for e in events_of(proc.stdout) if e["event"] == "task_done"]
    assert done["check_changed"] == ["tests/test_stats.py"]


@pytest.mark.slow
def test_a_task_that_changes_its_checks_files_is_named_in_the_log_and_report(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server(
        [
            plan(task()),
            add_median(),
            {"tool": "write_file", "args": {"path": "tests/conftest.py", "content": A_FIXTURE}},
            finish(),
        ]
    )
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "it changed its own check: tests/conftest.py" in proc.stdout
    assert "but the task changed its own check: tests/conftest.py; review them" in " ".join(
        proc.stdout.split()
    )
    (done,) = state_of(demo_repo)["agent_state"]["plan"]
    assert done["status"] == "verified" and done["check_changed"] == ["tests/conftest.py"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "path, content",
    [
        ("tests/conftest.py", SKIP_ALL),
        ("pytest.ini", "[pytest]\naddopts = --collect-only\n"),
    ],
)
def test_settings_that_skip_or_only_collect_every_test_do_not_verify_the_task(
    path, content, agent_in_process, fake_server, demo_repo
):
    """pytest exits 0 when every test is skipped, or when its settings only collect them;
    the check passed no test, so it proves nothing: the task is rejected, nothing committed."""
    skip_all = {"tool": "write_file", "args": {"path": path, "content": content}}
    srv = fake_server([plan(task()), skip_all, finish(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    verdicts = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert [v["passed"] for v in verdicts] == [False, False]
    assert all("pytest ran no test that passed" in v["reason"] for v in verdicts)
    (rejected,) = state_of(demo_repo)["agent_state"]["plan"]
    assert rejected["status"] == "rejected" and rejected["commit"] is None


@pytest.mark.slow
def test_the_task_done_event_carries_the_checks_files(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task()), add_median(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    (done,) = [e for e in events_of(proc.stdout) if e["event"] == "task_done"]
    assert done["check_changed"] == [] and done["proof"] == "red-green"


def test_a_program_path_finds_in_the_repository_is_the_checks_file(tmp_path, monkeypatch):
    """With the repository's `bin` on PATH (relative, or absolute), a `bin/pytest` the task
    wrote is what the check runs."""
    shim = tmp_path / "bin" / "pytest"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    changed, path = ["bin/pytest", "calc/stats.py"], os.environ["PATH"]
    for entry in ("bin", str(tmp_path / "bin")):
        monkeypatch.setenv("PATH", os.pathsep.join([entry, path]))
        assert check_files(["pytest -q tests/test_stats.py"], changed, tmp_path) == ["bin/pytest"]
    monkeypatch.setenv("PATH", path)
    assert check_files(["pytest -q tests/test_stats.py"], changed, tmp_path) == []
