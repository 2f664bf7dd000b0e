"""The deny list never walks the whole file system for a glob: past its bound it refuses."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pytest

from agent_cli.workspace.shell.globs import GlobTooLarge, bounded_glob
from agent_cli.workspace.shell.policy import CommandPolicy


def test_a_deep_glob_from_the_root_is_refused_within_its_bound_saying_why(tmp_path):
    (tmp_path / ".agent").mkdir()
    policy = CommandPolicy("auto", state_dir=tmp_path / ".agent", cwd=tmp_path)
    deep = "/*" * 14 + "/x"
    started = time.monotonic()
    reason = policy.refusal(f"rm -f '{deep}'")
    assert time.monotonic() - started < 10  # glob.glob of it runs for minutes
    assert reason is not None
    assert "could not be checked against the agent's state directory" in reason
    assert "name the paths more narrowly" in reason
    # ordinary globs are still matched, and still refused when they reach the state directory
    assert policy.refusal("rm -f *.pyc") is None
    assert policy.refusal("rm -rf .ag*") is not None


def test_bounded_glob_matches_as_glob_does_and_stops_at_its_entry_bound(tmp_path):
    for name in ("a.py", "b.py", ".hidden.py", "sub/c.py", "sub/deeper/d.py", "other/e.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    os.symlink(tmp_path / "sub", tmp_path / "link")
    for pattern in (
        "*.py",
        "*/*.py",
        ".*",
        "*/deeper/*",
        "s?b/*",
        "[ab].py",
        "link/*",
        "*/",
        "no*",
    ):
        full = str(tmp_path / pattern)
        assert sorted(bounded_glob(full)) == sorted(p.rstrip("/") for p in glob.glob(full)), pattern
    with pytest.raises(GlobTooLarge, match="more than 3 directory entries"):
        bounded_glob(str(tmp_path / "*" / "*"), max_entries=3)
    with pytest.raises(GlobTooLarge, match="took over 0 s"):
        bounded_glob(str(tmp_path / "*"), max_s=0)


def test_a_relative_glob_is_matched_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "x.py").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert bounded_glob("*.py") == ["x.py"]
    assert bounded_glob(str(Path("missing") / "*")) == []
