"""A run's state records the endpoint, models and limits it was started with, never the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_cli.agent.run import migrations
from agent_cli.agent.run.store import RunRecord, RunStartedWith, RunStore
from agent_cli.core.errors import StorageError

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "state-0.1.0.json"
LOCAL = RunStartedWith(base_url="http://127.0.0.1:8080/v1", model="local", max_steps=7)


def saved(tmp_path: Path, started_with: RunStartedWith) -> tuple[RunStore, Path]:
    store = RunStore(tmp_path)
    store.save(RunRecord(run_id="r1", goal="g", branch="agent/r1", started_with=started_with))
    return store, store.run_dir("r1") / "state.json"


def test_what_the_run_was_started_with_is_saved_and_read_back(tmp_path):
    store, path = saved(tmp_path, LOCAL)
    data = json.loads(path.read_text())
    assert data["started_with"] == {
        "base_url": "http://127.0.0.1:8080/v1",
        "model": "local",
        "max_steps": 7,
    }
    assert list(data)[-2:] == ["started_with", "schema_version"]
    record = store.load("r1")
    assert record.started_with == LOCAL
    assert record.started_with.flags() == {
        "base_url": "http://127.0.0.1:8080/v1",
        "model": "local",
        "max_steps": 7,
    }
    assert record.started_with.describe() == "model local at http://127.0.0.1:8080/v1"


def test_a_run_of_0_1_0_upgrades_through_the_named_migration_and_carries_nothing(tmp_path):
    assert migrations.MIGRATIONS[-1].__name__ == "m004_started_with"
    old = json.loads(FIXTURE.read_text())
    store = RunStore(tmp_path)
    store.run_dir(old["run_id"]).mkdir(parents=True)
    shutil.copy(FIXTURE, store.run_dir(old["run_id"]) / "state.json")
    record = store.load(old["run_id"])
    assert record.started_with == RunStartedWith()
    assert record.started_with.flags() == {} and record.started_with.describe() == ""
    # a version-3 record (written before the field) gets it
    assert migrations.upgrade({"schema_version": 4}, "s")["started_with"] == {}


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("file:///etc/passwd", "expected an endpoint address"),
        ("http://user:pw@evil.example/v1", "not in the endpoint.s address"),
        ("127.0.0.1:8080", "expected an endpoint address"),
        ("http://127.0.0.1:99999/v1", "the port is not a number"),
    ],
)
def test_a_tampered_saved_endpoint_is_refused_naming_the_field(tmp_path, base_url, says):
    store, path = saved(tmp_path, LOCAL)
    data = json.loads(path.read_text())
    data["started_with"]["base_url"] = base_url
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match=f"started_with.base_url: .*{says}"):
        store.load("r1")


def test_an_api_key_is_no_field_of_the_saved_start(tmp_path):
    store, path = saved(tmp_path, LOCAL)
    data = json.loads(path.read_text())
    data["started_with"]["api_key"] = "sk-planted"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match="started_with.api_key"):
        store.load("r1")
