"""Data loss, hangs, crashes and resources: a locked index at commit, FIFOs and
backtracking patterns, non-finite and over-deep JSON from the model, a badly typed memory
import, a full disk and a read-only state directory, huge files and a reply of 20 calls.
Real git, real processes, real bubblewrap (for the tmpfs and read-only mounts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import git
from reliability.relkit import (
    GOAL,
    all_tool_results,
    call,
    calls,
    events,
    finish,
    make_done,
    plan,
    read_state,
    repo_with,
    task,
    task_statuses,
    wait_for,
)
from reliability.test_commands import BWRAP_PROBLEM

needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"no bwrap: {BWRAP_PROBLEM}")


def _run(run_agent, srv, repo, *extra, env=None, timeout=120):
    return run_agent(
        "run",
        GOAL,
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        *extra,
        cwd=repo,
        env=env,
        timeout=timeout,
    )


def _results(srv) -> list[str]:
    return all_tool_results(srv)


# -- 8. a locked index at commit -------------------------------------------------------------------


def test_an_index_lock_at_commit_commits_nothing_and_resume_finishes(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"keep.txt": "keep\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    srv = fake_server(
        [
            plan(task()),
            make_done(),
            call("run", cmd="rm keep.txt"),
            call("run", cmd="touch .git/index.lock"),
            finish(),
        ]
    )
    proc = _run(agent_in_process, srv, repo, "--accept", "test ! -e keep.txt")
    assert proc.returncode == 1
    assert "index is locked (.git/index.lock exists); nothing was committed" in proc.stdout
    assert git(repo, "rev-parse", "HEAD").strip() == base
    assert task_statuses(repo) == ["running"] and read_state(repo)["status"] == "failed"
    (repo / ".git" / "index.lock").unlink()
    assert git(repo, "diff", "--cached", "--name-only") == ""  # nothing staged behind the user
    rest = fake_server([finish()])
    resumed = agent_in_process(
        "run", "--resume", "--yes", "--json", "--base-url", rest.url, cwd=repo
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert git(repo, "show", "--stat", "--format=", "HEAD").count("|") == 2  # done.txt, keep.txt
    assert git(repo, "status", "--porcelain") == ""


# -- 9. hangs --------------------------------------------------------------------------------------


def test_fifos_many_matches_a_backtracking_search_and_a_huge_command_never_hang(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"many.txt": "x\n" * 20000, "evil.txt": "a" * 40 + "!\n"})
    os.mkfifo(repo / "pipe")
    srv = fake_server(
        [
            plan(task()),
            calls(
                ("read_file", {"path": "pipe"}),
                ("write_file", {"path": "pipe", "content": "x"}),
                ("edit_file", {"path": "pipe", "old": "a", "new": "b"}),
                ("edit_file", {"path": "many.txt", "old": "x", "new": "y"}),
                ("search", {"pattern": "(a|aa)+$", "path": "evil.txt"}),
                ("run", {"cmd": "echo " + ";" * 120_000}),
            ),
            make_done(),
            finish(),
        ]
    )
    proc = _run(agent_in_process, srv, repo, env={"AGENT_DENY_COMMANDS": "(;|;;)+x$"}, timeout=100)
    assert proc.returncode == 0, proc.stderr
    results = "\n".join(_results(srv))
    assert results.count("is not a regular file (a FIFO, socket or device)") == 3
    assert "matches more than 1000 times in many.txt (at lines 1, 2, 3" in results
    assert "took more than 3s of processor time and was stopped" in results
    assert "could not be checked against it in time" in results


# -- 10. crashes -----------------------------------------------------------------------------------


def test_non_finite_and_over_deep_json_and_a_huge_integer_are_malformed_replies(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    deep = "[" * 100_000 + "]" * 100_000
    plan_step = plan(task(cmd=None))
    huge = {
        "tool_calls": [
            {
                "name": "submit_verdict",
                "arguments": '{"verdict": "pass", "reason": "ok", "n": ' + "7" * 5000 + "}",
            }
        ]
    }
    srv = fake_server(
        [
            {
                "tool_calls": [
                    {"name": "submit_plan", "arguments": '{"goal": "g", "tasks": ' + deep + "}"}
                ]
            },
            {
                **plan_step,
                "args": {
                    **plan_step["args"],
                    "tasks": [
                        {
                            "goal": "Create done.txt",
                            "acceptance": "done.txt exists",
                            "acceptance_cmd": None,
                        }
                    ],
                },
            },
            calls(
                ("read_file", '{"path": "README.md", "start_line": Infinity}'),
                ("read_file", '{"path": "README.md", "end_line": NaN}'),
                ("read_file", '{"path": "README.md", "start_line": 1e999}'),
                ("write_file", '{"path": "x", "content": ' + deep + "}"),
                ("note", '{"text": ' + "9" * 5000 + "}"),
            ),
            make_done(),
            finish(),
            {"tool": "submit_verdict", "args": "RAW"},  # replaced below
            {"tool": "submit_verdict", "args": "RAW"},  # its one re-ask, replaced below
            make_done(),
            finish(),
            *[huge] * 2,  # a verdict and its one re-ask
        ]
    )
    srv.script[5] = srv.script[6] = {
        "tool_calls": [
            {"name": "submit_verdict", "arguments": '{"verdict": "pass", "reason": ' + deep + "}"}
        ]
    }
    proc = _run(agent_in_process, srv, repo)
    assert "internal error" not in proc.stdout + proc.stderr
    assert proc.returncode == 3, proc.stdout[-2000:]  # both verdicts unparseable: rejected
    second_plan = json.dumps(srv.chat_requests[1]["messages"])
    assert "levels deep (at most 64)" in second_plan
    results = "\n".join(_results(srv))
    assert results.count("is not a number JSON allows") == 2
    assert "out of range" in results and "levels deep (at most 64)" in results
    assert "an integer of 5000 digits is too large" in results
    verdicts = [e for e in events(proc.stdout) if e["event"] == "verify"]
    assert [v["reason"] for v in verdicts] == ["the verifier's verdict was unparseable"] * 2


def test_a_memory_import_with_a_wrongly_typed_field_is_refused_whole(agent_in_process, tmp_path):
    repo = repo_with(tmp_path / "repo")
    meta = {
        "kind": "fact",
        "source": "s",
        "trust": 1.0,
        "created_at": "2026-01-01T00:00:00+00:00",
        "text_hash": "h",
        "ttl_days": 0.0,
    }
    good = {"collection": "facts", "id": "mem_a", "document": "use uv", "metadata": meta}
    bad = {**good, "id": "mem_b", "metadata": {**meta, "created_at": 12345}}
    dump = tmp_path / "memory.jsonl"
    dump.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    proc = agent_in_process("memory", "import", str(dump), cwd=repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        "line 2: metadata field 'created_at'" in proc.stderr
        and "nothing was imported" in proc.stderr
    )
    recall = agent_in_process("recall", "uv", "--json", cwd=repo)
    assert recall.returncode == 0, recall.stderr
    assert json.loads(recall.stdout or "[]") == []


def _in_bwrap(mounts: list[str], argv: list[str]) -> list[str]:
    return ["bwrap", "--dev-bind", "/", "/", *mounts, "--", *argv]


def _fails_in_one_line(mounts: list[str], repo, args: list[str], env: dict):
    """`agent ARGS` in `repo` under bwrap with `mounts`: exit 1, no internal error."""
    argv = [sys.executable, "-m", "agent_cli", *args]
    proc = subprocess.run(
        _in_bwrap([*mounts, "--chdir", str(repo)], argv),
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-2000:]
    assert "internal error" not in out and "Traceback" not in out
    return proc


def _with_read_only(state, repo, args: list[str], env: dict) -> subprocess.CompletedProcess:
    """`agent ARGS` in `repo` with `state` bound read-only; one line, no internal error."""
    return _fails_in_one_line(["--ro-bind", str(state), str(state)], repo, args, env)


@pytest.mark.slow
@needs_bwrap
def test_a_full_disk_mid_run_is_one_line_and_leaves_whole_state(agent_env, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    disk = tmp_path / "disk"
    disk.mkdir()
    fill = f"dd if=/dev/zero of={disk}/filler bs=1M count=64 2>/dev/null; true"
    srv = fake_server(
        [plan(task()), make_done(), call("run", cmd=fill), call("note", text="x" * 5000), finish()]
    )
    env = {**agent_env, "AGENT_HOME": str(disk / "state")}
    mounts = ["--size", str(48 << 20), "--tmpfs", str(disk)]
    args = ["run", GOAL, "--yes", "--json", "--base-url", srv.url]
    proc = _fails_in_one_line(mounts, repo, args, env)
    out = proc.stdout + proc.stderr
    assert "No space left on device" in out and "agent run --resume" in out
    assert git(repo, "log", "--format=%s").count("\n") == 1  # nothing committed


@pytest.mark.slow
@needs_bwrap
def test_a_read_only_state_directory_is_one_line(agent_env, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    state = tmp_path / "state"
    state.mkdir()
    srv = fake_server([plan(task()), make_done(), finish()])
    env = {**agent_env, "AGENT_HOME": str(state)}
    args = ["run", GOAL, "--yes", "--json", "--base-url", srv.url]
    proc = _with_read_only(state, repo, args, env)
    assert "Read-only file system" in proc.stdout + proc.stderr
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert list(state.iterdir()) == []


def _can_remount() -> bool:
    """Whether `unshare -rm` gives this user a mount namespace of its own to remount in."""
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


# Runs the command in a mount namespace of its own; once `$1` appears, makes `$2` read-only.
READ_ONLY_LATER = """
trigger=$1 target=$2 mounted=$3; shift 3
"$@" &
agent=$!
while [ ! -e "$trigger" ]; do sleep 0.05; done
mount --bind "$target" "$target" && mount -o remount,ro,bind "$target" && touch "$mounted"
wait $agent
"""


@pytest.mark.slow
@pytest.mark.skipif(not _can_remount(), reason="no mount namespace (unshare -rm)")
def test_a_state_directory_made_read_only_mid_run_is_one_line(agent_env, fake_server, tmp_path):
    """The lock file cannot be removed then either: the run still ends on the state's error."""
    repo = repo_with(tmp_path / "repo")
    trigger, mounted = tmp_path / "task-started", tmp_path / "mounted"
    replies = iter([plan(task()), make_done(), finish()])

    def reply(body: dict) -> dict:
        step = next(replies)
        if step.get("tool") == "write_file":  # the task's first request: the run is going
            trigger.touch()
            wait_for(mounted.exists, timeout=30, what="the read-only remount")
        return step

    srv = fake_server(reply)
    state = repo / ".agent"
    argv = [sys.executable, "-m", "agent_cli", "run", GOAL, "--yes", "--base-url", srv.url]
    script = ["sh", "-c", READ_ONLY_LATER, "sh", str(trigger), str(state), str(mounted)]
    proc = subprocess.run(
        ["unshare", "-rm", *script, *argv],
        cwd=repo,
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert mounted.exists() and proc.returncode == 1, out[-2000:]
    assert "internal error" not in out and "Traceback" not in out
    assert f"cannot write {state}" in proc.stderr and "Read-only file system" in proc.stderr


@pytest.mark.slow
@needs_bwrap
def test_rewind_with_a_read_only_state_directory_is_one_line(
    agent_in_process, agent_env, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), make_done(), finish()])
    assert _run(agent_in_process, srv, repo).returncode == 0
    git(repo, "switch", "-q", "main")
    state = repo / ".agent"
    (run_id,) = [p.name for p in (state / "runs").iterdir()]
    tip = git(repo, "rev-parse", f"agent/{run_id}")
    before = (state / "runs" / run_id / "state.json").read_text()
    proc = _with_read_only(state, repo, ["rewind", run_id, "--yes"], agent_env)
    # the run's own lock, the first a rewind takes (as a resume does)
    own = state / "runs" / run_id / "run.lock"
    assert f"cannot write {own}: Read-only file system" in proc.stderr
    assert git(repo, "rev-parse", f"agent/{run_id}") == tip
    assert (state / "runs" / run_id / "state.json").read_text() == before


