"""RunStore and the typed run record: state.json byte for byte as before, clear errors."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_cli.agent.run import journal, migrations
from agent_cli.agent.run.journal import JournalEntry, MemoryAdd
from agent_cli.agent.run.migrations import SCHEMA_VERSION
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunRecord, RunStore, RunUsage, claim_run_id, new_run_id
from agent_cli.core.errors import AgentError, StorageError
from agent_cli.memory.working.memory import WorkingMemory

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "state-0.1.0.json"


def test_a_record_read_and_saved_again_is_the_same_file_byte_for_byte(tmp_path):
    old = json.loads(FIXTURE.read_text())
    store = RunStore(tmp_path)
    store.run_dir(old["run_id"]).mkdir(parents=True)
    path = store.run_dir(old["run_id"]) / "state.json"
    shutil.copy(FIXTURE, path)
    record = store.load(old["run_id"])
    assert record.status == "failed" and record.usage.cost_usd == old["usage"]["cost_usd"]
    store.save(record)
    # 0.1.0's file, upgraded by the named migrations: its own keys first, in its order, then
    # the fields it had not yet, then the schema version; written as the old one was.
    upgraded = json.loads(FIXTURE.read_text())
    for key in ("budget_steps", "budget_usd", "spent_usd", "attempts"):
        del upgraded["agent_state"][key]
    upgraded |= {"base_branch": "", "learned": {}, "schema_version": SCHEMA_VERSION}
    assert path.read_text() == json.dumps(upgraded, indent=1, ensure_ascii=False)
    saved = path.read_text()
    store.save(store.load(old["run_id"]))
    assert path.read_text() == saved  # a current record reads and saves back byte for byte


def test_the_migrations_are_named_ordered_and_each_upgrades_one_version():
    assert len(migrations.MIGRATIONS) + 1 == SCHEMA_VERSION
    names = [m.__name__ for m in migrations.MIGRATIONS]
    assert names == sorted(names) and all(
        n.startswith(f"m{i + 1:03}_") for i, n in enumerate(names)
    )
    record = migrations.upgrade(json.loads(FIXTURE.read_text()), "state.json")
    assert record["schema_version"] == SCHEMA_VERSION and record["base_branch"] == ""
    assert "spent_usd" not in record["agent_state"]
    # a version-2 record only gets the migrations past version 2
    two = {"schema_version": 2, "agent_state": {"budget_usd": 5.0}}
    assert migrations.upgrade(two, "s")["agent_state"] == {}
    assert "base_branch" not in two


def test_a_record_of_a_newer_schema_or_with_an_unknown_key_is_refused_naming_it(tmp_path):
    store = RunStore(tmp_path)
    store.save(RunRecord(run_id="r1", goal="g", branch="agent/r1"))
    path = store.run_dir("r1") / "state.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data | {"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(StorageError, match="r1/state.json was written by a newer agent"):
        store.load("r1")
    path.write_text(json.dumps(data | {"surprise": 1}))
    with pytest.raises(StorageError, match="r1/state.json cannot be read: surprise"):
        store.load("r1")


def test_the_status_is_one_of_the_known_ones():
    with pytest.raises(ValidationError):
        RunRecord(run_id="r", goal="g", branch="agent/r", status="done")
    record = RunRecord(run_id="r", goal="g", branch="agent/r")
    with pytest.raises(ValidationError):
        record.status = "finished"


def test_a_broken_state_file_is_a_storage_error_naming_it(tmp_path):
    store = RunStore(tmp_path)
    store.run_dir("r1").mkdir(parents=True)
    (store.run_dir("r1") / "state.json").write_text('{"run_id": "r1", "status": "weird"}')
    with pytest.raises(StorageError, match="r1/state.json cannot be read: status"):
        store.load("r1")


def test_the_resume_target_is_the_newest_unfinished_run_or_a_clear_error(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(AgentError, match="no unfinished run to resume"):
        store.target(None)
    for run_id, status in (
        ("20250101-000000-aaaa", "failed"),
        ("20250102-000000-bbbb", "verified"),
    ):
        store.save(RunRecord(run_id=run_id, goal="g", branch=f"agent/{run_id}", status=status))
    assert store.target(None) == "20250101-000000-aaaa"
    with pytest.raises(AgentError, match="no run 'nope'"):
        store.target("nope")


def test_a_tool_call_appends_to_the_journal_and_a_save_empties_it(tmp_path):
    store = RunStore(tmp_path, secrets=("sk-secret-value",))
    record = RunRecord(run_id="r1", goal="g", branch="agent/r1")
    store.save(record)
    entry = JournalEntry(
        step=1, task=0, usage=RunUsage(prompt_tokens=5), notes=("sk-secret-value",)
    )
    store.journal("r1", entry.model_dump_json())
    state_before = (store.run_dir("r1") / "state.json").read_text()
    lines = store.journal_lines("r1")
    assert len(lines) == 1 and "sk-secret-value" not in lines[0]
    assert (store.run_dir("r1") / "state.json").read_text() == state_before  # not rewritten
    store.save(record)
    assert store.journal_lines("r1") == []


def test_a_held_path_that_holds_a_secret_is_not_saved(tmp_path):
    """Redaction masks values, never a key: a held path holding a configured secret or a key's
    shape is left out of state.json, and the others are kept as they are."""
    store = RunStore(tmp_path, secrets=("hunter2-password",))
    shape = "ghp_" + "a1" * 12
    held = {"scripts/guard.py": "0a1b", "hunter2-password": "", f"x/{shape}.py": "", "tools/": "a"}
    store.save(RunRecord(run_id="r1", goal="g", branch="agent/r1", held=held))
    text = (store.run_dir("r1") / "state.json").read_text()
    assert "hunter2" not in text and shape not in text
    assert store.load("r1").held == {"scripts/guard.py": "0a1b", "tools/": "a"}


def test_replay_applies_only_the_entries_past_the_saved_step_and_skips_a_torn_line():
    memory = WorkingMemory(max_tokens=4000)
    state = AgentState(goal="g", step=2)
    lines = [
        JournalEntry(step=s, task=0, usage=RunUsage(prompt_tokens=10 * s)).model_dump_json()
        for s in (1, 2)
    ]
    lines.append(
        JournalEntry(
            step=3,
            task=0,
            usage=RunUsage(prompt_tokens=30, cost_usd=0.5),
            added=MemoryAdd(kind="file", text="the file", summary="read f.py"),
            notes=("f.py is small",),
        ).model_dump_json()
    )
    lines.append(lines[-1][:20])  # a kill in the middle of an append
    noted: list[tuple[str, str]] = []
    usage = journal.replay(journal.parse(lines), state, memory, lambda i, t: noted.append((i, t)))
    assert state.step == 3 and memory.step == 1
    assert usage == RunUsage(prompt_tokens=30, cost_usd=0.5)
    texts = [item.text for item in memory.hot_items()]
    assert texts == ["f.py is small", "the file"] and noted[0][1] == "f.py is small"
    assert journal.replay(journal.parse(lines), state, memory, lambda i, t: None) is None


def test_a_journal_line_with_a_memory_kind_there_is_not_is_unreadable():
    good = JournalEntry(step=3, task=0, usage=RunUsage(), added=MemoryAdd(kind="note", text="n"))
    bad = good.model_dump_json().replace('"note"', '"zzz"')  # edited by hand
    assert journal.parse([good.model_dump_json(), bad]) == [good]


def test_a_journal_line_with_a_number_out_of_range_is_unreadable():
    """Its usage becomes the resumed run's spending: a negative cost would be money back."""
    good = JournalEntry(step=3, task=0, usage=RunUsage(cost_usd=0.5))
    for field, value in (("cost_usd", -9.0), ("prompt_tokens", -1), ("step", -2), ("task", -1)):
        bad = json.loads(good.model_dump_json())
        (bad["usage"] if field in bad["usage"] else bad)[field] = value
        assert journal.parse([good.model_dump_json(), json.dumps(bad)]) == [good], field


