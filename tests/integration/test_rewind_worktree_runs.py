"""Worktree runs and `agent rewind` / `agent runs` / `agent clean`: a live worktree run (a real
process) is listed with its worktree; a verified worktree run (its tree removed) rewound to task
1 gets its tree back on `--resume` and redoes task 2; a rejected run's tree stays until `agent
clean --force`. The commands whose own process is not what a test checks run in this process."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from runkit import Held, facts, finish

from conftest import git, make_repo

GOAL = "Add one.txt and two.txt"


def check(name: str) -> str:
    return f"python3 -c \"import pathlib,sys; sys.exit(not pathlib.Path('{name}').exists())\""


def two_task_plan() -> dict:
    tasks = [
        {"goal": f"Add {n}", "acceptance": f"{n} exists", "acceptance_cmd": check(n)}
        for n in ("one.txt", "two.txt")
    ]
    return {"tool": "submit_plan", "args": {"goal": GOAL, "tasks": tasks}}


def write(name: str) -> dict:
    return {"tool": "write_file", "args": {"path": name, "content": f"{name}\n"}}


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo")


def only_run(repo) -> dict:
    (state,) = (repo / ".agent" / "runs").glob("*/state.json")
    return json.loads(state.read_text())


def test_a_rewound_worktree_run_gets_its_tree_back_and_redoes_task_2(
    agent_in_process, fake_server, repo
):
    srv = fake_server([two_task_plan(), write("one.txt"), finish(), write("two.txt"), finish()])
    proc = agent_in_process(
        "run", GOAL, "--worktree", "--yes", "--json", "--base-url", srv.url, cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run(repo)
    tree = repo / ".agent" / "worktrees" / run["run_id"]
    assert not tree.exists()  # every task verified: the run removed it
    first = run["agent_state"]["plan"][0]["commit"]
    proc = agent_in_process("rewind", run["run_id"], "--to-task", "1", "--yes", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(repo, "rev-parse", run["branch"]).strip() == first
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"

    again = fake_server([write("two.txt"), {**finish(), "delay": 0}, facts()])
    proc = agent_in_process(
        "run",
        "--resume",
        "--run-id",
        run["run_id"],
        "--yes",
        "--json",
        "--base-url",
        again.url,
        cwd=repo,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"the run's worktree {tree} is made again" in proc.stdout
    assert "2. [now] Add two.txt" in json.dumps(again.chat_requests[0]["messages"])
    plan = only_run(repo)["agent_state"]["plan"]
    assert [t["status"] for t in plan] == ["verified", "verified"]
    files = git(repo, "ls-tree", "-r", "--name-only", run["branch"]).split()
    assert sorted(files) == ["README.md", "one.txt", "two.txt"]


@pytest.mark.slow  # the run is a real `agent` process
def test_a_live_worktree_run_is_listed_with_its_worktree(
    agent_in_process, agent_env, fake_server, repo
):
    # task 1's second reply waits until released: the run is live at task 1, step 1
    held = Held(
        [two_task_plan(), write("one.txt"), {**finish(), "held": True}, write("two.txt"), finish()]
    )
    srv = fake_server(held)
    child = subprocess.Popen(
        [sys.executable, "-m", "agent_cli", "run", GOAL, "--worktree", "--yes", "--json"]
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
                rows = json.loads(agent_in_process("runs", "--json", cwd=repo).stdout)
                live = [r for r in rows if r.get("live") and r.get("step")]
                time.sleep(0.1)
            assert live, "the run never showed as live"
            row = live[0]
            tree = repo / ".agent" / "worktrees" / row["run_id"]
            assert row["pid"] == child.pid and row["worktree"] == str(tree.resolve())
            assert (row["task"], row["tasks"], row["step"]) == (1, 2, 1)
            table = agent_in_process("runs", cwd=repo, env={"COLUMNS": "250"}).stdout
            assert f"live: pid {child.pid}, task 1/2, step 1, in {tree.resolve()}" in table, table
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, out + err


@pytest.mark.slow  # the run is a real `agent` process
def test_a_worktree_run_still_planning_is_listed_starting_with_its_goal_masked(
    agent_in_process, agent_env, fake_server, repo
):
    key = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12"  # a known key shape, in the goal
    goal = f"{GOAL} with the key {key}"
    held = Held([{**two_task_plan(), "held": True}, write("one.txt"), finish(), write("two.txt")])
    srv = fake_server(held)
    child = subprocess.Popen(
        [sys.executable, "-m", "agent_cli", "run", goal, "--worktree", "--yes", "--json"]
        + ["--base-url", srv.url],
        cwd=repo,
        env=agent_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with held:  # the plan's reply waits: the run has its id and worktree, and saved nothing
            deadline, planning = time.monotonic() + 120, []
            while time.monotonic() < deadline and not planning:
                rows = json.loads(agent_in_process("runs", "--json", cwd=repo).stdout)
                planning = [r for r in rows if r.get("live") and r["status"] == "starting"]
                time.sleep(0.1)
            assert planning, "the run never showed as starting"
            (row,) = planning
            assert row["pid"] == child.pid and row["goal"] == f"{GOAL} with the key [REDACTED]"
            lock = repo / ".agent" / "runs" / row["run_id"] / "run.lock"
            assert key not in lock.read_text()  # masked where it is written, not only shown
    finally:
        child.kill()
        child.wait()


def test_a_rejected_worktree_run_keeps_its_tree_until_clean_force(
    agent_in_process, fake_server, repo
):
    srv = fake_server(
        [two_task_plan(), write("wrong.txt"), finish("tried"), finish("tried again"), facts()]
    )
    proc = agent_in_process(
        "run", GOAL, "--worktree", "--yes", "--json", "--base-url", srv.url, cwd=repo
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    run = only_run(repo)
    tree = (repo / ".agent" / "worktrees" / run["run_id"]).resolve()
    assert (tree / "wrong.txt").exists()
    kept = agent_in_process("clean", cwd=repo)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.strip() == (
        f"kept {tree}: it holds the uncommitted work of rejected task 1 (--force removes it)"
    )
    assert (tree / "wrong.txt").exists()
    forced = agent_in_process("clean", "--force", cwd=repo)
    assert forced.returncode == 0 and f"removed worktree {tree}" in forced.stdout
    assert not tree.exists()


@pytest.mark.slow  # the runs are real `agent` processes
def test_two_worktree_runs_at_once_are_both_listed_live(
    agent_in_process, agent_env, fake_server, repo
):
    from agent_cli.llm.fake.routes import ByGoal

    def script(name: str) -> list[dict]:
        goal = {"goal": f"Add {name}", "acceptance": "it exists", "acceptance_cmd": check(name)}
        return [
            {"tool": "submit_plan", "args": {"goal": f"Add {name}", "tasks": [goal]}},
            write(name),
            {**finish(), "held": True},  # each run waits at task 1, step 1 until released
            facts(),
        ]

    held = Held(ByGoal({f"Add {n}": script(n) for n in ("x.txt", "y.txt")}))
    srv = fake_server(held)
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "agent_cli", "run", f"Add {n}", "--worktree", "--yes"]
            + ["--json", "--base-url", srv.url],
            cwd=repo,
            env=agent_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in ("x.txt", "y.txt")
    ]
    try:
        with held:
            deadline, live = time.monotonic() + 120, []
            while time.monotonic() < deadline and len(live) < 2:
                rows = json.loads(agent_in_process("runs", "--json", cwd=repo).stdout)
                live = [r for r in rows if r.get("live") and r.get("step")]
                time.sleep(0.1)
            assert sorted(r["pid"] for r in live) == sorted(c.pid for c in children)
            assert sorted(r["task_goal"] for r in live) == ["Add x.txt", "Add y.txt"]
            assert all(r["worktree"] and r["task"] == 1 and r["step"] == 1 for r in live)
        results = [c.communicate(timeout=120) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
    assert [c.returncode for c in children] == [0, 0], results
