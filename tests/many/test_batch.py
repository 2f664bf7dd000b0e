"""`agent batch FILE --jobs N`: each goal a worktree run, N at a time, one record at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agent_cli.cli.batch.driver import Batch, Launch
from agent_cli.cli.batch.goals import Goal
from agent_cli.llm.fake.routes import ByGoal
from conftest import git
from many.manykit import (
    branch_files,
    checkout,
    creates,
    goal_of,
    hinted,
    rejected,
    state,
    status,
    worktrees,
)
from reliability.relkit import PY, call, cli_env, pid_gone, repo_with, to_a_gone_reader, wait_for

# Each run of a batch is a process of its own (`python -m agent_cli run`): a test in which a
# batch starts one is slow; one refused before any run starts is not.
slow = pytest.mark.slow
NAMES = [f"file{i}.txt" for i in range(6)]


def goals_toml(path: Path, names: list[str]) -> Path:
    path.write_text("".join(f'[[goals]]\ngoal = "{goal_of(n)}"\n\n' for n in names))
    return path


def batch(cli, *args: str, repo: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`agent batch ARGS` in `repo` through `cli` (`agent_in_process`: the batch's own process
    is not what these tests check; each of its runs is a process of its own all the same)."""
    return cli("batch", *args, cwd=repo, env=env, timeout=300)


