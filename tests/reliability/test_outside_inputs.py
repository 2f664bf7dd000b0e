"""Every input read from outside is parsed by one bounded reader (issue 21, classes 15 and 18).

A recording, an import and a state file that are deep, not UTF-8, endless or of the wrong
shape each end in one clear error (or a listing that says "unreadable"), never a
RecursionError, UnicodeDecodeError or MemoryError.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from agent_cli.agent.run.store import RunStore
from agent_cli.cli.commands.runs_commands import list_runs
from agent_cli.core.errors import AgentError, ConfigError, StorageError
from agent_cli.llm.record import ReplayModel
from agent_cli.memory.longterm.chroma import LongTermMemory
from embedkit import HashEmbedder

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(
    "content, match",
    [
        (DEEP.encode(), "not a recorded exchange"),
        (b'{"reply": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not a recorded exchange"),
        (b'{"reply": {"content": "caf\xe9"}}', "not UTF-8"),
        (b"[]", "not a recorded exchange"),
    ],
)
def test_a_malformed_recording_is_one_clear_error(tmp_path, content, match):
    path = tmp_path / "rec.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=match):
        ReplayModel(path)


def test_a_recording_that_is_a_device_or_a_fifo_is_refused_before_reading(tmp_path):
    with pytest.raises(ConfigError, match="character device"):
        ReplayModel("/dev/zero")  # type: ignore[arg-type]
    fifo = tmp_path / "rec.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="FIFO"):
        ReplayModel(fifo)


def _fact(**meta) -> str:
    base = {
        "kind": "fact",
        "source": "harness",
        "trust": 0.5,
        "created_at": "2025-01-01T00:00:00+00:00",
        "text_hash": "h",
        "ttl_days": 0.0,
    }
    return json.dumps(
        {"collection": "facts", "id": "mem_1", "document": "a fact", "metadata": base | meta}
    )


@pytest.mark.parametrize(
    "line, match",
    [
        (_fact(confirmations="lots"), "confirmations"),
        (_fact(files="[" * 5000 + "]" * 5000), "files"),
        (_fact(files='["a"]'), "files"),
        (DEEP, "line 2 is not a memory record"),
    ],
)
def test_an_import_with_a_bad_record_imports_nothing_and_says_which_line(tmp_path, line, match):
    path = tmp_path / "export.jsonl"
    path.write_text(_fact() + "\n" + line + "\n")
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as mem:
        with pytest.raises(StorageError, match=match):
            mem.import_(path)
        assert mem.counts()["facts"] == 0
        path.write_text(_fact(files='{"a.py": "abc"}', confirmations=3) + "\n")
        assert mem.import_(path) == 1  # a good record still imports


def test_an_import_that_is_not_utf8_or_not_a_regular_file_is_refused(tmp_path):
    path = tmp_path / "export.jsonl"
    path.write_bytes(_fact().encode() + b"\n\xff\xfe\n")
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as mem:
        with pytest.raises(StorageError, match="line 2 is not UTF-8"):
            mem.import_(path)
        with pytest.raises(StorageError, match="character device"):
            mem.import_("/dev/zero")


@pytest.mark.parametrize("content", ["[]", '{"goal": "no id"}', DEEP, "\udcff"])
def test_agent_runs_lists_a_state_of_any_shape_as_unreadable(tmp_path, capsys, content):
    repo = tmp_path / "repo"
    run_dir = repo / ".agent" / "runs" / "20250101-000000-aaaa"
    run_dir.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (run_dir / "state.json").write_bytes(content.encode("utf-8", "surrogateescape"))
    list_runs(repo, json_out=True)
    assert json.loads(capsys.readouterr().out) == [
        {
            "run_id": "20250101-000000-aaaa",
            "status": "unreadable",
            "goal": "",
            "steps": 0,
            "started_at": "",
            "updated_at": "",
        }
    ]
    with pytest.raises(AgentError, match="no unfinished run"):
        RunStore(repo / ".agent").target(None)
