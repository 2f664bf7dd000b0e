"""`agent rewind` and `agent runs`: a scripted 3-task run rewound to task 1 and resumed redoes
tasks 2 and 3; a merged run, the user's checkout and a live run are refused; a live run (a real
process) shows in `agent runs --json` with its pid, task and step; a rewind killed halfway is
finished by running it again; the confirmation is asked on a real terminal, and a resume
started while it is asked is refused. The commands whose
own process is not what a test checks run in this process (`agent_in_process`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from ptykit import pty_agent  # noqa: F401 (fixture)
from runkit import Held, events_of, facts, finish, state_of

from conftest import git, make_repo
from ttykit import run_on_pty

TASKS = ("a", "b", "c")
GOAL = "Add the files a.txt, b.txt and c.txt"


def check(name: str) -> str:
    return f"python3 -c \"import pathlib,sys; sys.exit(not pathlib.Path('{name}.txt').exists())\""


def three_task_plan() -> dict:
    tasks = [
        {"goal": f"Add {n}.txt", "acceptance": f"{n}.txt exists", "acceptance_cmd": check(n)}
        for n in TASKS
    ]
    return {
        "tool": "submit_plan",
        "args": {"goal": GOAL, "tasks": tasks, "success_criteria": "the three files exist"},
    }


def write(name: str) -> dict:
    return {"tool": "write_file", "args": {"path": f"{name}.txt", "content": f"{name}\n"}}


def do_tasks(*names: str) -> list[dict]:
    return [s for n in names for s in (write(n), finish(f"added {n}.txt"))]


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo")


def start_run(agent_in_process, srv, repo) -> str:
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return state_of(repo)["run_id"]


def verified_then_back_on_main(agent_in_process, fake_server, repo) -> str:
    """The id of a run whose three tasks were verified, the user's checkout back on main."""
    run_id = start_run(
        agent_in_process, fake_server([three_task_plan(), *do_tasks(*TASKS), facts()]), repo
    )
    git(repo, "switch", "-q", "main")
    return run_id


