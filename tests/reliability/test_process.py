"""The agent process killed or interrupted at different points: real signals to a real process.

SIGKILL cannot be caught, so what survives is only what was already on disk: state.json is
replaced atomically at each task boundary and each tool call is in the run's journal, and `--resume` must continue from it without planning
again and without redoing a verified task. SIGINT, SIGTERM and SIGHUP (the terminal closed)
save the state and exit 130.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest
from ptykit import pty_agent

from conftest import git
from reliability.relkit import (
    GOAL,
    PY,
    call,
    commit_count,
    events,
    finish,
    make_done,
    no_facts,
    pid_gone,
    plan,
    read_state,
    repo_with,
    spawn_agent,
    state_files,
    task,
    task_statuses,
    wait_for,
)

__all__ = ["pty_agent", "spawn_agent"]

SECOND = task("Create done2.txt", "test -f done2.txt")
# An acceptance command that hangs the first time it checks a finished task (recording its pid)
# and passes after. Before the task it fails at once: the harness runs it first on the task's
# starting state (the red-green baseline), before the task is marked running and saved.
SLOW_CHECK = """\
import os, pathlib, sys, time
pids = pathlib.Path("pids"); pids.mkdir(exist_ok=True)
if pathlib.Path("done.txt").exists() and not (pids / "once").exists():
    (pids / "once").touch()
    (pids / "check.pid").write_text(str(os.getpid()))
    time.sleep(60)
sys.exit(0 if pathlib.Path("done.txt").exists() else 1)
"""


def _no_torn_state(repo) -> None:
    """Every state file parses and no temporary file is left beside it."""
    for path in state_files(repo):
        json.loads(path.read_text())
        assert not list(path.parent.glob(".state.json.*")), "a temporary state file was left"


def _resume(agent_in_process, repo, srv):
    return agent_in_process("run", "--resume", "--yes", "--json", "--base-url", srv.url, cwd=repo)


def _planned_again(srv) -> bool:
    return any("submit_plan" in json.dumps(r.get("tools", [])) for r in srv.chat_requests)


def test_sigkill_after_a_verified_task_loses_nothing_and_resume_continues(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            plan(task(), SECOND),
            make_done(),
            finish(),
            {**call("write_file", path="done2.txt", content="2\n"), "delay": 60},
        ]
    )
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    wait_for(
        lambda: task_statuses(repo)[:1] == ["verified"] and len(srv.chat_requests) == 4,
        what="task 1 verified and the agent waiting for the model",
    )
    os.kill(agent.pid, signal.SIGKILL)
    assert agent.wait() == -signal.SIGKILL
    _no_torn_state(repo)
    assert task_statuses(repo) == ["verified", "running"] and commit_count(repo) == 2

    rest = fake_server([call("write_file", path="done2.txt", content="2\n"), finish(), no_facts()])
    proc = _resume(agent_in_process, repo, rest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not _planned_again(rest) and len(rest.chat_requests) == 3  # task 1 not redone; facts
    assert task_statuses(repo) == ["verified", "verified"] and commit_count(repo) == 3
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert subjects == ["Create done2.txt", "Create done.txt", "initial"]


# git, killing the agent (its parent) right after it moves a branch for a commit, once
KILL_AFTER_COMMIT = """#!/bin/sh
{git} "$@"
rc=$?
case "$*" in *update-ref*commit:*)
  if [ -f "{armed}" ]; then rm -f "{armed}"; kill -9 $PPID; fi;;
