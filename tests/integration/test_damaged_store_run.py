"""A run whose embedded store was damaged since its snapshot was written: the plan is made
from the snapshot, the run's work stands, and the notice that nothing was kept says where
the store is and what to do with it."""

from __future__ import annotations

import pytest
from learnkit import run_env, run_in_process
from runkit import GOAL, add_median, finish, plan, read_stats, task

from agent_cli.llm.openai.embedder import OpenAIEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory

__all__ = ["run_env"]  # the fixture, used by name

pytestmark = pytest.mark.slow  # the task's check runs `python -m pytest`


def test_what_a_run_could_not_keep_says_what_to_do(run_env, fake_server, capsys, demo_repo):
    srv = fake_server([plan(task()), read_stats(), add_median(), finish()])
    store = demo_repo / ".agent" / "chroma"
    embedder = OpenAIEmbedder(base_url=srv.url, api_key=None, model="fake-embed")
    with LongTermMemory(store, embedder) as mem:  # a store, and its snapshot
        mem.add_fact("tests/test_stats.py checks calc.stats", "harness")
    assert (store / "agent-recall.npz").is_file()
    damaged = b"not a database " * 4096
    (store / "chroma.sqlite3").write_bytes(damaged)
    code, events = run_in_process(capsys, demo_repo, GOAL, srv, final_summary=False)
    assert code == 0  # the work is verified and committed all the same
    said = [e["text"] for e in events if e["event"] == "notice"]
    (kept,) = [t for t in said if t.startswith("long-term memory not updated")]
    assert str(store) in kept and "file is not a database" in kept
    assert "move it aside" in kept  # what to do, as `agent recall` says it
    assert (store / "chroma.sqlite3").read_bytes() == damaged  # nothing overwritten