def tip(repo, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def test_rewind_to_task_1_then_resume_redoes_tasks_2_and_3(agent_in_process, fake_server, repo):
    srv = fake_server([three_task_plan(), *do_tasks(*TASKS), facts()])
    run_id = start_run(agent_in_process, srv, repo)
    branch = f"agent/{run_id}"
    commits = [t["commit"] for t in state_of(repo)["agent_state"]["plan"]]
    assert tip(repo, branch) == commits[2]
    git(repo, "switch", "-q", "main")  # the user goes back to their branch

    proc = agent_in_process("rewind", run_id, "--to-task", "1", "--yes", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert tip(repo, branch) == commits[0]
    assert f"agent run --resume --run-id {run_id}` continues from task 2" in proc.stdout
    state = state_of(repo)
    plan = state["agent_state"]["plan"]
    assert state["status"] == "interrupted"  # stopped, and `--resume` goes on
    trajectory = (repo / ".agent" / "runs" / run_id / "trajectory.jsonl").read_text()
    rewind = [json.loads(line) for line in trajectory.splitlines() if '"rewind"' in line]
    assert [(r["to_task"], r["commit"], r["from"]) for r in rewind] == [(1, commits[0], commits[2])]
    assert [t["status"] for t in plan] == ["verified", "pending", "pending"]
    assert [t["commit"] for t in plan] == [commits[0], None, None]
    assert [t["attempts"] for t in plan] == [1, 0, 0]
    assert tip(repo, "HEAD") == tip(repo, "main")  # the user's checkout did not move

    again = fake_server([*do_tasks("b", "c"), facts()])
    proc = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--yes", "--json", "--base-url", again.url, cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    asked = [json.dumps(r["messages"]) for r in again.chat_requests]
    assert "2. [now] Add b.txt" in asked[0] and "1. [done] Add a.txt" in asked[0]
    assert any("3. [now] Add c.txt" in text for text in asked[2:])
    done = events_of(proc.stdout)[-1]
    assert done["event"] == "run_done" and done["status"] == "verified"
    plan = state_of(repo)["agent_state"]["plan"]
    assert [t["status"] for t in plan] == ["verified"] * 3
    assert plan[0]["commit"] == commits[0] and plan[1]["commit"] not in (None, commits[1])
    log = git(repo, "log", "--format=%s", f"main..{branch}").split("\n")
    assert log[:3] == ["Add c.txt", "Add b.txt", "Add a.txt"]


# A git that kills the `agent` calling it (SIGKILL) once it has moved a ref: the rewind stops
# after the branch moved and before the state was saved.
KILLING_GIT = """#!/bin/sh
{git} "$@"
code=$?
if [ "$1" = update-ref ]; then kill -9 $PPID; fi
exit $code
"""


@pytest.mark.slow
def test_a_rewind_killed_after_the_branch_moved_is_finished_by_running_it_again(
    run_agent, agent_in_process, fake_server, repo, tmp_path
):
    srv = fake_server([three_task_plan(), *do_tasks(*TASKS), facts()])
    run_id = start_run(agent_in_process, srv, repo)
    branch = f"agent/{run_id}"
    commits = [t["commit"] for t in state_of(repo)["agent_state"]["plan"]]
    git(repo, "switch", "-q", "main")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(KILLING_GIT.format(git=shutil.which("git")))
    (bin_dir / "git").chmod(0o755)
    path = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    # a real process: the git above kills the `agent` that runs it
    killed = run_agent("rewind", run_id, "--to-task", "1", "--yes", cwd=repo, env=path)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert tip(repo, branch) == commits[0]  # moved, and the state still says task 2 is done
    assert [t["status"] for t in state_of(repo)["agent_state"]["plan"]] == ["verified"] * 3

    again = fake_server([])
    resume = ["run", "--resume", "--run-id", run_id, "--yes", "--base-url", again.url]
    refused = agent_in_process(*resume, cwd=repo)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"{branch} was moved back behind it: a rewind of the run was stopped" in refused.stderr
    assert f"finish it with `agent rewind {run_id} --to-task 1`, then resume" in refused.stderr
    assert not again.chat_requests
    assert git(repo, "branch", "--show-current").strip() == "main"  # left for the rewind

    finished = agent_in_process("rewind", run_id, "--to-task", "1", "--yes", cwd=repo)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert tip(repo, branch) == commits[0]
    plan = state_of(repo)["agent_state"]["plan"]
    assert [t["status"] for t in plan] == ["verified", "pending", "pending"]


def test_a_merged_run_and_the_users_checkout_are_refused(agent_in_process, fake_server, repo):
    srv = fake_server([three_task_plan(), *do_tasks(*TASKS), facts()])
    run_id = start_run(agent_in_process, srv, repo)
    branch = f"agent/{run_id}"
    before = tip(repo, branch)
    state_file = repo / ".agent" / "runs" / run_id / "state.json"
    saved = state_file.read_bytes()

    checked_out = agent_in_process("rewind", run_id, "--yes", cwd=repo)  # still on the run's branch
    assert checked_out.returncode == 1
    lines = checked_out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{branch} is checked out in your work tree" in lines[0]

    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", branch)
    merged = agent_in_process("rewind", run_id, "--yes", cwd=repo)
    assert merged.returncode == 1
    assert f"run {run_id} is merged: {branch} is part of main" in merged.stderr
    assert tip(repo, branch) == before and tip(repo, "main") == before
    assert state_file.read_bytes() == saved


def test_without_a_terminal_or_yes_nothing_moves(agent_in_process, fake_server, repo):
    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    before = tip(repo, f"agent/{run_id}")
    proc = agent_in_process("rewind", run_id, cwd=repo)
    assert proc.returncode == 2
    assert "there is no terminal to ask on" in proc.stderr and "--yes" in proc.stderr
    assert tip(repo, f"agent/{run_id}") == before


@pytest.mark.slow
def test_the_confirmation_is_asked_on_a_terminal(agent_in_process, fake_server, pty_agent, repo):
    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    first = state_of(repo)["agent_state"]["plan"][0]["commit"]
    declined = pty_agent("rewind", run_id, "--to-task", "1", cwd=repo)
    declined.expect("set 2 task(s) pending again? [y/N]")
    declined.type("n\n")
    assert declined.wait() == 1
    assert tip(repo, f"agent/{run_id}") != first
    agreed = pty_agent("rewind", run_id, "--to-task", "1", cwd=repo)
    agreed.expect("[y/N]")
    agreed.type("y\n")
    assert agreed.wait() == 0, agreed.text
    assert tip(repo, f"agent/{run_id}") == first


@pytest.mark.slow
def test_a_resume_started_while_a_rewind_of_the_run_is_under_way_is_refused(
    agent_in_process, fake_server, pty_agent, repo
):
    # another run holds the checkout as the rewind starts, and ends while it asks: the rewind
    # holds the run's own lock, which every resume takes first, so the resume cannot begin
    from agent_cli.agent.run.live import checkout_lock
    from agent_cli.workspace.lock import RunLock

    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    first = state_of(repo)["agent_state"]["plan"][0]["commit"]
    state_file = repo / ".agent" / "runs" / run_id / "state.json"
    other = RunLock(checkout_lock(repo / ".agent", repo))
    with other:
        other.name("run-other")
        asked = pty_agent("rewind", run_id, "--to-task", "1", cwd=repo)
        asked.expect("[y/N]")
    saved = state_file.read_bytes()
    srv = fake_server([facts()])
    resume = ["run", "--resume", "--run-id", run_id, "--yes", "--base-url", srv.url]
    refused = agent_in_process(*resume, cwd=repo)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert f"run {run_id} is in progress (pid {asked.pid}); nothing was changed" in lines[0]
    assert not srv.chat_requests and state_file.read_bytes() == saved
    assert git(repo, "branch", "--show-current").strip() == "main"
    asked.type("y\n")
    assert asked.wait() == 0, asked.text
    assert tip(repo, f"agent/{run_id}") == first
    assert [t["status"] for t in state_of(repo)["agent_state"]["plan"]] == [
        "verified",
        "pending",
        "pending",
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "keys, env",
    [
        (b"\x04", {}),  # Ctrl-D: the end of input
        # a byte that is not UTF-8, under a strict UTF-8 locale such as en_US.UTF-8
        (b"\xff\n", {"PYTHONIOENCODING": "utf-8:strict"}),
    ],
    ids=["ctrl-d", "not-utf8"],
)
def test_an_answer_that_is_no_yes_at_the_confirmation_changes_nothing(
    agent_in_process, fake_server, pty_agent, repo, keys, env
):
    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    before = tip(repo, f"agent/{run_id}")
    asked = pty_agent("rewind", run_id, "--to-task", "1", cwd=repo, env=env)
    asked.expect("[y/N]")
    os.write(asked.fd, keys)
    assert asked.wait() == 1, asked.text
    assert asked.text.rstrip().endswith(
        "error: not confirmed; nothing was changed (run again and answer y)"
    ), asked.text
    assert tip(repo, f"agent/{run_id}") == before


@pytest.mark.slow
def test_ctrl_c_at_the_confirmation_says_so_in_one_line_and_changes_nothing(
    agent_in_process, fake_server, pty_agent, repo
):
    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    before = tip(repo, f"agent/{run_id}")
    asked = pty_agent("rewind", run_id, "--to-task", "1", cwd=repo)
    asked.expect("[y/N]")
    asked.type("\x03")
    assert asked.wait() == 130, asked.text
    assert asked.text.endswith("[y/N] ^C\nerror: interrupted\n"), asked.text
    assert tip(repo, f"agent/{run_id}") == before


@pytest.mark.slow
def test_with_stdout_in_a_file_the_confirmation_is_asked_on_the_terminal(
    agent_in_process, fake_server, agent_env, repo, tmp_path
):
    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    first = state_of(repo)["agent_state"]["plan"][0]["commit"]
    argv = [sys.executable, "-m", "agent_cli", "rewind", run_id, "--to-task", "1"]
    with open(tmp_path / "out.txt", "w") as out:  # `agent rewind ... > out.txt`
        code, raw = run_on_pty(
            argv, cwd=repo, env=agent_env, answers=[("[y/N]", "y\n")], stdout=out, timeout=60
        )
    assert code == 0, raw + (tmp_path / "out.txt").read_text()
    assert "set 2 task(s) pending again? [y/N] y" in raw
    assert tip(repo, f"agent/{run_id}") == first


@pytest.mark.slow
def test_with_both_outputs_in_a_file_and_no_terminal_to_ask_on_nothing_moves(
    agent_in_process, fake_server, agent_env, repo, tmp_path
):
    # stdin is a terminal but not this process's own (no /dev/tty), both outputs a file:
    # the question could not be seen, so it is not asked (the rewind would wait unseen)
    run_id = verified_then_back_on_main(agent_in_process, fake_server, repo)
    before = tip(repo, f"agent/{run_id}")
    argv = [sys.executable, "-m", "agent_cli", "rewind", run_id, "--to-task", "1"]
    with open(tmp_path / "out.txt", "w") as out:  # `agent rewind ... > out.txt 2>&1`
        code, raw = run_on_pty(argv, cwd=repo, env=agent_env, stdout=out, stderr=out, timeout=60)
    said = (tmp_path / "out.txt").read_text()
    assert code == 2 and "there is no terminal to ask on" in said, raw + said
    assert tip(repo, f"agent/{run_id}") == before


def runs_json(agent_in_process, repo) -> list[dict]:
    proc = agent_in_process("runs", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_a_live_run_is_listed_with_pid_task_and_step_and_cannot_be_rewound(
    agent_in_process, agent_env, fake_server, repo
):
    # task 1's second reply waits until released: the run, a real process of its own, is live
    # at task 1 after its first tool call while `agent runs` and `agent rewind` look at it
    held = Held([three_task_plan(), write("a"), {**finish(), "held": True}, *do_tasks("b", "c")])
    srv = fake_server(held)
    child = subprocess.Popen(
        [sys.executable, "-m", "agent_cli", "run", GOAL, "--yes", "--json"]
        + ["--base-url", srv.url],
        cwd=repo,
        env=agent_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with held:
            deadline, live = time.monotonic() + 120, []
            while time.monotonic() < deadline and not live:
                rows = runs_json(agent_in_process, repo)
                live = [r for r in rows if r.get("live") and r.get("step")]
                time.sleep(0.1)
            assert live, "the run never showed as live"
            row = live[0]
            assert row["pid"] == child.pid and row["run_id"] == state_of(repo)["run_id"]
            assert (row["task"], row["tasks"], row["task_goal"]) == (1, 3, "Add a.txt")
            assert row["step"] == 1 and row["worktree"] is None
            refused = agent_in_process("rewind", row["run_id"], "--yes", cwd=repo)
            assert refused.returncode == 1
            assert f"run {row['run_id']} is in progress (pid {child.pid})" in refused.stderr
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, out + err
    after = runs_json(agent_in_process, repo)
    assert [(r["status"], "live" in r, "pid" in r) for r in after] == [("verified", False, False)]
