"""Broken or busy storage: a corrupt, misplaced or locked Chroma store, a corrupt or locked
SQLite cold store, a corrupt state.json, and a second run in the same repository.

Each must end in one clear line naming the path, exit 1, with nothing overwritten or deleted.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from agent_cli.llm.fake.server import FakeOpenAIServer
from reliability.relkit import (
    GOAL,
    branch,
    cli_env,
    commit_count,
    finish,
    make_done,
    plan,
    read_state,
    repo_with,
    run_cli,
    snapshot,
    spawn_agent,
    state_files,
    task,
    wait_for,
)

__all__ = ["spawn_agent"]

GARBAGE = b"this is not a database\x00\x01\x02" * 100


def _plant(repo: Path, rel: str, data: bytes | None) -> Path:
    path = repo / ".agent" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "rel, data, says",
    [
        ("chroma/chroma.sqlite3", GARBAGE, "chroma.sqlite3 is not an SQLite database"),
        ("chroma", b"a file where a directory should be\n", "is not a directory"),
    ],
)
def test_a_broken_chroma_store_is_named_and_left_alone(
    agent_in_process, fake_server, tmp_path, rel, data, says
):
    repo = repo_with(tmp_path / "repo")
    _plant(repo, rel, data)
    before = snapshot(repo / ".agent")
    srv = fake_server([plan(task()), make_done(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("error: memory store at ") and str(repo / ".agent" / "chroma") in line
    assert says in line and "Traceback" not in proc.stderr and len(line.splitlines()) == 1
    assert snapshot(repo / ".agent") == before  # nothing overwritten, moved or deleted
    assert srv.chat_requests == [] and branch(repo) == "main"


@pytest.fixture
def unfinished_run(agent_in_process, fake_server, tmp_path):
    """A repository with a saved, unfinished run (the endpoint failed mid-task)."""
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), {"status": 500, "body": "{}"}])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--base-url", srv.url, cwd=repo, env={"AGENT_MAX_RETRIES": "0"}
    )
    assert proc.returncode == 1 and read_state(repo)["status"] == "failed", proc.stderr
    return repo


def _unfinished_by_a_process(tmp_path: Path) -> Path:
    """`unfinished_run`, made by a process of its own: this process opens no store of it,
    so the locks it takes on them are the only ones it has."""
    repo = repo_with(tmp_path / "repo")
    with FakeOpenAIServer([plan(task()), {"status": 500, "body": "{}"}]) as srv:
        proc = run_cli(
            "run",
            GOAL,
            "--yes",
            "--base-url",
            srv.url,
            cwd=repo,
            env=cli_env(tmp_path / "home", AGENT_MAX_RETRIES="0"),
        )
    assert proc.returncode == 1 and read_state(repo)["status"] == "failed", proc.stderr
    return repo


@pytest.mark.parametrize("name", ["state.json", "memory.db"])
def test_a_corrupt_run_file_stops_resume_naming_it_and_is_kept(
    agent_in_process, fake_server, unfinished_run, name
):
    repo = unfinished_run
    run_dir = state_files(repo)[-1].parent
    (run_dir / name).write_bytes(GARBAGE)
    before = snapshot(run_dir)
    srv = fake_server([make_done(), finish()])
    proc = agent_in_process(
        "run", "--resume", "--yes", "--base-url", srv.url, "--run-id", run_dir.name, cwd=repo
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert str(run_dir / name) in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert snapshot(run_dir) == before
    assert srv.chat_requests == []


def test_locked_chroma_and_locked_cold_store_are_reported_as_locked(
    spawn_agent, fake_server, tmp_path
):
    # Two repositories, each with one store held under an exclusive SQLite lock by this process;
    # both agents wait for their lock at the same time.
    resumed = _unfinished_by_a_process(tmp_path)
    memory_db = state_files(resumed)[-1].parent / "memory.db"
    fresh = repo_with(tmp_path / "fresh")
    chroma_db = _plant(fresh, "chroma/chroma.sqlite3", None)
    sqlite3.connect(chroma_db).execute("CREATE TABLE t (x)").connection.close()
    # Taken before the locks: closing any descriptor of a file drops this process's locks on it.
    before = (snapshot(memory_db.parent), snapshot(chroma_db.parent))
    holders = []
    for db in (memory_db, chroma_db):
        con = sqlite3.connect(db, isolation_level=None, timeout=0)
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
        con.execute("BEGIN EXCLUSIVE")
        holders.append(con)
    try:
        srv = fake_server([plan(task()), make_done(), finish()])
        a = spawn_agent("run", "--resume", "--yes", "--base-url", srv.url, cwd=resumed)
        b = spawn_agent("run", GOAL, "--yes", "--base-url", srv.url, cwd=fresh)
        assert (a.wait(60), b.wait(60)) == (1, 1), a.stdout + a.stderr + b.stdout + b.stderr
        assert str(memory_db) in a.stderr and "could not be opened: database is locked" in a.stderr
        assert str(chroma_db.parent) in b.stderr and "locked by another process" in b.stderr
        assert "Traceback" not in a.stderr + b.stderr
        assert srv.chat_requests == []
    finally:
        for con in holders:
            con.close()
    assert (snapshot(memory_db.parent), snapshot(chroma_db.parent)) == before


def test_a_second_run_is_refused_and_a_dead_runs_lock_is_taken_over(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    lock = repo / ".agent" / "run.lock"
    slow = fake_server([{**plan(task()), "delay": 60}])
    first = spawn_agent("run", GOAL, "--yes", "--base-url", slow.url, cwd=repo)
    wait_for(
        lambda: lock.exists() and len(slow.chat_requests) == 1,
        what="the first run to hold the lock and wait for its plan",
    )

    other = fake_server([plan(task()), make_done(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", other.url, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"another agent run (pid {first.pid}) is running in this repository" in proc.stderr
    assert other.chat_requests == [] and "Traceback" not in proc.stderr

    os.kill(first.pid, signal.SIGKILL)  # killed mid-plan: nothing was started yet
    assert first.wait() == -signal.SIGKILL
    assert lock.exists() and str(first.pid) in lock.read_text()  # a stale lock stays behind
    assert state_files(repo) == [] and branch(repo) == "main" and commit_count(repo) == 1

    proc = agent_in_process("run", GOAL, "--yes", "--base-url", other.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_state(repo)["status"] == "verified" and not lock.exists()


def test_a_file_where_the_memory_store_belongs_is_refused_by_every_memory_command(
    tmp_path, monkeypatch
):
    from typer.testing import CliRunner

    from agent_cli.cli.app import app

    repo = repo_with(tmp_path / "repo")
    (repo / ".agent").mkdir()
    (repo / ".agent" / "chroma").write_text("not a store\n")
    monkeypatch.setenv("AGENT_RC", os.devnull)  # no user settings
    monkeypatch.setenv("HOME", str(tmp_path))
    out = tmp_path / "out.jsonl"
    for args in (
        ["recall", "anything"],
        ["memory", "show"],
        ["memory", "export", str(out)],
        ["memory", "forget", "mem_x"],
        ["memory", "expire"],
    ):
        done = CliRunner().invoke(app, [*args, "--repo", str(repo)], prog_name="agent")
        said = done.output + str(done.exception or "")
        assert done.exit_code == 1, (args, said)
        assert "is not a directory" in said and "no memory yet" not in said, (args, said)
    assert not out.exists()  # not an export of nothing
    assert (repo / ".agent" / "chroma").read_text() == "not a store\n"