def test_resuming_with_only_an_unreadable_run_names_it(tmp_path):
    import pytest

    from agent_cli.agent.run.store import RunRecord, RunStore
    from agent_cli.core.errors import AgentError

    store = RunStore(tmp_path / ".agent")
    store.save(RunRecord(run_id="r1", goal="g", branch="agent/r1", status="escalated"))
    (store.run_dir("r1") / "state.json").write_text("{ not json")
    with pytest.raises(AgentError) as e:
        store.target(None)
    assert "the state of run r1 cannot be" in e.value.one_line()
    assert "--run-id r1" in e.value.one_line()
    with pytest.raises(AgentError, match="cannot be read"):
        store.load(store.target("r1"))  # named, it says what is wrong


def test_ids_claimed_in_one_second_never_repeat_though_their_random_part_does(tmp_path):
    now = datetime(2026, 1, 1, tzinfo=UTC)  # a batch starting many runs in the same second
    drawn: list[str] = []

    def draw() -> str:
        drawn.append(new_run_id(now))
        return drawn[-1]

    ids = [claim_run_id(tmp_path / "runs", draw) for _ in range(2000)]
    assert len(set(drawn)) < len(drawn)  # two of them drew the same id
    assert len(set(ids)) == len(ids)  # and each run still has its own
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(ids)


def test_an_id_that_cannot_be_claimed_is_one_storage_error(tmp_path):
    (tmp_path / "runs").write_text("not a directory\n")
    with pytest.raises(StorageError, match="cannot write"):
        claim_run_id(tmp_path / "runs")


def test_a_last_journal_line_cut_inside_a_character_is_left_out(tmp_path):
    store = RunStore(tmp_path)
    done = JournalEntry(step=1, task=0, usage=RunUsage(), added=MemoryAdd(kind="note", text="café"))
    cut = JournalEntry(step=2, task=0, usage=RunUsage(), added=MemoryAdd(kind="note", text="é" * 9))
    torn = cut.model_dump_json().encode()
    torn = torn[: torn.index("é".encode()) + 1]  # killed half way through a character
    path = store.run_dir("r1") / "journal.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(done.model_dump_json().encode() + b"\n" + torn)
    assert journal.parse(store.journal_lines("r1")) == [done]  # the run resumes after step 1
    path.write_bytes(b'{"step": "\xff"}\n' + done.model_dump_json().encode() + b"\n")
    with pytest.raises(StorageError, match=r"not UTF-8 text \(byte 10\)"):
        store.journal_lines("r1")  # a bad byte in a whole line is no kill's doing
