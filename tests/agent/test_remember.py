"""The end of a run: each thing it learned is stored on its own, and what was not is named."""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field

import pytest

from agent_cli.agent.ask.window import Window
from agent_cli.agent.attempt.runtime import Limits, Runtime
from agent_cli.agent.attempt.toolbox import Toolbox
from agent_cli.agent.learn.learning import Kept, Learned, remember
from agent_cli.agent.learn.run_memory import RunMemory
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunRecord
from agent_cli.core import events
from agent_cli.core.models import Fact, Task
from agent_cli.memory import WorkingMemory
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.workspace.files import Files
from conftest import make_repo
from embedkit import HashEmbedder

TOPIC = "rootcommit123 github.com/acme/shop"


@dataclass
class Tally:
    commands: list[tuple[str, int | None]] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)
    tools_used: list[str] = field(default_factory=list)


def _verified() -> tuple[AgentState, RunRecord]:
    task = Task(goal="make done.txt", acceptance_cmd="python check.py")
    task.status, task.exit_code, task.attempts = "verified", 0, 1
    state = AgentState(goal="make done.txt", plan=[task])
    return state, RunRecord(run_id="r1", goal=state.goal, branch="agent/r1", status="verified")


def _remember(store: LongTermMemory, notes: list[str], facts: list[str]):
    """What a verified one-task run with these notes and facts leaves: remember()'s answer."""
    state, run = _verified()
    learned = Learned(
        notes=[{"id": f"m{i}", "text": t, "task": state.goal} for i, t in enumerate(notes, 1)]
    )
    return remember(
        store,
        run=run,
        state=state,
        toolbox=Tally(),
        learned=learned,
        signatures=[],
        topic=TOPIC,
        blob_of=lambda path: None,
        ttl_days=90,
        accept_cmds=[],
        facts=[Fact(text=t, files=[]) for t in facts],
    )


def test_a_note_the_store_refuses_costs_nothing_else_and_is_named(tmp_path):
    # an empty note, as a run saved by a version whose note tool took one still holds it
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        kept = _remember(
            store, ["the check reads done.txt", "  ", "done.txt needs a newline"], ["fact one"]
        )
        assert kept.notice() == (
            "long-term memory updated except for note m2: a memory item needs some text"
        )
        counts = store.counts([TOPIC])
        texts = {r.text for r in store.listing([TOPIC])}
    kinds = ("episodes", "procedures", "notes", "facts")
    assert [counts[k] for k in kinds] == [1, 1, 2, 1]
    assert {"the check reads done.txt", "done.txt needs a newline", "fact one"} <= texts
    assert "the archiving of unused items" in kept.stored


def test_the_run_tells_the_user_what_was_not_stored(tmp_path):
    repo = make_repo(tmp_path / "repo")
    state, run = _verified()
    memory = WorkingMemory(max_tokens=4000)
    said: list[events.Event] = []
    rt = Runtime(
        model=None,  # no request: the facts are given
        toolbox=Toolbox(files=Files(repo), run_command=None, is_test=bool, memory=memory),
        memory=memory,
        state=state,
        limits=Limits(max_steps=10, task_max_steps=5, budget_usd=1.0, tool_output_max_tokens=500),
        emit=said.append,
        log=lambda record: None,
        save=lambda: None,
    )
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        mem = RunMemory(store, repo, ttl_days=90, window=Window())
        # a run saved by a version whose note tool took an empty note, resumed
        mem.learned = Learned.from_dict({"notes": [{"id": "m4", "text": "", "task": state.goal}]})
        mem.remember(rt, run, [], [], facts=[Fact(text="check.py reads done.txt", files=[])])
        counts = store.counts()
    assert said == [
        events.Notice(
            text="long-term memory updated except for note m4: a memory item needs some text"
        )
    ]
    assert (counts["episodes"], counts["procedures"], counts["facts"]) == (1, 1, 1)


def test_a_store_out_of_reach_is_tried_once_and_everything_is_named(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(), write_wait_s=0.3) as store:
        store.add_fact("made before the lock was taken", "test", topic=TOPIC)
        fd = os.open(tmp_path / "chroma" / "write.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # another process writing, for longer than we wait
            began = time.monotonic()
            kept = _remember(store, ["a note", "another"], ["fact one", "fact two"])
            took = time.monotonic() - began
        finally:
            os.close(fd)
    said = kept.notice()
    assert said.startswith(
        "long-term memory not updated: the episode, the procedure `python check.py`, note m1, "
        "note m2, fact 1 of 2, fact 2 of 2, the archiving of unused items: "
    )
    assert kept.stored == [] and took < 8 * 0.3  # one wait, not one for each item


@pytest.mark.parametrize(
    "missed, stored, said",
    [
        ([], ["the episode"], ""),
        ([("note m2", "why")], [], "long-term memory not updated: note m2: why"),
        (
            [("note m2", "no text"), ("fact 1 of 1", "too long"), ("note m3", "no text")],
            ["the episode"],
            "long-term memory updated except for note m2, note m3: no text; fact 1 of 1: too long",
        ),
    ],
)
def test_the_notice_groups_what_was_not_stored_by_why(missed, stored, said):
    assert Kept(stored=stored, missed=missed).notice() == said