# -- 11. resources ---------------------------------------------------------------------------------

PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


@pytest.mark.slow
def test_huge_files_stay_within_memory_and_the_step_budget_counts_each_call(
    agent_env, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"big.txt": "word " * 300_000 + "needle\n"})
    srv = fake_server(
        [
            plan(task()),
            call("edit_file", path="big.txt", old="needle", new="pin"),
            call("write_file", path="huge.txt", content="y" * 10_000_000),
            make_done(),
            finish(),
        ]
    )
    argv = [
        sys.executable,
        "-m",
        "agent_cli",
        "run",
        GOAL,
        "--yes",
        "--json",
        "--base-url",
        srv.url,
    ]
    peak = subprocess.run(
        [sys.executable, "-c", PEAK, *argv],
        cwd=repo,
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    peak_mb = int(peak.stdout.strip().splitlines()[-1]) / 1024
    assert peak_mb < 1500, f"peak RSS {peak_mb:.0f} MB"
    assert (repo / "big.txt").read_text().endswith("pin\n")
    assert max(len(r) for r in _results(srv)) < 150_000

    budget = repo_with(tmp_path / "budget")
    srv = fake_server(
        [
            plan(task()),
            calls(*[("write_file", {"path": f"f{i}.txt", "content": "x"}) for i in range(20)]),
        ]
    )
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, "--max-steps", "3", cwd=budget
    )
    assert proc.returncode == 4, proc.stdout[-2000:]
    assert len([e for e in events(proc.stdout) if e["event"] == "tool_result"]) == 3
    assert sorted(p.name for p in budget.glob("f*.txt")) == ["f0.txt", "f1.txt", "f2.txt"]
