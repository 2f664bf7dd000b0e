"""What a new worktree run says as it starts, in this process on a real repository."""

from __future__ import annotations

import io
import json
import os

from agent_cli.cli.worktree import place_for
from agent_cli.ui.console import RunConsole
from conftest import make_repo


def test_a_changed_file_whose_name_is_not_utf8_is_named_escaped_in_the_json_stream(tmp_path):
    """`agent batch` reads each run's --json events: the notice of the user's changes left
    behind must be JSON, whatever bytes their names hold."""
    repo = make_repo(tmp_path / "repo")
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("mine\n")
    out = io.StringIO()
    place = place_for(
        repo,
        repo / ".agent",
        worktree=True,
        auto=False,
        resume=False,
        run_id=None,
        plan_only=False,
        allow_dirty=False,
        console=RunConsole("json", out, io.StringIO()),
    )
    assert place is not None and place.lock is not None
    place.lock.release()
    said = [json.loads(line)["text"] for line in out.getvalue().splitlines()]
    assert any("your uncommitted changes (caf\\xe9.txt)" in text for text in said), said
    assert (repo / os.fsdecode(b"caf\xe9.txt")).read_text() == "mine\n"
