"""Atomic whole-file writes and durable JSONL appends, tested against real killed writers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.core.atomic import append_line, write_atomic
from reliability.relkit import wait_for

WRITER = """
import json, sys
from agent_cli.core.atomic import write_atomic
path = sys.argv[1]
i = 0
print("ready", flush=True)
while True:
    i += 1
    write_atomic(path, json.dumps({"i": i, "pad": "x" * (200_000 + i % 7919)}))
"""

APPENDER = """
import json, sys
from agent_cli.core.atomic import append_line
path = sys.argv[1]
i = 0
print("ready", flush=True)
while True:
    i += 1
    append_line(path, json.dumps({"i": i, "pad": "y" * (i % 3000)}))
"""


def _start(code: str, path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_write_atomic_writes_text_and_bytes(tmp_path):
    target = tmp_path / "a.txt"
    write_atomic(target, "héllo\n")
    assert target.read_text(encoding="utf-8") == "héllo\n"
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_write_atomic_keeps_the_old_file_mode(tmp_path):
    target = tmp_path / "run.sh"
    target.write_text("old")
    target.chmod(0o755)
    write_atomic(target, "new")
    assert target.stat().st_mode & 0o777 == 0o755
    fresh = tmp_path / "fresh.txt"
    write_atomic(fresh, "x")
    assert fresh.stat().st_mode & 0o777 == 0o644


def test_write_atomic_failure_leaves_no_temp_file(tmp_path):
    target = tmp_path / "adir"
    target.mkdir()
    with pytest.raises(OSError):
        write_atomic(target, "cannot replace a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


@pytest.mark.slow
def test_reader_never_sees_a_half_written_file_even_when_the_writer_is_killed(tmp_path):
    target = tmp_path / "state.json"
    write_atomic(target, json.dumps({"i": 0}))
    writer = _start(WRITER, target)
    seen = set()

    def read_until_replaced_often() -> bool:
        seen.add(json.loads(target.read_text())["i"])  # never a half-written file
        return len(seen) > 20

    try:
        wait_for(read_until_replaced_often, interval=0, what="the writer's replacements")
    finally:
        _kill(writer)
    assert "i" in json.loads(target.read_text())


@pytest.mark.slow
def test_append_line_survives_a_killed_writer_with_whole_lines(tmp_path):
    log = tmp_path / "events.jsonl"
    appender = _start(APPENDER, log)
    wait_for(
        lambda: log.exists() and log.read_text().count("\n") > 10,
        what="the appender to write lines",
    )
    _kill(appender)
    lines = log.read_text().splitlines()
    assert len(lines) > 10
    numbers = [json.loads(line)["i"] for line in lines]
    assert numbers == list(range(1, len(numbers) + 1))
    assert log.read_text().endswith("\n")


def test_append_line_adds_one_newline_and_refuses_embedded_newlines(tmp_path):
    log = tmp_path / "a.jsonl"
    append_line(log, '{"a": 1}')
    append_line(log, '{"b": 2}\n')
    assert log.read_text() == '{"a": 1}\n{"b": 2}\n'
    with pytest.raises(ValueError):
        append_line(log, '{"a":\n1}')


def test_write_atomic_never_replaces_a_device_a_fifo_or_a_directory(tmp_path):
    fifo, folder, link = tmp_path / "pipe", tmp_path / "folder", tmp_path / "to-null"
    os.mkfifo(fifo)
    folder.mkdir()
    link.symlink_to(os.devnull)
    for path in (fifo, folder, link):
        with pytest.raises(OSError, match="not a file to replace"):
            write_atomic(path, "x")
    assert fifo.is_fifo() and folder.is_dir() and link.is_symlink()
    assert Path(os.devnull).is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "pipe", "to-null"]  # no temp
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    write_atomic(dangling, "x")  # a link is replaced, never written through
    assert not dangling.is_symlink() and dangling.read_text() == "x"


def test_memory_export_with_force_leaves_a_fifo_in_place(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from agent_cli.cli.app import app

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.setenv("AGENT_RC", os.devnull)  # no user settings
    monkeypatch.setenv("HOME", str(tmp_path))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = CliRunner().invoke(
        app, ["memory", "export", str(fifo), "--force", "--repo", str(repo)], prog_name="agent"
    )
    said = done.output + str(done.exception or "")
    assert done.exit_code == 1 and "it is a FIFO, not a file to replace" in said, said
    assert fifo.is_fifo()
