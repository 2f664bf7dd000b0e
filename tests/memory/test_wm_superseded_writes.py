"""A write or edit of a file supersedes its earlier reads and writes in working memory."""

from __future__ import annotations

from agent_cli.memory import WorkingMemory
from agent_cli.memory.working.store import InMemStore

X = "def mean(xs):\n    return sum(xs) / len(xs)  # first version X\n"
Y = "def mean(xs):\n    return statistics.fmean(xs)  # second version Y\n"
PATH = "calc/stats.py"


def _filler(i: int) -> str:
    return f"log {i}\n" + " ".join(f"w{i}x{j}" for j in range(60))


def test_a_second_write_leaves_the_first_content_in_no_later_context():
    mem = WorkingMemory()
    first = mem.add("edit", X, summary=f"wrote {PATH}", path=PATH)
    read = mem.add("file", X + "\n", summary=f"read {PATH}", path=PATH)
    assert "first version X" in mem.assemble().render()
    latest = mem.add("edit", Y, summary=f"wrote {PATH}", path=PATH)
    text = mem.assemble().render()
    assert "first version X" not in text
    assert "second version Y" in text
    assert f"[edit {first}] {PATH}, superseded by {latest}\n" in text
    assert f"[file {read}] {PATH}, superseded by {latest}\n" in text


def test_a_cold_superseded_write_is_a_stub_in_the_store_and_when_recalled():
    store = InMemStore()
    mem = WorkingMemory(store=store, max_tokens=600, protect_recent_edits=0)
    first = mem.add("edit", X, summary=f"wrote {PATH}", path=PATH)
    i = 0
    while mem.hot_item(first) is not None:
        mem.add("log", _filler(i))
        mem.tick()
        i += 1
    latest = mem.add("edit", Y, summary=f"wrote {PATH}", path=PATH)
    record = store.get(first)
    assert record is not None and "first version X" not in record["text"]
    assert record["summary"] == f"{PATH}, superseded by {latest}"
    assert mem.recall(first) == [first]
    assert "first version X" not in mem.assemble().render()


def test_reads_of_other_files_and_reads_after_the_write_stay():
    mem = WorkingMemory()
    other = mem.add("file", "OTHER CONTENT\nline two", summary="read calc/other.py", path="o.py")
    mem.add("edit", X, summary=f"wrote {PATH}", path=PATH)
    mem.add("file", X + "\n# read after the write\n", summary=f"read {PATH}", path=PATH)
    text = mem.assemble().render()
    assert "OTHER CONTENT" in text and "read after the write" in text
    assert mem.hot_item(other) is not None


def test_the_views_survive_an_exported_state():
    store = InMemStore()
    mem = WorkingMemory(store=store)
    mem.add("edit", X, summary=f"wrote {PATH}", path=PATH)
    state = mem.export_state()
    again = WorkingMemory(store=store)
    again.import_state(state)
    again.add("edit", Y, summary=f"wrote {PATH}", path=PATH)
    assert "first version X" not in again.assemble().render()


def test_a_file_is_one_file_however_its_path_is_spelt():
    mem = WorkingMemory()
    read = mem.add("file", X, summary="read ./calc/stats.py", path="./calc/stats.py")
    again = mem.add(
        "file", X + "\n", summary="read calc/../calc/stats.py", path="calc/../calc/stats.py"
    )
    latest = mem.add("edit", Y, summary=f"wrote {PATH}", path=PATH)
    text = mem.assemble().render()
    assert "first version X" not in text and "second version Y" in text
    for old in (read, again):
        assert f"[file {old}] {PATH}, superseded by {latest}\n" in text
