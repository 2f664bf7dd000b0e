"""RunStore and the typed run record: state.json byte for byte as before, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_cli.agent.run.store import RunRecord, RunStore
from agent_cli.core.errors import AgentError, StorageError

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "state-0.1.0.json"


def test_a_record_read_and_saved_again_is_the_same_file_byte_for_byte(tmp_path):
    old = json.loads(FIXTURE.read_text())
    store = RunStore(tmp_path)
    store.run_dir(old["run_id"]).mkdir(parents=True)
    shutil.copy(FIXTURE, store.run_dir(old["run_id"]) / "state.json")
    record = store.load(old["run_id"])
    assert record.status == "failed" and record.usage.cost_usd == old["usage"]["cost_usd"]
    store.save(record)
    assert (store.run_dir(old["run_id"]) / "state.json").read_text() == FIXTURE.read_text()


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
