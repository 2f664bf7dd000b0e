"""Commands run as real subprocesses: timeouts, process groups, output caps, env, sandbox."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_cli.core.errors import ToolError, WorkspaceError
from agent_cli.workspace.shell.cmdline import is_test_command
from agent_cli.workspace.shell.runner import check_sandbox, run_command, scrub_env


def _gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie nobody reaped counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def _wait_gone(pid: int, within_s: float = 2.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


def test_a_string_runs_through_bash_with_stdout_and_stderr_interleaved(tmp_path):
    result = run_command("[[ 1 == 1 ]] && echo out; echo err >&2; echo out2; exit 3", tmp_path, 10)
    assert result.output == "out\nerr\nout2\n"
    assert result.exit_code == 3
    assert not result.timed_out


def test_a_list_runs_without_a_shell(tmp_path):
    result = run_command(["echo", "$HOME", "a;b"], tmp_path, 10)
    assert result.output == "$HOME a;b\n"
    assert result.exit_code == 0


def test_the_command_runs_in_cwd_with_stdin_from_dev_null_in_its_own_session(tmp_path):
    code = "import os; print(os.getcwd()); print(os.readlink('/proc/self/fd/0')); print(os.getsid(0) == os.getpid())"
    result = run_command([sys.executable, "-c", code], tmp_path, 10)
    assert result.output.split() == [str(tmp_path), "/dev/null", "True"]


def test_a_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "pids"
    result = run_command(f"sleep 100 & echo $! > {pidfile}; sleep 100", tmp_path, 1)
    assert result.timed_out and result.exit_code is None
    assert _wait_gone(_pids(pidfile)[0])


def test_a_timeout_kills_a_grandchild_that_keeps_the_output_pipe_open(tmp_path):
    pidfile, late = tmp_path / "pids", tmp_path / "late"
    child = (
        "import subprocess, sys, time\n"
        f"g = subprocess.Popen(['sh', '-c', 'sleep 100; touch {late}'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
        "print('spawned', flush=True)\n"
        "time.sleep(100)\n"
    )
    result = run_command([sys.executable, "-c", child], tmp_path, 1.5)
    assert result.timed_out
    assert "spawned\n" in result.output  # and where the interrupt found it
    assert _wait_gone(_pids(pidfile)[0])
    assert not late.exists()  # killed, not waited for: it never reached its end


def test_a_timed_out_python_keeps_what_it_printed_into_a_block_buffered_pipe(tmp_path):
    # Without PYTHONUNBUFFERED, print() into a pipe stays in Python's buffer; SIGTERM lost it.
    env = {k: v for k, v in scrub_env(dict(os.environ)).items() if k != "PYTHONUNBUFFERED"}
    code = "import time\nprint('collected 3 items')\nprint('tests/test_a.py ..')\ntime.sleep(100)\n"
    result = run_command([sys.executable, "-c", code], tmp_path, 1, env=env)
    assert "collected 3 items\ntests/test_a.py ..\n" in result.output
    assert "line 4" in result.output  # where it was when interrupted, as after a Ctrl-C
    assert result.timed_out and result.exit_code is None and result.timeout_s == 1


def test_a_process_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
    pidfile = tmp_path / "pids"
    result = run_command(f"trap '' TERM; sleep 100 & echo $! > {pidfile}; wait", tmp_path, 0.5)
    assert result.timed_out
    assert _wait_gone(_pids(pidfile)[0])


def test_background_processes_left_behind_are_stopped_without_waiting_for_the_timeout(tmp_path):
    pidfile, late = tmp_path / "pids", tmp_path / "late"
    result = run_command(f"(sleep 10; touch {late}) & echo $! > {pidfile}; echo done", tmp_path, 30)
    assert result.exit_code == 0 and result.output == "done\n" and not result.timed_out
    assert _wait_gone(_pids(pidfile)[0])
    assert not late.exists()  # stopped when the command ended, 10 s before it would touch it


def test_long_output_keeps_head_and_tail_with_a_marker(tmp_path):
    result = run_command(
        "for i in $(seq 1 20000); do echo line$i; done", tmp_path, 30, max_output_chars=1000
    )
    total = sum(len(f"line{i}\n") for i in range(1, 20001))
    assert result.output.startswith("line1\nline2\n")
    assert result.output.endswith("line19999\nline20000\n")
    assert f"\n[... {total - 1000} characters cut ...]\n" in result.output
    assert len(result.output) < 1100


def test_short_output_is_not_cut_and_bad_utf8_is_replaced(tmp_path):
    result = run_command(["printf", "ok\\377\\n"], tmp_path, 10, max_output_chars=100)
    assert result.output == "ok\ufffd\n"


def test_a_missing_program_is_exit_code_127_not_an_exception(tmp_path):
    result = run_command(["no-such-program-here"], tmp_path, 10)
    assert result.exit_code == 127
    assert "command not found" in result.output


def test_empty_commands_and_missing_directories_are_tool_errors(tmp_path):
    with pytest.raises(ToolError):
        run_command("  ", tmp_path, 10)
    with pytest.raises(ToolError):
        run_command([], tmp_path, 10)
    with pytest.raises(ToolError, match="does not exist"):
        run_command("true", tmp_path / "missing", 10)


def test_the_default_environment_has_the_api_key_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value-for-test")
    monkeypatch.setenv("PLAIN_SETTING", "kept")
    result = run_command("echo key=$OPENAI_API_KEY plain=$PLAIN_SETTING", tmp_path, 10)
    assert result.output == "key= plain=kept\n"


def test_an_explicit_environment_is_used_as_given(tmp_path):
    result = run_command(
        "echo $ONLY", tmp_path, 10, env={"ONLY": "this", "PATH": os.environ["PATH"]}
    )
    assert result.output == "this\n"


def test_scrub_env_removes_keys_tokens_secrets_and_listed_values():
    env = {
        "OPENAI_API_KEY": "a",
        "AGENT_API_KEY": "b",
        "ANTHROPIC_API_KEY": "c",
        "GITHUB_TOKEN": "d",
        "NPM_TOKEN": "e",
        "AWS_SECRET_ACCESS_KEY": "f",
        "MY_CLIENT_SECRET_X": "g",
        "DB_PASSWORD": "h",
        "CUSTOM_VAR": "sk-the-configured-key",
        "HEADER": "Bearer sk-the-configured-key",
        "PATH": "/usr/bin",
        "HOME": "/root",
        "TOKENIZERS_PARALLELISM": "false",
        "LANG": "C.UTF-8",
    }
    kept = scrub_env(env, ["sk-the-configured-key", ""])
    assert kept == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "TOKENIZERS_PARALLELISM": "false",
        "LANG": "C.UTF-8",
    }
    assert env["OPENAI_API_KEY"] == "a", "the input is not changed"


@pytest.mark.parametrize(
    "cmd",
    [
        "pytest -q",
        "python -m pytest tests",
        "python3.11 -m unittest discover",
        "tox -e py311",
        "nox",
        "npm test",
        "npm run test:unit",
        "yarn test",
        "go test ./...",
        "cargo test",
        "make test",
        "cd sub && pytest",
        "uv run pytest",
        "X=1 timeout 60 pytest",
        "python manage.py test",
        ["python", "-m", "pytest", "-x"],
    ],
)
def test_test_commands_are_recognised(cmd):
    assert is_test_command(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "ls -la",
        "python app.py",
        "npm install",
        "git status",
        "echo pytest",
        "make build",
        "cat test.py",
        "go build ./...",
        ["python", "-m", "http.server"],
        "unbalanced 'quote",
    ],
)
def test_other_commands_are_not_test_commands(cmd):
    assert not is_test_command(cmd)


def test_sandbox_none_needs_nothing_and_unknown_kinds_are_refused():
    check_sandbox("none")
    with pytest.raises(WorkspaceError, match="unknown sandbox"):
        check_sandbox("docker")


def test_sandbox_bwrap_without_bubblewrap_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkspaceError) as err:
        check_sandbox("bwrap")
    assert err.value.message == "sandbox = bwrap was asked for but bubblewrap is not installed"
    assert err.value.hint == "apt-get install bubblewrap, or set sandbox = none"
    with pytest.raises(WorkspaceError):
        run_command("true", tmp_path, 10, sandbox="bwrap")


def _bwrap_usable() -> bool:
    if shutil.which("bwrap") is None:
        return False
    return (
        subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True).returncode
        == 0
    )


needs_bwrap = pytest.mark.skipif(
    not _bwrap_usable(),
    reason="bubblewrap is missing or cannot create "
    "a user namespace here (`bwrap --ro-bind / / true` fails)",
)


@needs_bwrap
def test_bwrap_lets_the_repo_be_written_and_nothing_else(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "outside.txt"
    result = run_command(
        f"echo in > inside.txt; echo out > {outside}; touch /usr/agent-probe; echo end",
        repo,
        20,
        sandbox="bwrap",
    )
    assert (repo / "inside.txt").read_text() == "in\n"
    assert not outside.exists()
    assert not Path("/usr/agent-probe").exists()
    assert "Read-only file system" in result.output
    assert result.output.endswith("end\n")


@needs_bwrap
def test_bwrap_has_no_network(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    try:
        assert run_command([sys.executable, "-c", code], tmp_path, 20).output == "connected\n"
        sandboxed = run_command([sys.executable, "-c", code], tmp_path, 20, sandbox="bwrap")
    finally:
        server.close()
    assert sandboxed.exit_code != 0
    assert "connected" not in sandboxed.output


@needs_bwrap
def test_bwrap_commands_are_killed_at_the_timeout(tmp_path):
    result = run_command("sleep 100 & sleep 100", tmp_path, 1, sandbox="bwrap")
    assert result.timed_out and result.exit_code is None


def test_commands_run_when_this_process_already_holds_many_descriptors(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is too low to open 1100 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        result = run_command("echo many", tmp_path, 10)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result.output == "many\n"
