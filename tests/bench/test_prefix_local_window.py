"""bench/prefix.py --window: the fake server says the window as llama.cpp does, and the bench
sizes its baseline and its memory check to what a run in that window gets."""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from pathlib import Path

from agent_cli.llm.fake_server import FakeOpenAIServer

_PATH = Path(__file__).resolve().parents[2] / "bench" / "prefix.py"
_SPEC = importlib.util.spec_from_file_location("bench_prefix", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
prefix = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(prefix)


def test_a_4096_token_window_is_served_at_props_and_sizes_the_baseline_and_memory():
    behaviour, trim_at, memory = prefix.local_window(4096)
    assert (trim_at, memory) == (3072, 752)  # 1,024 kept for the reply; memory what is left
    with FakeOpenAIServer([], behaviour=behaviour) as server:
        url = server.url.removesuffix("/v1") + "/props"
        with urllib.request.urlopen(url, timeout=10) as reply:
            props = json.load(reply)
    assert props["default_generation_settings"]["n_ctx"] == 4096


def test_a_large_window_keeps_the_configured_memory_budget():
    _, trim_at, memory = prefix.local_window(200_000)
    assert (trim_at, memory) == (200_000 - 4096, 8000)


def test_the_long_session_script_reviews_27_modules_a_task_and_every_edit_applies(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(prefix, "CALLS_PER_TASK", prefix.LONG[0])
    monkeypatch.setattr(prefix, "FILES_PER_TASK", prefix.LONG[1])
    repo = prefix.make_repo(tmp_path)
    read: set[str] = set()
    for task in range(prefix.TASKS):
        calls = prefix.task_calls(repo, task)
        assert calls[-1]["tool"] == "finish" and len(calls) == 72
        files = {c["args"]["path"] for c in calls if c["tool"] == "read_file"}
        assert len(files) == 27 and not files & read  # each task its own modules
        read |= files
        for edit in (c["args"] for c in calls if c["tool"] == "edit_file"):
            assert (repo / edit["path"]).read_text().count(edit["old"]) == 1
