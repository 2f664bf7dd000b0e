"""Files in the state directory are never followed out of it nor waited on (issue 21, class 8).

Real symlinks and FIFOs where the agent keeps its outbox, state, journal, trajectory and
trust records: each is refused at once with an error naming the file, and nothing outside
is written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_cli.agent.run.store import RunRecord, RunStore
from agent_cli.cli.config import trust
from agent_cli.core import atomic
from agent_cli.core.errors import AgentError
from agent_cli.memory.longterm.write.outbox import Outbox

RUN = "20250101-000000-aaaa"


def _finishes(action: Callable[[], object], seconds: float = 10) -> BaseException | None:
    """Run `action` on a thread; the exception it raised (None), failing if it blocks."""
    raised: list[BaseException | None] = [None]

    def go() -> None:
        try:
            action()
        except BaseException as e:
            raised[0] = e

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked on a file that is not a regular one"
    return raised[0]


def _outside(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the user's file\n")
    return victim


def test_a_symlinked_or_fifo_outbox_is_refused_and_the_target_left_alone(tmp_path):
    victim = _outside(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    path = state / "memory-outbox.jsonl"
    path.symlink_to(victim)
    box = Outbox(path, "store")
    with pytest.raises(AgentError, match="symbolic link"):
        box.keep("add_fact", ("a fact", "harness"), {})
    with pytest.raises(AgentError, match="symbolic link"):
        box.send(object())  # type: ignore[arg-type]
    assert victim.read_text() == "the user's file\n"
    path.unlink()
    os.mkfifo(path)
    for action in (
        lambda: box.keep("add_fact", ("a fact", "harness"), {}),
        lambda: box.send(object()),  # type: ignore[arg-type]
    ):
        error = _finishes(action)
        assert isinstance(error, AgentError) and "FIFO" in str(error), error


def test_run_files_that_are_links_or_fifos_are_refused(tmp_path):
    victim = _outside(tmp_path)
    store = RunStore(tmp_path / "state")
    store.save(RunRecord(run_id=RUN, goal="g", branch=f"agent/{RUN}"))
    run_dir = store.run_dir(RUN)
    (run_dir / "trajectory.jsonl").symlink_to(victim)
    with pytest.raises(AgentError, match="symbolic link"):
        store.log(RUN, {"type": "x"})
    (run_dir / "journal.jsonl").unlink(missing_ok=True)
    os.mkfifo(run_dir / "journal.jsonl")
    for action in (lambda: store.journal_lines(RUN), lambda: store.journal(RUN, "{}")):
        error = _finishes(action)
        assert isinstance(error, AgentError) and "FIFO" in str(error), error
    assert victim.read_text() == "the user's file\n"
    (run_dir / "state.json").unlink()
    (run_dir / "state.json").symlink_to(victim)
    with pytest.raises(AgentError, match="symbolic link"):
        store.load(RUN)
    assert store.list()[0]["status"] == "unreadable"
    (run_dir / "state.json").unlink()
    os.mkfifo(run_dir / "state.json")
    error = _finishes(lambda: store.load(RUN))
    assert isinstance(error, AgentError) and "FIFO" in str(error), error
    assert _finishes(store.list) is None


def test_a_trust_file_that_is_a_fifo_or_a_link_is_an_error_not_a_hang(tmp_path):
    path = tmp_path / "trusted.json"
    os.mkfifo(path)
    env = {"AGENT_TRUST_FILE": str(path)}
    error = _finishes(lambda: trust.status(tmp_path, env))
    assert isinstance(error, AgentError) and "FIFO" in str(error), error
    path.unlink()
    path.symlink_to(_outside(tmp_path))
    with pytest.raises(AgentError, match="symbolic link"):
        trust.status(tmp_path, env)


def test_a_file_over_its_bound_or_a_device_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(atomic.UnsafeFile, match="2,048 bytes"):
        atomic.read_bytes(big, max_bytes=1024)
    with pytest.raises(atomic.UnsafeFile, match="character device"):
        atomic.read_bytes("/dev/zero")
    assert atomic.read_bytes(big, max_bytes=4096) == b"x" * 2048


def test_a_cold_store_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path):
    import sqlite3

    from agent_cli.memory import SqliteStore

    elsewhere = tmp_path / "another-programs.db"
    with sqlite3.connect(elsewhere) as con:
        con.execute("CREATE TABLE t (x)")
    con.close()
    run_dir = tmp_path / "state" / "runs" / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "memory.db").symlink_to(elsewhere)
    with pytest.raises(AgentError, match="is a symbolic link, which is not followed"):
        SqliteStore(run_dir / "memory.db")
    with sqlite3.connect(elsewhere) as con:
        tables = [row[0] for row in con.execute("SELECT name FROM sqlite_master")]
    con.close()
    assert tables == ["t"]  # no table of the cold store was made in it
    (run_dir / "memory.db").unlink()
    os.mkfifo(run_dir / "memory.db")
    error = _finishes(lambda: SqliteStore(run_dir / "memory.db"))
    assert isinstance(error, AgentError) and "is not a file" in str(error), error
