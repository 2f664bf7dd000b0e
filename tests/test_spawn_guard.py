"""spawnguard: a test not marked `slow` fails when it starts agent, chroma or a Python that runs
a module or a script, however the process is started; a `python -c` one-liner is fine."""

from __future__ import annotations

import sys

import pytest

import spawnguard
from spawnguard import offence

INNER_TESTS = """
import os, pty, subprocess, sys, threading
import pytest

PY = sys.executable

def test_a_python_one_liner_is_fine():
    subprocess.run([PY, "-c", "pass"], check=True)
    subprocess.run(f"{PY} -I -c 'print(1)' | cat", shell=True, check=True)

def test_git_is_fine():
    subprocess.run(["git", "--version"], check=True, capture_output=True)

def test_fails_python_module():
    subprocess.run([PY, "-m", "json.tool"], input=b"{}", check=True, capture_output=True)

@pytest.mark.slow
def test_passes_python_module_when_slow():
    subprocess.run([PY, "-m", "json.tool"], input=b"{}", check=True, capture_output=True)

def test_fails_python_module_through_bash():
    subprocess.run(["bash", "-c", "cd . && python3 -m json.tool </dev/null || true"])

def test_fails_agent_even_when_it_cannot_start():
    with pytest.raises(FileNotFoundError):
        subprocess.run(["/nonexistent/agent", "--help"])

def test_fails_chroma_in_a_thread():
    def start():
        try:
            subprocess.run(["/nonexistent/chroma", "run"])
        except FileNotFoundError:
            pass
    thread = threading.Thread(target=start)
    thread.start()
    thread.join()

def test_fails_exec_after_pty_fork():
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execv(PY, [PY, "-m", "json.tool", os.devnull])
        finally:
            os._exit(127)
    os.waitpid(pid, 0)
    os.close(fd)

def test_fails_posix_spawn_of_a_script(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("pass")
    pid = os.posix_spawn(PY, [PY, str(script)], dict(os.environ))
    os.waitpid(pid, 0)

@pytest.fixture(scope="module")
def module_process():
    subprocess.run([PY, "-m", "json.tool", os.devnull], capture_output=True)

@pytest.mark.slow
def test_passes_first_user_of_a_spawning_fixture_when_slow(module_process):
    pass

def test_fails_later_user_of_a_spawning_fixture(module_process):
    pass
"""


def test_the_guard_fails_exactly_the_unmarked_tests_that_start_such_a_process(pytester):
    this_call = spawnguard._stack[-1]
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts a process\n")
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_inprocess("-p", "spawnguard", "-rfE")
    outcomes = result.parseoutcomes()
    failed = sorted(
        line.split("::")[1].split(" ")[0]
        for line in result.outlines
        if line.startswith(("FAILED", "ERROR"))
    )
    assert failed == sorted(
        [
            "test_fails_python_module",
            "test_fails_python_module_through_bash",
            "test_fails_agent_even_when_it_cannot_start",
            "test_fails_chroma_in_a_thread",
            "test_fails_exec_after_pty_fork",
            "test_fails_posix_spawn_of_a_script",
            "test_fails_later_user_of_a_spawning_fixture",
        ]
    ), result.stdout.str()
    # a fixture's process found at setup is an error of the test, the others are failures
    assert outcomes == {"failed": 6, "errors": 1, "passed": 4}, result.stdout.str()
    result.stdout.fnmatch_lines(["*not marked @pytest.mark.slow*json.tool*"])
    result.stdout.fnmatch_lines(["*it starts `agent`*"])
    # the inner session's phases and fixtures took their logs away: this test's call logs again
    assert len(spawnguard._stack) == 1 and spawnguard._stack[0] is this_call


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["python3", "-c", "import sys"], None),
        (["python3.11", "-u", "-W", "ignore", "-c", "pass"], None),
        ([sys.executable, "--version"], None),
        (["python", "-m", "pytest"], "module or a script"),
        (["python3", "-mjson.tool"], "module or a script"),
        (["python", "check.py"], "module or a script"),
        (["python"], "module or a script"),
        (["bash", "-lc", "FOO=1 python -m http.server"], "module or a script"),
        (["bash", "-c", "echo python is not run && python -c 'pass'"], None),
        (["timeout", "5", "env", "A=b", "python3", "x.py"], "module or a script"),
        (["bwrap", "--ro-bind", "/", "/", "--", "bash", "-c", "agent run"], "`agent`"),
        (["/venv/bin/chroma", "run", "--path", "db"], "`chroma`"),
        (["git", "commit", "-m", "python -m x"], None),
    ],
)
def test_what_counts_as_starting_a_python_module_or_script(argv, why):
    found = offence(argv)
    assert (found is None) if why is None else (why in (found or "")), found