@slow
def test_four_goals_three_at_a_time_one_rejected_then_resumed_with_a_hint(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    names = NAMES[:4]  # one more than the runs at once: one waits for a free place
    scripts = {goal_of(n): creates(n) for n in names[:3]}
    scripts[goal_of(names[3])] = rejected(names[3])
    srv = fake_server(ByGoal(scripts))
    before = checkout(repo)
    file = goals_toml(tmp_path / "goals.toml", names)
    proc = batch(
        agent_in_process, str(file), "--jobs", "3", "--yes", "--base-url", srv.url, repo=repo
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.parent.parent == repo / ".agent" / "batches" and path.name == "batch.json"
    record = json.loads(path.read_text())
    assert record["exit_code"] == 3
    runs = record["runs"]
    assert [r["goal"] for r in runs] == [goal_of(n) for n in names]
    assert [r["status"] for r in runs] == ["verified"] * 3 + ["escalated"]
    assert [r["exit_code"] for r in runs] == [0] * 3 + [3]
    for r, name in zip(runs[:3], names[:3], strict=True):
        assert r["branch"] == f"agent/{r['run_id']}" and r["worktree"] is None
        assert r["proofs"] == ["red-green"] and r["cost_usd"] == 0
        assert name in branch_files(repo, r["branch"])
    stuck = runs[3]
    tree = repo / ".agent" / "worktrees" / stuck["run_id"]
    assert stuck["worktree"] == str(tree) and status(tree) == f"?? not-{names[3]}\n"
    assert stuck["resume"] == f'agent run --resume --run-id {stuck["run_id"]} --hint "..."'
    assert worktrees(repo) == [str(repo), str(tree)]  # only the rejected run's is kept
    assert srv.max_in_flight <= 3
    assert checkout(repo) == before and status(repo) == ""
    assert "1 escalated, 3 verified (exit code 3)" in proc.stdout
    assert record["overlaps"] == [] and "both change" not in proc.stdout  # four files, one each

    rest = fake_server(hinted(names[3]))
    again = agent_in_process(
        "run", "--resume", "--run-id", stuck["run_id"], "--hint", f"write {names[3]} itself",
        "--yes", "--json", "--base-url", rest.url, cwd=repo,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert state(repo, stuck["run_id"])["status"] == "verified"
    assert names[3] in branch_files(repo, stuck["branch"])
    assert not tree.exists() and worktrees(repo) == [str(repo)]
    assert checkout(repo) == before


@slow
def test_the_json_stream_tags_every_event_with_its_goal_and_run(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    names = NAMES[:2]
    srv = fake_server(ByGoal({goal_of(n): creates(n) for n in names}))
    file = tmp_path / "goals.jsonl"
    file.write_text("".join(json.dumps({"goal": goal_of(n)}) + "\n" for n in names))
    proc = batch(
        agent_in_process, str(file), "--jobs", "2", "--yes", "--json", "--base-url", srv.url,
        repo=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["event"] == "batch_started" and events[-1]["event"] == "batch_done"
    assert events[-1]["exit_code"] == 0 and Path(events[-1]["batch_json"]).is_file()
    runs = events[1:-1]
    assert {e["job"] for e in runs} == {1, 2}
    for job in (1, 2):
        mine = [e for e in runs if e["job"] == job]
        done = [e for e in mine if e["event"] == "run_done"]
        assert len(done) == 1 and done[0]["status"] == "verified"
        run_id = done[0]["run_id"]
        started = mine.index(next(e for e in mine if e["event"] == "run_started"))
        assert all(e["run_id"] == run_id for e in mine[started:])
        assert mine[-1]["event"] == "job_done" and mine[-1]["exit_code"] == 0


@slow
def test_ctrl_c_stops_every_run_with_its_state_saved_and_no_process_left(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    env = cli_env(tmp_path / "home")
    names = NAMES[:3]
    slow = {goal_of(n): creates(n)[:1] + [{**creates(n)[1], "delay": 60}] for n in names}
    srv = fake_server(ByGoal(slow))
    file = goals_toml(tmp_path / "goals.toml", names)
    with open(tmp_path / "out.txt", "w") as out:
        proc = subprocess.Popen(
            [PY, "-m", "agent_cli", "batch", str(file), "--jobs", "2", "--yes", "--json",
             "--base-url", srv.url],
            cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(lambda: srv.in_flight == 2, timeout=90, what="two runs waiting on the model")
        pids = _children_of(proc.pid)
        assert len(pids) == 2
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=90) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(pid_gone(pid) for pid in pids)
    record = json.loads(next((repo / ".agent" / "batches").glob("*/batch.json")).read_text())
    assert [r["status"] for r in record["runs"]] == ["interrupted", "interrupted", "not_started"]
    for r in record["runs"][:2]:
        assert state(repo, r["run_id"])["status"] == "interrupted"
        assert r["worktree"]  # kept to resume in
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def _slow_batch(fake_server, tmp_path, delay: float, shell: str, **env: str):
    """A batch of two slow runs started through `sh -c SHELL` (which then execs the batch),
    with `env` added to its environment."""
    repo = repo_with(tmp_path / "repo")
    names = NAMES[:2]
    slow = {goal_of(n): creates(n)[:1] + [{**creates(n)[1], "delay": delay}] for n in names}
    srv = fake_server(ByGoal(slow))
    file = goals_toml(tmp_path / "goals.toml", names)
    argv = [PY, "-m", "agent_cli", "batch", str(file), "--jobs", "2", "--yes", "--json",
            "--base-url", srv.url]  # fmt: skip
    out = open(tmp_path / "out.txt", "w")  # the batch writes it; closed once it has it
    proc = subprocess.Popen(
        ["sh", "-c", f'{shell}; exec "$0" "$@"', *argv],
        cwd=repo, env=cli_env(tmp_path / "home", **env), stdin=subprocess.DEVNULL, stdout=out,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    out.close()
    wait_for(lambda: srv.in_flight == 2, timeout=90, what="two runs waiting on the model")
    return repo, proc


@slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])  # SIGHUP: its terminal closed
def test_sigterm_stops_a_batch_started_with_sigint_ignored(fake_server, tmp_path, sig):
    repo, proc = _slow_batch(fake_server, tmp_path, 60, 'trap "" INT')  # as `cmd &` in a script
    try:
        pids = _children_of(proc.pid)
        os.kill(proc.pid, sig)
        assert proc.wait(timeout=45) == 130  # not the 60 s grace: the runs took SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(pid_gone(pid) for pid in pids)
    record = json.loads(next((repo / ".agent" / "batches").glob("*/batch.json")).read_text())
    assert [r["status"] for r in record["runs"]] == ["interrupted", "interrupted"]
    assert all(state(repo, r["run_id"])["status"] == "interrupted" for r in record["runs"])


@slow
def test_a_second_stop_while_the_runs_save_their_state_still_ends_with_the_record(
    fake_server, tmp_path
):
    """Ctrl-C, then the terminal closing (SIGHUP) and SIGTERM while the runs stop (each runs
    its run_end hook first, for 3 s): the batch waits for them and writes its record."""
    rc = tmp_path / "user-agentrc"
    hook = [PY, "-c", "import time; time.sleep(3)"]
    rc.write_text(f"[[hooks.run_end]]\ncommand = {json.dumps(hook)}\ntimeout_s = 30\n")
    repo, proc = _slow_batch(fake_server, tmp_path, 60, "true", AGENT_RC=str(rc))
    try:
        pids = _children_of(proc.pid)
        os.kill(proc.pid, signal.SIGINT)
        for again in (signal.SIGHUP, signal.SIGTERM):
            time.sleep(0.5)
            os.kill(proc.pid, again)
        assert proc.wait(timeout=45) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(pid_gone(pid) for pid in pids)
    last = json.loads((tmp_path / "out.txt").read_text().splitlines()[-1])
    assert last["event"] == "batch_done" and last["statuses"] == {"interrupted": 2}
    record = json.loads(Path(last["batch_json"]).read_text())
    assert [(r["status"], r["exit_code"]) for r in record["runs"]] == [("interrupted", 130)] * 2
    assert all(state(repo, r["run_id"])["status"] == "interrupted" for r in record["runs"])


@slow
def test_the_runs_of_a_killed_batch_stop_as_interrupted_with_their_state_saved(
    fake_server, tmp_path
):
    repo, proc = _slow_batch(fake_server, tmp_path, 3, "true")
    pids = _children_of(proc.pid)
    assert len(pids) == 2
    proc.kill()  # no chance to stop its runs: they find nobody reading their events
    proc.wait(timeout=30)
    wait_for(lambda: all(pid_gone(pid) for pid in pids), timeout=90, what="the runs to stop")
    states = [json.loads(p.read_text()) for p in (repo / ".agent" / "runs").glob("*/state.json")]
    assert [s["status"] for s in states] == ["interrupted", "interrupted"]
    trajectories = (repo / ".agent" / "runs").glob("*/trajectory.jsonl")
    assert not any('"crash"' in t.read_text() for t in trajectories)


@slow
def test_a_batch_whose_reader_is_gone_stops_its_runs_with_their_state_saved(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    names = NAMES[:2]
    srv = fake_server(ByGoal({goal_of(n): creates(n, delay=1.0) for n in names}))
    file = goals_toml(tmp_path / "goals.toml", names)
    proc = subprocess.Popen(
        [PY, "-m", "agent_cli", "batch", str(file), "--json", "--yes", "--base-url", srv.url],
        cwd=repo,
        env=cli_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    working = set()
    for line in proc.stdout:  # read until both runs are in their task
        ev = json.loads(line)
        working |= {ev["job"]} if ev["event"] == "tool_call" else set()
        if len(working) == len(names):
            break
    proc.stdout.close()  # what read the stream is gone, as `| head` that has read enough
    assert proc.wait(timeout=120) == 130
    assert "Traceback" not in proc.stderr.read().decode()
    record = json.loads(next((repo / ".agent" / "batches").glob("*/batch.json")).read_text())
    assert [r["status"] for r in record["runs"]] == ["interrupted"] * len(names)
    for run in record["runs"]:  # each saved its state as on Ctrl-C: resumable, not killed
        assert state(repo, run["run_id"])["status"] == "interrupted"


@slow
def test_a_batch_whose_output_is_closed_at_once_leaves_no_empty_record(fake_server, tmp_path):
    """`agent batch --json ... | head -0`: the first line cannot be written, no run starts,
    and no empty batches/<id>/ is left behind."""
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(ByGoal({goal_of(n): creates(n) for n in NAMES[:2]}))
    file = goals_toml(tmp_path / "goals.toml", NAMES[:2])
    proc = to_a_gone_reader(  # what reads the stream is gone before the batch writes a line
        cli_env(tmp_path / "home"),
        repo,
        *("batch", str(file), "--json", "--yes", "--base-url", srv.url),
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert list((repo / ".agent" / "batches").iterdir()) == []
    assert not list((repo / ".agent").glob("runs/*"))  # no run started


def _children_of(pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize(
    "ends, code",
    [
        ([("verified", 0), ("interrupted", 130)], 130),  # a run stopped on its own: SIGTERM
        ([("interrupted", 137), ("escalated", 3)], 130),  # killed: the OOM killer's SIGKILL
        ([("interrupted", 130), ("failed", 1)], 1),  # an error comes first
        ([("verified", 0), ("escalated", 3)], 3),
    ],
)
def test_the_batch_exits_130_when_a_run_was_interrupted_on_its_own(tmp_path, ends, code):
    batch = Batch(
        [Goal(goal=f"goal {i}") for i in range(len(ends))],
        Launch(tmp_path, tmp_path, tmp_path),
        2,
        None,
        on_event=lambda job, ev: None,
        on_change=lambda jobs: None,
    )
    for job, (ended, exit_code) in zip(batch.jobs, ends, strict=True):
        job.status, job.exit_code, job.signum = ended, exit_code, max(0, exit_code - 128)
    assert batch.exit_code() == code


def test_a_goal_file_with_a_bad_goal_is_refused_in_one_line(agent_in_process, tmp_path):
    repo = repo_with(tmp_path / "repo")
    file = tmp_path / "goals.toml"
    file.write_text('[[goals]]\ngoal = "a"\n\n[[goals]]\ngoal = "b"\nmax_steps = 0\n')
    proc = batch(agent_in_process, str(file), "--yes", repo=repo)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "goal 2: max_steps" in lines[0], proc.stderr
    assert not (repo / ".agent").exists()
    # an acceptance command every run would refuse (`--accept`'s check): refused up front
    file = tmp_path / "goals.jsonl"
    accepts = [["test -f a.txt"], ["test -f b.txt || true"]]
    file.write_text("".join(json.dumps({"goal": "g", "accept": a}) + "\n" for a in accepts))
    proc = batch(agent_in_process, str(file), "--yes", repo=repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "line 2: accept: `test -f b.txt || true` holds the shell operator '||'" in line
    assert proc.stdout == "" and not (repo / ".agent").exists()


def test_a_batch_without_the_key_its_endpoint_needs_starts_no_run(agent_in_process, tmp_path):
    repo = repo_with(tmp_path / "repo")
    file = goals_toml(tmp_path / "goals.toml", NAMES[:3])
    proc = batch(agent_in_process, str(file), "--yes", repo=repo)  # api.openai.com
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no API key is set for https://api.openai.com/v1" in lines[0]
    assert not (repo / ".agent" / "batches").exists() and not (repo / ".agent" / "runs").exists()


def test_a_batch_whose_endpoint_cannot_be_reached_is_refused_once_and_starts_no_run(
    agent_in_process, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    file = goals_toml(tmp_path / "goals.toml", NAMES[:3])
    url = "http://127.0.0.1:9/v1"
    proc = batch(agent_in_process, str(file), "--yes", "--base-url", url, repo=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "cannot reach the model endpoint http://127.0.0.1:9/v1" in lines[0]
    assert "no run was started" in lines[0] and proc.stdout == ""
    assert not (repo / ".agent" / "batches").exists() and not (repo / ".agent" / "runs").exists()
    assert git(repo, "worktree", "list").count("\n") == 1  # the checkout alone


def test_a_batch_inside_a_runs_worktree_is_refused_once_and_starts_no_run(
    agent_in_process, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    tree = repo / ".agent" / "worktrees" / "20250101-000000-aaaa"
    git(repo, "worktree", "add", "-q", "--detach", str(tree))  # a run's worktree, kept
    file = goals_toml(tmp_path / "goals.toml", NAMES[:3])
    url = "http://127.0.0.1:9"
    proc = batch(agent_in_process, str(file), "--yes", "--base-url", url, repo=tree)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is the worktree of run 20250101-000000-aaaa" in lines[0], lines
    assert f"start it from your checkout {repo}" in lines[0] and proc.stdout == ""
    assert not (repo / ".agent" / "batches").exists() and not (repo / ".agent" / "runs").exists()


def test_a_budget_that_is_no_number_of_dollars_is_refused_before_any_run(
    agent_in_process, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    file = goals_toml(tmp_path / "goals.toml", NAMES[:1])
    for budget in ("inf", "nan"):
        proc = batch(agent_in_process, str(file), "--yes", "--budget-usd", budget, repo=repo)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "--budget-usd" in proc.stderr and "Traceback" not in proc.stderr
        assert not (repo / ".agent" / "batches").exists()


def test_a_repository_no_run_can_start_in_is_refused_once_and_starts_no_run(
    agent_in_process, tmp_path
):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    detached = repo_with(tmp_path / "detached")
    git(detached, "switch", "-q", "--detach")
    file = goals_toml(tmp_path / "goals.toml", NAMES[:3])
    for repo, said in (
        (empty, "the repository has no commits yet"),
        (detached, "HEAD is detached"),
    ):
        url = "http://127.0.0.1:9"
        proc = batch(agent_in_process, str(file), "--yes", "--base-url", url, repo=repo)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], lines
        assert proc.stdout == "" and not (repo / ".agent" / "batches").exists()


@slow
def test_a_shared_budget_passes_what_is_left_and_starts_nothing_once_spent(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    # a price set makes the loopback server billed: each reply's 100 prompt tokens cost $0.10
    env = {"AGENT_PRICE_INPUT_PER_MTOK": "1000"}
    names = NAMES[:3]
    srv = fake_server(ByGoal({goal_of(n): creates(n) for n in names}))
    file = goals_toml(tmp_path / "goals.toml", names)
    proc = batch(
        agent_in_process, str(file), "--jobs", "1", "--yes", "--budget-usd", "0.5",
        "--base-url", srv.url, repo=repo, env=env,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    runs = json.loads(Path(proc.stdout.strip().splitlines()[-1]).read_text())["runs"]
    assert [r["status"] for r in runs][::2] == ["verified", "not_started"]
    assert runs[1]["exit_code"] == 4 and runs[1]["status"] == "budget_exhausted"
    assert runs[0]["cost_usd"] == pytest.approx(0.4, abs=0.01)
    assert sum(r["cost_usd"] for r in runs) <= 0.5 + 0.1  # the last reply may cross the line
    assert srv.script.served[goal_of(names[2])] == 0


@slow
def test_runs_at_once_that_pass_the_shared_budget_together_are_stopped(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    env = {"AGENT_PRICE_INPUT_PER_MTOK": "1000"}  # $0.10 a reply
    names = NAMES[:2]
    srv = fake_server(ByGoal({goal_of(n): creates(n, delay=0.5) for n in names}))
    file = goals_toml(tmp_path / "goals.toml", names)
    proc = batch(
        agent_in_process, str(file), "--jobs", "2", "--yes", "--budget-usd", "0.5",
        "--base-url", srv.url, repo=repo, env=env,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    runs = json.loads(Path(proc.stdout.strip().splitlines()[-1]).read_text())["runs"]
    stopped = [r for r in runs if r["status"] == "budget_exhausted"]
    assert stopped and all(r["resume"] and r["run_id"] for r in stopped)
    assert all(state(repo, r["run_id"])["status"] == "interrupted" for r in stopped)
    assert sum(r["cost_usd"] for r in runs) < 0.8  # both would have spent $0.40


@slow
def test_a_run_killed_outright_is_said_as_agent_runs_shows_it_and_its_hook_does_not_outlive_it(
    agent_in_process, fake_server, tmp_path
):
    """A run SIGKILLed on its own (the OOM killer): its line names the signal, batch.json says
    what `agent runs` says (interrupted, resumable), and the batch exits 130."""
    repo = repo_with(tmp_path / "repo")
    pids = tmp_path / "hook.pids"  # the hook's pid and its run's
    hook = f"import os, pathlib, time; pathlib.Path({str(pids)!r}).write_text(f'{{os.getpid()}} {{os.getppid()}}'); time.sleep(120)"
    rc = tmp_path / "user-agentrc"
    rc.write_text(
        f"[[hooks.post_tool]]\ncommand = {json.dumps([PY, '-c', hook])}\ntimeout_s = 300\n"
    )
    srv = fake_server(ByGoal({goal_of("a.txt"): creates("a.txt")}))
    file = goals_toml(tmp_path / "goals.toml", ["a.txt"])
    env = cli_env(tmp_path / "home", AGENT_RC=str(rc))
    with open(tmp_path / "out.txt", "w") as out:
        proc = subprocess.Popen(
            [PY, "-m", "agent_cli", "batch", str(file), "--yes", "--base-url", srv.url],
            cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        text = wait_for(lambda: pids.exists() and pids.read_text(), what="the hook to start")
        hook_pid, run_pid = (int(p) for p in text.split())
        os.kill(run_pid, signal.SIGKILL)  # the run can stop nothing it started
        assert proc.wait(timeout=60) == 130
        assert wait_for(lambda: pid_gone(hook_pid), timeout=5, what="the hook to be gone")
    finally:
        proc.kill()
        proc.wait()
    said = (tmp_path / "out.txt").read_text()
    (run,) = json.loads(Path(said.strip().splitlines()[-1]).read_text())["runs"]
    line = (
        f"[1/1] interrupted: {goal_of('a.txt')} (run {run['run_id']}): killed by SIGKILL (signal 9)"
    )
    assert line in said.splitlines(), said
    assert (run["status"], run["exit_code"]) == ("interrupted", 128 + signal.SIGKILL)
    assert run["message"] == "killed by SIGKILL (signal 9)"
    assert run["resume"] == f"agent run --resume --run-id {run['run_id']}"
    (listed,) = json.loads(agent_in_process("runs", "--json", cwd=repo).stdout)
    assert (listed["run_id"], listed["status"]) == (run["run_id"], "interrupted")


@slow
def test_runs_whose_branches_change_the_same_file_are_named_before_any_merge(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")

    def also_shared(name: str) -> list[dict]:  # creates `name`, and writes shared.txt too
        steps = creates(name)
        return [*steps[:2], call("write_file", path="shared.txt", content=name), *steps[2:]]

    srv = fake_server(ByGoal({goal_of(n): also_shared(n) for n in NAMES[:2]}))
    file = goals_toml(tmp_path / "goals.toml", NAMES[:2])
    proc = batch(agent_in_process, str(file), "--yes", "--base-url", srv.url, repo=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(Path(proc.stdout.strip().splitlines()[-1]).read_text())
    branches = [r["branch"] for r in record["runs"]]
    assert record["overlaps"] == [{"runs": [1, 2], "branches": branches, "files": ["shared.txt"]}]
    assert "note: 1. and 2. both change shared.txt: once one of" in proc.stdout