esac
exit $rc
"""


def test_sigkill_between_a_tasks_commit_and_its_save_keeps_the_commit_as_its_proof(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    bin_dir, armed = tmp_path / "bin", tmp_path / "armed"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(KILL_AFTER_COMMIT.format(git=shutil.which("git"), armed=armed))
    (bin_dir / "git").chmod(0o755)
    armed.touch()
    srv = fake_server([plan(task(), SECOND), make_done(), finish()])
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo, env={"PATH": path}
    )
    assert agent.wait() == -signal.SIGKILL, agent.stdout + agent.stderr
    assert task_statuses(repo) == ["running", "pending"] and commit_count(repo) == 2
    committed = git(repo, "rev-parse", "HEAD").strip()

    rest = fake_server([call("write_file", path="done2.txt", content="2\n"), finish(), no_facts()])
    proc = _resume(agent_in_process, repo, rest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "task 1 was committed" in proc.stdout and "not done again" in proc.stdout
    assert "task 2 of 2" in json.dumps(rest.chat_requests[0]["messages"][-1])  # not task 1
    first = read_state(repo)["agent_state"]["plan"][0]
    assert first["status"] == "verified" and first["commit"] == committed
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert subjects == ["Create done2.txt", "Create done.txt", "initial"]


def test_sigkill_during_the_acceptance_command_then_resume_verifies(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"slow_check.py": SLOW_CHECK}, ignore=("pids/",))
    srv = fake_server([plan(task(cmd=f"{PY} slow_check.py")), make_done(), finish()])
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    check_pid = int(
        wait_for(
            lambda: (
                (repo / "pids" / "check.pid").exists() and (repo / "pids" / "check.pid").read_text()
            ),
            what="the acceptance command to start",
        )
    )
    try:
        os.kill(agent.pid, signal.SIGKILL)
        assert agent.wait() == -signal.SIGKILL
        _no_torn_state(repo)
        assert task_statuses(repo) == ["running"] and commit_count(repo) == 1
        rest = fake_server([finish("done.txt was already written"), no_facts()])
        proc = _resume(agent_in_process, repo, rest)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not _planned_again(rest)
        state = read_state(repo)
        assert state["status"] == "verified"
        assert state["agent_state"]["plan"][0]["attempts"] == 1  # the killed attempt not counted
        assert "done.txt" in git(repo, "show", "--stat", "--format=", "HEAD")
    finally:
        # A SIGKILLed agent cannot stop its command: the next run stops it (strays.py).
        if not pid_gone(check_pid):
            os.kill(check_pid, signal.SIGKILL)


def test_sigint_during_a_command_then_sigterm_during_the_resumed_run_both_save_and_exit_130(
    spawn_agent, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", ignore=("pids/",))
    srv = fake_server(
        [plan(task()), call("run", cmd="mkdir -p pids; echo $$ > pids/cmd.pid; sleep 60")]
    )
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    cmd_pid = int(
        wait_for(
            lambda: (
                (repo / "pids" / "cmd.pid").exists()
                and (repo / "pids" / "cmd.pid").read_text().strip()
            ),
            what="the model's command to start",
        )
    )
    os.kill(agent.pid, signal.SIGINT)  # what Ctrl-C sends
    assert agent.wait(timeout=30) == 130, agent.stdout + agent.stderr
    wait_for(lambda: pid_gone(cmd_pid), timeout=5, what="the command to be stopped")
    done = events(agent.stdout)[-1]
    assert done["event"] == "run_done" and done["status"] == "interrupted"
    assert "agent run --resume" in done["message"]
    _no_torn_state(repo)
    assert read_state(repo)["status"] == "interrupted" and read_state(repo)["steps"] == 0

    # The resumed run continues the task, then is stopped while it waits for the model.
    rest = fake_server([make_done(), {**finish(), "delay": 60}])
    resumed = spawn_agent("run", "--resume", "--yes", "--json", "--base-url", rest.url, cwd=repo)
    wait_for(lambda: len(rest.chat_requests) == 2, what="the resumed run waiting for the model")
    os.kill(resumed.pid, signal.SIGTERM)
    assert resumed.wait(timeout=30) == 130, resumed.stdout + resumed.stderr
    assert not _planned_again(rest)
    _no_torn_state(repo)
    state = read_state(repo)
    assert state["status"] == "interrupted" and state["steps"] == 1
    assert (repo / "done.txt").exists() and commit_count(repo) == 1  # nothing half-committed
    assert not (repo / ".agent" / "run.lock").exists()  # the lock was released


def test_ctrl_c_pressed_again_while_the_first_is_handled_still_saves_the_run_as_interrupted(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    """Ctrl-C pressed over and over (every 3 ms) from the first press until the state is saved:
    the presses that come while the stopped run saves its state wait for the save, so the run
    is recorded as interrupted, not as still running, and `--resume` goes on from it."""
    repo = repo_with(tmp_path / "repo", ignore=("pids/",))
    srv = fake_server(
        [plan(task()), call("run", cmd="mkdir -p pids; echo $$ > pids/cmd.pid; sleep 60")]
    )
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    wait_for(
        lambda: (
            (repo / "pids" / "cmd.pid").exists() and (repo / "pids" / "cmd.pid").read_text().strip()
        ),
        what="the model's command to start",
    )
    end = time.monotonic() + 20
    while agent.proc.poll() is None and read_state(repo)["status"] == "running":
        assert time.monotonic() < end, "the run neither saved its state nor exited"
        os.kill(agent.pid, signal.SIGINT)
        time.sleep(0.003)
    agent.wait(timeout=30)
    _no_torn_state(repo)
    assert read_state(repo)["status"] == "interrupted", agent.stdout + agent.stderr

    # the resumed run goes on from the saved state: no new plan, the task verified
    rest = fake_server([make_done(), finish(), no_facts()])
    resumed = _resume(agent_in_process, repo, rest)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not _planned_again(rest) and read_state(repo)["status"] == "verified"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_command_still_puts_back_the_users_file_it_changed(
    spawn_agent, fake_server, tmp_path, sig
):
    repo = repo_with(tmp_path / "repo", {"notes.txt": "v1\n"}, ignore=("pids/",))
    (repo / "notes.txt").write_text("my unsaved notes\n")  # the user's, uncommitted
    clobber = "mkdir -p pids; echo CLOBBER > notes.txt; echo $$ > pids/cmd.pid; sleep 60"
    srv = fake_server([plan(task()), call("run", cmd=clobber)])
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--allow-dirty", "--base-url", srv.url, cwd=repo
    )
    wait_for(lambda: (repo / "pids" / "cmd.pid").exists(), what="the command to start")
    os.kill(agent.pid, sig)
    assert agent.wait(timeout=30) == 130, agent.stdout + agent.stderr
    assert (repo / "notes.txt").read_text() == "my unsaved notes\n"


def test_sigkill_during_a_command_loses_none_of_the_users_files_it_changed(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    """The user's uncommitted files are on disk while a command runs: after a SIGKILL the
    next run keeps each one the command left changed, as it was, and says where; and it stops
    the command the killed run left running."""
    repo = repo_with(tmp_path / "repo", {"notes.txt": "v1\n", "keep.txt": "k\n"}, ignore=("pids/",))
    (repo / "notes.txt").write_text("my unsaved notes\n")  # the user's, uncommitted
    (repo / "keep.txt").write_text("also mine\n")
    clobber = "mkdir -p pids; echo CLOBBER > notes.txt; echo $$ > pids/cmd.pid; sleep 60"
    srv = fake_server([plan(task()), call("run", cmd=clobber)])
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--allow-dirty", "--base-url", srv.url, cwd=repo
    )
    pids = repo / "pids" / "cmd.pid"
    wait_for(
        lambda: pids.exists() and pids.read_text().strip() or agent.proc.poll() is not None,
        what="the command to start",
    )
    assert agent.proc.poll() is None, agent.stdout + agent.stderr
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait(timeout=30)
    cmd_pid = int(pids.read_text())
    try:
        assert (repo / "notes.txt").read_text() == "CLOBBER\n"  # nothing could put it back
        (repo / "pids").rename(tmp_path / "pids")
        again = agent_in_process(
            "run", GOAL, "--plan-only", "--allow-dirty", "--base-url",
            fake_server([plan(task())]).url, cwd=repo,
        )  # fmt: skip
        assert again.returncode == 0, again.stdout + again.stderr
        said = again.stdout + again.stderr
        assert "may have left your own uncommitted files changed: notes.txt" in said
        # the command the killed run left is stopped by the next run, this one or (tests run
        # side by side) another test's: every run stops what any killed agent left
        wait_for(lambda: pid_gone(cmd_pid), timeout=10, what="the stray command to end")
        if "a killed run's command had left running" in said:
            assert f"(pid {cmd_pid})" in said
        kept = list((repo / ".git" / "agent-userwork").glob("recovered-*/notes.txt"))
        assert len(kept) == 1 and kept[0].read_text() == "my unsaved notes\n"
        assert str(kept[0].parent) in said.replace("\n", "")
        assert not list((repo / ".git" / "agent-userwork").glob("recovered-*/keep.txt"))
        assert (repo / "notes.txt").read_text() == "CLOBBER\n"  # the user decides
        quiet = agent_in_process(
            "run", GOAL, "--plan-only", "--allow-dirty", "--base-url",
            fake_server([plan(task())]).url, cwd=repo,
        )  # fmt: skip
        assert "may have left" not in quiet.stdout + quiet.stderr  # said once
    finally:
        if not pid_gone(cmd_pid):  # a SIGKILLed agent cannot stop its command
            os.kill(cmd_pid, signal.SIGKILL)


def test_a_resume_keeps_the_users_changes_made_since_the_run_stopped(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    """The user's edit after the run stopped (on its branch, or on theirs and then carried
    along by the resume's checkout) is refused without --allow-dirty and kept out of the
    run with it; the run's own uncommitted file, adjusted by the user, is taken along."""
    repo = repo_with(tmp_path / "repo", {"notes.txt": "v1\n"})
    srv = fake_server(
        [plan(task(), SECOND), make_done(), finish(), call("write_file", path="draft.txt",
         content="the run's draft\n"), {**finish(), "delay": 60}]
    )  # fmt: skip
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    wait_for(lambda: len(srv.chat_requests) == 5, what="task 2 waiting for the model")
    os.kill(agent.pid, signal.SIGINT)
    assert agent.wait(timeout=30) == 130, agent.stdout + agent.stderr
    git(repo, "switch", "-q", "main")  # the run's draft.txt comes along, uncommitted
    (repo / "notes.txt").write_text("my own edit\n")
    (repo / "mine.txt").write_text("an idea\n")
    (repo / "draft.txt").write_text("the run's draft, adjusted by me\n")

    proc = _resume(agent_in_process, repo, fake_server([]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "changes made since run" in said and "mine.txt, notes.txt" in said
    assert "draft.txt" not in said.split("stopped")[1].split(")")[0]
    assert (repo / "notes.txt").read_text() == "my own edit\n"

    rest = fake_server(
        [call("write_file", path="notes.txt", content="overwritten\n"),
         call("write_file", path="done2.txt", content="2\n"), finish(), no_facts()]
    )  # fmt: skip
    proc = agent_in_process(
        "run", "--resume", "--yes", "--json", "--allow-dirty", "--base-url", rest.url, cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (repo / "notes.txt").read_text() == "my own edit\n"  # the write was refused
    assert (repo / "mine.txt").read_text() == "an idea\n"
    last = git(repo, "show", "--stat", "--format=", "HEAD")
    assert "draft.txt" in last and "notes.txt" not in last and "mine.txt" not in last
    assert git(repo, "show", "HEAD:draft.txt") == "the run's draft, adjusted by me\n"
    assert sorted(read_state(repo)["protected"]) == ["mine.txt", "notes.txt"]


@pytest.mark.slow
def test_closing_the_terminal_during_a_command_saves_the_state_and_stops_the_command(
    pty_agent, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", ignore=("pids/",))
    srv = fake_server(
        [plan(task()), call("run", cmd="mkdir -p pids; echo $$ > pids/cmd.pid; sleep 60")]
    )
    agent = pty_agent("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo)
    pid_file = repo / "pids" / "cmd.pid"
    cmd_pid = int(
        wait_for(
            lambda: pid_file.exists() and pid_file.read_text().strip(),
            what="the model's command to start",
        )
    )
    assert agent.hang_up(timeout=30) == 130
    wait_for(lambda: pid_gone(cmd_pid), timeout=5, what="the command to be stopped")
    _no_torn_state(repo)
    assert read_state(repo)["status"] == "interrupted"
    assert not (repo / ".agent" / "run.lock").exists()  # the lock was released


# A child that saves a large state over and over through the real RunStore, numbering each save
# on from the last one on disk.
_SAVER = """\
import json, sys
from pathlib import Path
from agent_cli.agent.run.store import RunRecord, RunStore
store = RunStore(Path(sys.argv[1]))
path = store.run_dir("run-1") / "state.json"
n = json.loads(path.read_text())["steps"] if path.exists() else 0
while True:
    n += 1
    store.save(RunRecord(run_id="run-1", goal="g", branch="agent/run-1", steps=n,
                         memory={"padding": [str(n) * 50] * 4000}))
"""


def _new_temp_file(run_dir, known: set[str]) -> bool:
    """Whether a temporary state file not in `known` is there: a save is being written."""
    return any(
        e.name.startswith(".state.json.") and e.name not in known for e in os.scandir(run_dir)
    )


@pytest.mark.slow
def test_sigkill_mid_write_and_at_random_moments_never_leaves_a_torn_state_file(tmp_path):
    state = tmp_path / "runs" / "run-1" / "state.json"
    rng = random.Random(6)
    last = 0
    for i in range(12):
        child = subprocess.Popen([PY, "-c", _SAVER, str(tmp_path)])
        wait_for(
            lambda: state.exists() and json.loads(state.read_text())["steps"] > last,
            what="a new save",
        )
        if i % 2:
            time.sleep(rng.uniform(0.0, 0.05))
        else:  # the worst moment: between the temporary file's creation and the rename
            known = {p.name for p in state.parent.glob(".state.json.*")}
            wait_for(
                lambda: _new_temp_file(state.parent, known), interval=0, what="a save being written"
            )
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        data = json.loads(state.read_text())  # never a torn file: the old one or the new one
        assert data["memory"]["padding"] == [str(data["steps"]) * 50] * 4000
        assert data["steps"] > last
        last = data["steps"]
