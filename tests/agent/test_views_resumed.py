"""The file views a run tracks outlive a resume: saved with the run, carried by its journal."""

from __future__ import annotations

from agent_cli.agent.attempt.freshness import FileViews, supersede_changed
from agent_cli.agent.run import journal
from agent_cli.agent.run.journal import JournalEntry, MemoryAdd
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunUsage
from agent_cli.memory.working.memory import WorkingMemory
from agent_cli.workspace.git.blobs import blob_hash

FIRST = "".join(f"first_version_line_{i} = {i}\n" for i in range(20))
SECOND = "".join(f"second_version_line_{i} = {i}\n" for i in range(20))


def _write(tmp_path, text: str) -> str | None:
    (tmp_path / "a.py").write_text(text)
    return blob_hash(tmp_path, "a.py")


def test_writes_replayed_from_the_journal_are_superseded_as_in_the_run(tmp_path):
    first, second = _write(tmp_path, FIRST), _write(tmp_path, SECOND)
    entries = [
        JournalEntry(
            step=step,
            task=0,
            usage=RunUsage(),
            added=MemoryAdd(kind="edit", text=text, summary="wrote a.py", path="a.py", blob=blob),
        )
        for step, text, blob in ((1, FIRST, first), (2, SECOND, second))
    ]
    memory, views = WorkingMemory(), FileViews()
    journal.replay(entries, AgentState(goal="g"), memory, lambda i, t: None, views)
    gone = supersede_changed(views, memory, lambda path: blob_hash(tmp_path, path))
    shown = memory.assemble().render()
    assert len(gone) == 1 and "first_version_line_" not in shown
    assert "second_version_line_7" in shown  # the latest write stays


def test_views_saved_and_read_back_leave_out_what_a_hand_edit_broke():
    views = FileViews()
    views.saw("m1", "a.py", "abc", write=False)
    views.saw("m2", "a.py", None, write=True)
    again = FileViews.from_dict(views.to_dict())
    assert again == views
    broken = views.to_dict() | {"latest_write": {"a.py": "m9", "b.py": 3}}
    broken["items"] |= {"m3": [["b.py", 5, False]], "m4": "a.py", "m5": [["c.py", None]]}
    read_back = FileViews.from_dict(broken)
    assert read_back.items == views.items and read_back.latest_write == {}
    assert FileViews.from_dict(None) == FileViews() == FileViews.from_dict({"items": []})
