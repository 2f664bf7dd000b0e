"""Every exit of `agent run --json`, a refused run's too, ends the stream with `run_done`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
NO_KEY = {"OPENAI_BASE_URL": ""}  # the default endpoint (api.openai.com) needs a key


def ends_with_run_done(proc: subprocess.CompletedProcess, says: str) -> dict:
    """The stream's last line: `run_done` carrying the process's exit code (and the reason)."""
    assert proc.returncode not in (0, None), proc.stdout + proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr
    last = lines[-1]
    assert last["event"] == "run_done", proc.stdout
    assert last["exit_code"] == proc.returncode and last["status"] == "failed"
    assert says in last["message"], last
    assert [e for e in lines if e["event"] == "run_done"] == [last]
    return last


def test_a_dirty_tree(agent_in_process, fake_server, scratch_repo):
    srv = fake_server([])
    (scratch_repo / "README.md").write_text("changed\n")
    proc = agent_in_process("run", "x", "--yes", "--json", "--base-url", srv.url, cwd=scratch_repo)
    ends_with_run_done(proc, "uncommitted changes")
    assert srv.requests == []


def test_no_api_key(agent_in_process, scratch_repo):
    proc = agent_in_process("run", "x", "--yes", "--json", cwd=scratch_repo, env=NO_KEY)
    ends_with_run_done(proc, "no API key")


def test_the_lock_held_by_another_run(agent_in_process, scratch_repo):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom agent_cli.workspace.lock import RunLock\n"
            "RunLock(sys.argv[1]).acquire()\nprint('locked', flush=True)\ntime.sleep(60)",
            str(scratch_repo / ".agent" / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        proc = agent_in_process("run", "x", "--yes", "--json", cwd=scratch_repo, env=NO_KEY)
        ends_with_run_done(proc, "another agent run")
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["x", "--max-steps", "0"], "--max-steps"),  # read, then refused by the settings
        (["x", "--max-steps", "many"], "--max-steps"),  # not even a number
        (["--budget-usd", "-1", "x"], "--budget-usd"),
        (["--hint", "try harder", "x"], "--hint goes with --resume"),
        (["--hint", "try harder"], "--hint goes with --resume"),  # not "a goal is needed"
        (["x", "--resume"], "a GOAL was given too"),  # never dropped unsaid
        (["--resume", "--plan-only"], "--plan-only makes a new plan"),
        ([], "a goal is needed"),
        (["\u200b \u2060"], "a goal is needed"),  # a zero-width space and a word joiner
    ],
)
def test_a_bad_flag_value_or_a_missing_goal(agent_in_process, scratch_repo, args, says):
    proc = agent_in_process("run", "--json", *args, cwd=scratch_repo, env=NO_KEY)
    ends_with_run_done(proc, says)
    assert proc.returncode == 2  # the command line is wrong, however it was found out


def test_outside_a_repository_and_with_nothing_to_resume(agent_in_process, tmp_path, scratch_repo):
    ends_with_run_done(
        agent_in_process("run", "x", "--json", cwd=tmp_path, env=NO_KEY),
        "not inside a git repository",
    )
    ends_with_run_done(
        agent_in_process("run", "--resume", "--json", "--yes", cwd=scratch_repo, env=NO_KEY),
        "no unfinished run",
    )


def test_a_stream_ended_after_the_run_started_names_the_run():
    """A second Ctrl-C while a run stops ends the stream from outside the session: its
    run_done still names the run that can be resumed."""
    import io

    from agent_cli.cli.wiring import EXIT_INTERRUPTED, EndsWithRunDone
    from agent_cli.core.events import RunStarted
    from agent_cli.ui.console import make_console

    out = io.StringIO()
    ends = EndsWithRunDone(make_console("json", out, io.StringIO()), json_out=True)
    ends.console.emit(
        RunStarted(run_id="run-7", goal="g", branch="agent/run-7", base="main", repo="/r")
    )
    ends.refused(EXIT_INTERRUPTED, "interrupted")
    done = json.loads(out.getvalue().splitlines()[-1])
    assert (done["event"], done["run_id"], done["status"]) == ("run_done", "run-7", "interrupted")
