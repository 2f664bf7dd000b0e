"""WorkingMemory: kinds, ids, scoring and eviction order, references, pinned notes, oversized items,
assemble() and its footer, explain()."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from agent_cli.core import tokens
from agent_cli.memory import InMemStore, Item, WorkingMemory
from agent_cli.memory.working import scoring
from agent_cli.memory.working.memory import FOOTER_TOKENS
from agent_cli.memory.working.meter import estimate

RETRY = '''def count_attempts(obj):
    """How many attempts were made."""
    return getattr(obj, "attempts", 0)
'''


def filler(i: int, words: int = 40) -> str:
    """A distinct text of about `words` tokens that mentions nothing defined."""
    return f"entry {i}\n" + " ".join(f"w{i}x{j}" for j in range(words // 3))


def evicted_ids(mem: WorkingMemory) -> list[str]:
    """Ids in the cold zone, in the order they went cold."""
    return [e["id"] for e in reversed(mem.store.recent(10_000))]


def test_unknown_kind_is_a_clear_value_error():
    mem = WorkingMemory()
    with pytest.raises(ValueError, match=r"unknown memory item kind 'diary'.*edit, note"):
        mem.add("diary", "dear diary")
    assert mem.stats()["hot"] == 0


def test_every_kind_in_the_table_is_accepted():
    mem = WorkingMemory()
    for kind in scoring.KIND_WEIGHTS:
        mem.add(kind, f"some {kind} text")
    assert sorted(i.kind for i in mem.hot_items()) == sorted(scoring.KIND_WEIGHTS)


def test_ids_are_short_unique_and_in_order():
    mem = WorkingMemory()
    ids = [mem.add("log", filler(i)) for i in range(5)]
    assert ids == ["m1", "m2", "m3", "m4", "m5"]


def test_constructor_rejects_impossible_settings():
    with pytest.raises(ValueError):
        WorkingMemory(max_tokens=10)
    with pytest.raises(ValueError):
        WorkingMemory(pinned_share=0)
    with pytest.raises(ValueError):
        WorkingMemory(recall_cooldown_steps=-1)


def test_an_item_is_estimated_at_add_and_counted_exactly_once_assembled():
    mem = WorkingMemory()
    item_id = mem.add("file", RETRY, summary="retry.py")
    item = next(i for i in mem.hot_items() if i.id == item_id)
    assert isinstance(item, Item) and not hasattr(item, "__dict__")
    assert not item.exact and item.tokens == estimate(RETRY)
    assert item.cost == estimate(item.header()) + item.tokens + 2
    mem.assemble()
    assert item.exact and item.tokens == tokens.count(RETRY)
    assert item.cost == tokens.count(item.header()) + item.tokens + 2
    assert item.summary == "retry.py" and item.symbols == ("count_attempts",)


def test_add_does_not_advance_the_step_and_tick_does():
    mem = WorkingMemory()
    mem.add("log", "one")
    assert mem.step == 0
    assert mem.tick() == 1 and mem.step == 1
    assert mem.stats()["step"] == 1


def test_recency_decays_with_steps():
    mem = WorkingMemory()
    item_id = mem.add("log", "something happened")
    seen = [mem.explain(item_id)["recency"]]
    for _ in range(6):
        mem.tick()
        seen.append(mem.explain(item_id)["recency"])
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == len(seen)
    assert seen[4] == scoring.recency_term(4)


def test_explain_returns_every_term_and_their_total():
    mem = WorkingMemory()
    item_id = mem.add("edit", RETRY)
    mem.assemble()  # counted exactly from here on
    terms = mem.explain(item_id)
    assert set(terms) == {"kind", "refs", "goal", "recency", "size", "total"}
    assert terms["kind"] == 3.0 and terms["goal"] == 0.0 and terms["refs"] == 0.0
    assert terms["size"] == pytest.approx(scoring.size_term(tokens.count(RETRY)))
    assert terms["total"] == pytest.approx(
        terms["kind"] + terms["refs"] + terms["goal"] + terms["recency"] - terms["size"]
    )
    with pytest.raises(KeyError):
        mem.explain("m999")


def test_references_count_later_items_that_mention_a_defined_name():
    mem = WorkingMemory()
    defining = mem.add("file", RETRY)
    mem.add("log", "count_attempts(job) returned 0")
    mem.add(
        "test_result", "FAILED test_count_attempts: count_attempts(None) != 0; see count_attempts"
    )
    mem.add("log", "nothing relevant here")
    assert mem.explain(defining)["refs"] == pytest.approx(scoring.REFS_WEIGHT * math.log1p(2))


def test_a_reference_raises_refs_but_leaves_recency_alone():
    mem = WorkingMemory()
    defining = mem.add("file", RETRY)
    for _ in range(8):
        mem.tick()
    before = mem.explain(defining)
    mem.add("log", "calling count_attempts now")
    after = mem.explain(defining)
    assert after["refs"] > before["refs"]
    assert after["recency"] == before["recency"]


def test_an_item_does_not_reference_itself():
    mem = WorkingMemory()
    defining = mem.add("file", RETRY + "\nprint(count_attempts(None))\n")
    assert mem.explain(defining)["refs"] == 0.0


def test_references_work_for_code_that_is_not_python():
    mem = WorkingMemory()
    js = "export function parseHeader(raw) {\n  return raw.split(':')\n}\n"
    defining = mem.add("file", js)
    mem.add("tool_output", "TypeError in parseHeader at line 2")
    assert mem.explain(defining)["refs"] == pytest.approx(scoring.refs_term(1))


def test_eviction_takes_the_lowest_score_first():
    mem = WorkingMemory(max_tokens=600)
    file = mem.add("file", filler(1))
    log = mem.add("log", filler(2))
    test = mem.add("test_result", filler(3))
    tool = mem.add("tool_output", filler(4))
    assert mem.stats()["evictions"] == 0
    i = 10
    while len(mem.cold_manifest()) < 4:
        mem.add("edit", filler(i))
        i += 1
    assert evicted_ids(mem) == [log, tool, test, file]


@pytest.mark.parametrize("protect", [0, 10])
def test_each_eviction_removes_the_weakest_item_that_may_go(protect):
    # A batch down to a quarter below the budget leaves other items beside the latest edits to
    # compare the evicted ones with.
    mem = WorkingMemory(max_tokens=600, protect_recent_edits=protect, low_water=0.75)
    kinds = ["log", "tool_output", "file", "test_result", "edit"]
    edits: list[str] = []
    batches = 0
    for i in range(60):
        before = {it.id: mem.explain(it.id)["total"] for it in mem.hot_items() if not it.pinned}
        new_id = mem.add(kinds[i % 5], filler(i, 20 + (i * 7) % 60))
        edits += [new_id] if kinds[i % 5] == "edit" else []
        latest = set(edits[-protect:]) if protect else set()
        hot = {it.id for it in mem.hot_items()}
        scores = {**before, new_id: mem.explain(new_id)["total"]}
        gone = sorted(set(scores) - hot, key=scores.get)
        kept = [scores[k] for k in hot if k in scores and k not in latest and k != new_id]
        if gone and kept:
            batches += 1
            # what went cold is the weakest part of what was there, leaving aside the latest
            # edits and the new item (the batch its arrival starts spares it)
            assert max(scores[g] for g in gone) <= min(kept)
        if i % 4 == 3:
            mem.tick()
    assert batches >= 5, f"only {batches} adds evicted anything"


def test_older_items_go_before_newer_ones_of_the_same_kind_and_size():
    mem = WorkingMemory(max_tokens=300)
    first = mem.add("log", filler(1))
    mem.tick()
    mem.add("log", filler(2))
    mem.tick()
    while first not in evicted_ids(mem):
        mem.add("log", filler(3 + mem.stats()["hot"]))
    assert evicted_ids(mem)[0] == first


def test_a_referenced_item_outlives_an_unreferenced_one():
    mem = WorkingMemory(max_tokens=400)
    plain = mem.add("file", "def unrelated_helper():\n    pass\n" + filler(1))
    used = mem.add("file", RETRY + filler(2))
    mem.add("log", "count_attempts called from the worker")
    for i in range(3):
        mem.tick()
    i = 0
    while plain not in evicted_ids(mem):
        i += 1
        mem.add("log", filler(100 + i))
    gone = evicted_ids(mem)
    assert used not in gone or gone.index(used) > gone.index(plain)


def test_bigger_items_score_lower_than_smaller_ones():
    mem = WorkingMemory()
    small = mem.add("log", filler(1, 20))
    big = mem.add("log", filler(2, 600))
    assert mem.explain(big)["size"] > mem.explain(small)["size"]
    assert mem.explain(big)["total"] < mem.explain(small)["total"]


def test_notes_are_pinned_and_survive_weaker_pressure():
    mem = WorkingMemory(max_tokens=400)
    note = mem.note("count_attempts returns 0 when the attribute is missing")
    for i in range(40):
        mem.add("edit", filler(i))
        mem.tick()
    hot = {i.id: i for i in mem.hot_items()}
    assert note in hot and hot[note].pinned and hot[note].kind == "note"


def test_pinned_notes_past_their_share_stay_and_the_oldest_are_named_to_unpin():
    mem = WorkingMemory(max_tokens=1000, pinned_share=1 / 3)
    ids = [mem.note(f"note {i}: " + filler(i, 60)) for i in range(6)]
    cap = (1000 - FOOTER_TOKENS) / 3
    assert {i.id for i in mem.hot_items() if i.pinned} == set(ids)  # none evicted silently
    over = mem.pinned_over()
    assert over == ids[: len(over)] and over  # the oldest first
    pinned_cost = sum(i.cost for i in mem.hot_items() if i.pinned)
    left = pinned_cost - sum(i.cost for i in mem.hot_items() if i.id in over)
    assert left <= cap < left + next(i.cost for i in mem.hot_items() if i.id == over[-1])


def test_a_larger_pinned_share_asks_to_unpin_fewer_notes():
    small = WorkingMemory(max_tokens=1000, pinned_share=0.2)
    large = WorkingMemory(max_tokens=1000, pinned_share=0.6)
    for mem in (small, large):
        for i in range(6):
            mem.note(filler(i, 60))
    assert len(large.pinned_over()) < len(small.pinned_over())


def test_an_item_larger_than_the_budget_goes_cold_with_a_stub_hot():
    mem = WorkingMemory(max_tokens=500)
    big = "def huge_function():\n" + "".join(f"    x{i} = {i}\n" for i in range(400))
    item_id = mem.add("file", big, summary="huge.py")
    assert mem.stats()["tokens"] <= 500
    stub = next(i for i in mem.hot_items() if i.id == item_id)
    assert stub.origin_id == item_id and stub.tokens < 60
    assert "huge.py" in stub.header() and "cold" in stub.header()
    assert [e["id"] for e in mem.cold_manifest()] == [item_id]
    ctx = mem.assemble()
    assert ctx.tokens <= 500 and item_id in ctx.render()


def test_an_oversized_item_comes_back_cut_to_half_the_budget():
    mem = WorkingMemory(max_tokens=500)
    big = "def huge_function():\n" + "".join(f"    x{i} = {i}\n" for i in range(400))
    item_id = mem.add("file", big, summary="huge.py")
    assert mem.recall("huge_function", k=1) == [item_id]
    view = next(i for i in mem.hot_items() if i.id == item_id)
    assert view.kind == "recalled" and view.text.startswith("def huge_function")
    assert "cut:" in view.text and view.cost <= 500 // 2
    assert mem.stats()["hot"] == 1  # the stub made way for the view
    assert mem.assemble().tokens <= 500


def test_assemble_labels_each_item_and_keeps_notes_apart():
    mem = WorkingMemory()
    log = mem.add("log", "pip install ran", summary="pip")
    note = mem.note("count_attempts must stay public")
    edit = mem.add("edit", RETRY, summary="retry.py: add count_attempts")
    mem.lay_out()
    ctx = mem.assemble()
    assert [i.id for i in ctx.items] == [note, log, edit]  # no batch yet: the order added
    assert ctx.pinned == f"[note {note} pinned] count_attempts must stay public\n"  # once
    assert ctx.memory.index(f"[log {log}] pip") < ctx.memory.index(
        f"[edit {edit}] retry.py: add count_attempts"
    )
    assert RETRY in ctx.memory and ctx.render() == ctx.pinned + "\n" + ctx.memory
    assert ctx.tokens == tokens.count(ctx.pinned) + tokens.count(ctx.memory) + 1


def test_a_note_taken_since_the_last_lay_out_waits_in_the_memory_block():
    mem = WorkingMemory()
    log = mem.add("log", "pip install ran", summary="pip")
    mem.lay_out()
    before = mem.assemble()
    note = mem.note("count_attempts must stay public")
    ctx = mem.assemble()
    assert ctx.pinned == before.pinned == ""  # the part before the memory block is unchanged
    assert ctx.memory.startswith(before.memory.rsplit("\n", 1)[0])
    assert ctx.memory.index(f"[log {log}]") < ctx.memory.index(f"[note {note} pinned]")
    mem.lay_out()
    ctx = mem.assemble()
    assert ctx.pinned.startswith(f"[note {note} pinned]") and "[note" not in ctx.memory


def test_hot_items_are_ordered_by_score():
    mem = WorkingMemory()
    for i, kind in enumerate(["log", "edit", "tool_output", "note", "file"]):
        mem.add(kind, filler(i))
    scores = [mem.explain(i.id)["total"] for i in mem.hot_items()]
    assert scores == sorted(scores, reverse=True)


def test_assemble_ends_with_a_bounded_list_of_cold_items():
    mem = WorkingMemory(max_tokens=400)
    for i in range(200):
        mem.add("log", filler(i), summary=f"log line {i} " + "x" * 100)
    ctx = mem.assemble()
    footer = ctx.render().rsplit("\n", 1)[1]
    assert footer.startswith("available with recall: ")
    newest_cold = evicted_ids(mem)[-1]
    assert newest_cold in footer and footer.endswith("more")
    assert tokens.count(footer) <= FOOTER_TOKENS
    assert ctx.tokens <= 400


def cold_line(mem: WorkingMemory) -> tuple[str, list[str]]:
    """The cold list of a context, and the ids it lists in order."""
    line = next(x for x in mem.assemble().memory.split("\n") if x.startswith("available with"))
    entries = line.removeprefix("available with recall: ").split("; ")
    return line, [entry.split(" ", 1)[0] for entry in entries if not entry.endswith(" more")]


def test_the_cold_list_grows_at_its_end_and_starts_again_with_what_went_cold_since():
    """A prompt cache reads a request up to its first change, so the items evicted since the
    last context are added after those it listed; when the line is full it starts again with
    them, and it always lists the most recently evicted item."""
    mem = WorkingMemory(max_tokens=600, low_water=0.95)
    lines, appended, restarted = [], 0, 0
    for i in range(40):
        mem.add("log", filler(i, words=60), summary=f"log {i}")
        mem.tick()
        if not evicted_ids(mem):
            continue
        line, ids = cold_line(mem)
        assert line == cold_line(mem)[0]  # assembling again changes nothing
        assert evicted_ids(mem)[-1] in ids and tokens.count(line) <= FOOTER_TOKENS
        if lines and line != lines[-1][0]:
            before_ids = lines[-1][1]
            if ids[: len(before_ids)] == before_ids:
                appended += 1
                kept = lines[-1][0].rsplit("; ", 1)[0]  # without its "N more"
                assert line.startswith(kept)
            else:
                restarted += 1  # only items that went cold since the last context
                assert not set(ids) & lines[-1][2]
        lines.append((line, ids, set(evicted_ids(mem))))
    assert appended > restarted > 0


def test_a_recalled_item_leaves_the_cold_list():
    mem = WorkingMemory(max_tokens=600)
    for i in range(12):
        mem.add("log", filler(i, words=60), summary=f"log {i}")
        mem.tick()
    _, ids = cold_line(mem)
    assert mem.recall(ids[0], k=1) == [ids[0]]
    assert ids[0] not in cold_line(mem)[1]


def test_cold_manifest_lists_id_kind_summary_symbols_and_step():
    mem = WorkingMemory(max_tokens=300)
    first = mem.add("edit", RETRY, summary="retry.py")
    mem.tick()
    while not mem.cold_manifest():
        mem.add("edit", filler(mem.stats()["hot"]))
    entry = mem.cold_manifest()[0]
    assert entry == {
        "id": first,
        "kind": "edit",
        "summary": "retry.py",
        "symbols": ["count_attempts"],
        "step_evicted": 1,
    }
    assert mem.explain(first)["kind"] == 3.0  # a cold item can be explained too


def test_stats_counts_hot_cold_tokens_and_evictions():
    mem = WorkingMemory(max_tokens=300, store=InMemStore())
    for i in range(20):
        mem.add("log", filler(i))
    stats = mem.stats()
    assert stats["hot"] == len(mem.hot_items())
    assert stats["cold"] == len(mem.cold_manifest()) == stats["evictions"]
    assert stats["hot"] + stats["cold"] == 20
    assert stats["tokens"] == sum(i.cost for i in mem.hot_items()) <= 300 - FOOTER_TOKENS


@pytest.mark.slow
def test_importing_the_package_loads_no_vendor_sdk():
    code = (
        "import sys, agent_cli.memory; "
        "print(sorted(m for m in ('tiktoken', 'chromadb', 'openai', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_oversized_item_shown_as_its_stub_leaves_the_cold_list_as_it_was():
    """The stub says how to recall the item, so the list of what is cold does not name it: the
    list keeps its place and text, and the block only grows at its end (a prompt cache keeps
    what came before)."""
    mem = WorkingMemory(max_tokens=900)
    for i in range(30):
        mem.add("log", filler(i), summary=f"log line {i}")
    before = mem.assemble().memory
    assert "available with recall: " in before
    big = "def huge_function():\n" + "".join(f"    x{i} = {i}\n" for i in range(400))
    item_id = mem.add("file", big, summary="huge.py")
    after = mem.assemble().memory
    assert after.startswith(before) and f"[file {item_id} cold] huge.py" in after[len(before) :]
    assert f"{item_id} huge.py" not in after  # not listed as cold beside its stub
    assert mem.recall("huge_function", k=1) == [item_id]
