"""recall(): the symbol and meaning channels, cooldown, batch restore, lineage; goal similarity;
export_state()/import_state()."""

from __future__ import annotations

import json
import math

from agent_cli.memory import InMemStore, WorkingMemory
from agent_cli.memory.working import scoring
from embedkit import HashEmbedder

RETRY = '''def count_attempts(obj):
    """How many attempts were made."""
    return getattr(obj, "attempts", 0)
'''


def filler(i: int, words: int = 40) -> str:
    """A distinct text that mentions nothing defined and shares no words with others."""
    return f"entry{i}\n" + " ".join(f"q{i}z{j}" for j in range(words // 3))


def push_out(mem: WorkingMemory, item_id: str) -> None:
    """Add fresh edits, a step apart, until `item_id` is no longer hot."""
    i = 0
    while item_id in {it.id for it in mem.hot_items()}:
        i += 1
        mem.tick()
        mem.add("edit", filler(1000 + i + mem.stats()["evictions"]))


def hot(mem: WorkingMemory) -> dict:
    """Hot items by id."""
    return {it.id: it for it in mem.hot_items()}


def test_symbol_recall_brings_an_evicted_edit_back_as_recalled():
    mem = WorkingMemory(max_tokens=400)
    edit = mem.add("edit", RETRY, summary="retry.py")
    push_out(mem, edit)
    assert edit in {e["id"] for e in mem.cold_manifest()}
    assert mem.recall("what does count_attempts do?", k=3) == [edit]
    item = hot(mem)[edit]
    assert item.kind == "recalled" and item.origin_id == edit and item.text == RETRY
    assert mem.explain(edit)["recency"] == scoring.recency_term(0)  # recall touches it
    assert edit not in {e["id"] for e in mem.cold_manifest()}
    assert mem.stats()["cold"] == len(mem.cold_manifest())


def test_exact_names_come_before_names_in_another_case():
    mem = WorkingMemory(max_tokens=400)
    upper = mem.add("edit", "COUNT_ATTEMPTS = 3\n")
    exact = mem.add("edit", RETRY)
    push_out(mem, upper)
    push_out(mem, exact)
    assert mem.recall("count_attempts", k=1) == [exact]
    assert mem.recall("count_attempts", k=1) == [upper]


def test_an_id_in_the_query_recalls_that_item():
    mem = WorkingMemory(max_tokens=300)
    first = mem.add("log", filler(1))
    push_out(mem, first)
    assert mem.recall(f"show me {first}", k=1) == [first]


def test_nothing_matches_gives_an_empty_list():
    mem = WorkingMemory(max_tokens=300)
    push_out(mem, mem.add("edit", RETRY))
    assert mem.recall("no such name anywhere", k=3) == []
    assert mem.recall("count_attempts", k=0) == []


def test_meaning_recall_finds_a_cold_item_by_its_words():
    emb = HashEmbedder()
    mem = WorkingMemory(max_tokens=400, embedder=emb)
    target = mem.add("tool_output", "the database connection timed out after thirty seconds")
    push_out(mem, target)
    assert mem.recall("why did the database connection time out", k=1) == [target]


def test_meaning_recall_is_off_without_an_embedder():
    mem = WorkingMemory(max_tokens=400)
    target = mem.add("tool_output", "the database connection timed out after thirty seconds")
    push_out(mem, target)
    assert mem.recall("why did the database connection time out", k=1) == []


def test_cold_vectors_are_stored_not_embedded_again_per_query():
    emb = HashEmbedder()
    mem = WorkingMemory(max_tokens=400, embedder=emb)
    target = mem.add("tool_output", "the database connection timed out after thirty seconds")
    push_out(mem, target)
    before = emb.texts
    mem.recall("database connection", k=1)
    mem.recall("thirty seconds", k=1)
    assert emb.texts - before == 2  # the two queries, nothing else
    assert mem.store.get(target)["vector"]


def test_a_freshly_evicted_item_is_quarantined_from_meaning_recall():
    mem = WorkingMemory(max_tokens=400, embedder=HashEmbedder(), recall_cooldown_steps=3)
    target = mem.add("tool_output", "the database connection timed out after thirty seconds")
    push_out(mem, target)
    query = "why did the database connection time out"
    assert mem.recall(query, k=1) == []
    mem.tick()
    mem.tick()
    assert mem.recall(query, k=1) == []
    mem.tick()
    assert mem.recall(query, k=1) == [target]


def test_the_cooldown_holds_back_a_symbol_hit_too_and_says_for_how_long():
    mem = WorkingMemory(max_tokens=400, embedder=HashEmbedder(), recall_cooldown_steps=50)
    edit = mem.add("edit", RETRY)
    push_out(mem, edit)
    evicted = mem.store.get(edit)["step_evicted"]
    assert mem.recall("count_attempts", k=1) == []
    assert mem.cooling("count_attempts", k=1) == [(edit, 50 - (mem.step - evicted))]
    while mem.step - evicted < 50:
        mem.tick()
    assert mem.cooling("count_attempts", k=1) == []
    assert mem.recall("count_attempts", k=1) == [edit]


def test_room_is_made_before_the_batch_so_restored_items_do_not_evict_each_other():
    mem = WorkingMemory(max_tokens=700)
    ids = [
        mem.add("edit", f"def helper_{i}():\n    return '{' '.join(['pad'] * 120)}'\n")
        for i in range(3)
    ]
    for item_id in ids:
        push_out(mem, item_id)
    restored = mem.recall("helper_0 helper_1 helper_2", k=3)
    assert sorted(restored) == sorted(ids)
    assert set(ids) <= set(hot(mem))
    assert mem.stats()["tokens"] <= 700


def test_a_batch_larger_than_the_room_is_cut_not_evicted():
    mem = WorkingMemory(max_tokens=500)
    ids = [
        mem.add("edit", f"def helper_{i}():\n    return '{' '.join(['pad'] * 150)}'\n")
        for i in range(3)
    ]
    for item_id in ids:
        push_out(mem, item_id)
    restored = mem.recall("helper_0 helper_1 helper_2", k=3)
    assert 0 < len(restored) < 3
    assert set(restored) <= set(hot(mem))


def test_evicting_a_recalled_item_again_keeps_one_cold_copy():
    mem = WorkingMemory(max_tokens=400)
    edit = mem.add("edit", RETRY)
    push_out(mem, edit)
    mem.recall("count_attempts", k=1)
    mem.add("log", "count_attempts was called")  # a reference while it is hot
    before = {e["id"] for e in mem.store.manifest()}
    push_out(mem, edit)
    added = {e["id"] for e in mem.store.manifest()} - before
    assert edit in before and edit not in added
    assert all(int(i[1:]) > int(edit[1:]) for i in added)  # only newer items went cold besides
    assert [e["id"] for e in mem.cold_manifest()].count(edit) == 1
    record = mem.store.get(edit)
    assert record["kind"] == "edit" and record["text"] == RETRY and record["refs"] == 1
    assert mem.recall("count_attempts", k=1) == [edit]


def test_an_item_already_recalled_is_not_recalled_twice():
    mem = WorkingMemory(max_tokens=400)
    edit = mem.add("edit", RETRY)
    push_out(mem, edit)
    assert mem.recall("count_attempts", k=3) == [edit]
    assert mem.recall("count_attempts", k=3) == []


def test_references_made_while_cold_count_when_recalled():
    mem = WorkingMemory(max_tokens=400)
    edit = mem.add("edit", RETRY)
    push_out(mem, edit)
    mem.add("log", "count_attempts(job) -> 0")
    mem.add("log", "count_attempts(None) -> 0")
    mem.recall("count_attempts", k=1)
    assert mem.explain(edit)["refs"] == scoring.refs_term(2)


def test_goal_similarity_raises_items_about_the_goal():
    mem = WorkingMemory(embedder=HashEmbedder())
    mem.set_goal("fix the database connection timeout")
    near = mem.add("log", "database connection timeout after retries")
    far = mem.add("log", "rendered the landing page banner image")
    assert mem.explain(near)["goal"] > 0.5 > mem.explain(far)["goal"]
    assert mem.goal == "fix the database connection timeout"
    mem.set_goal("rendered banner image")  # a new goal rescores what is hot
    assert mem.explain(far)["goal"] > mem.explain(near)["goal"]


def test_export_import_is_an_exact_round_trip():
    emb = HashEmbedder()
    mem = WorkingMemory(max_tokens=500, embedder=emb, store=InMemStore())
    mem.set_goal("add count_attempts to the retry module")
    edit = mem.add("edit", RETRY)
    mem.note("count_attempts returns 0 when the attribute is missing")
    for i in range(12):
        mem.add("log", filler(i))
        mem.tick()
    mem.recall("count_attempts", k=1)
    mem.assemble()  # the cold list is laid out here; what comes next goes after it
    mem.add("test_result", "count_attempts: 3 passed")
    mem.note("keep the signature")  # waits in the memory block: no lay_out() since
    laid = mem.assemble()
    assert "keep the signature" not in laid.pinned and "keep the signature" in laid.memory
    assert laid.memory.index("available with recall") < laid.memory.index("[test_result")
    state = json.loads(json.dumps(mem.export_state()))

    again = WorkingMemory(max_tokens=500, embedder=emb, store=mem.store)
    again.import_state(state)
    assert again.export_state() == state
    assert [i.to_dict() for i in again.hot_items()] == [i.to_dict() for i in mem.hot_items()]
    assert again.stats() == mem.stats()
    assert again.explain(edit) == mem.explain(edit)
    assert again.assemble().render() == mem.assemble().render()
    # both go on the same way: same next id, same evictions
    assert again.add("log", filler(99)) == mem.add("log", filler(99))
    assert again.stats() == mem.stats()


def test_vector_index_looks_past_a_shortlist_it_may_not_use():
    index = scoring.VectorIndex()
    for i in range(200):
        angle = i / 400
        index.put(f"m{i}", [math.cos(angle), math.sin(angle)], step_evicted=i)
    index.put("m999", [1.0, 0.0, 0.0], step_evicted=0)  # another embedder's size: ignored
    best = index.search([1.0, 0.0], 3, lambda item_id, step: True, 0.2)
    assert [i for i, _ in best] == ["m0", "m1", "m2"]
    late = index.search([1.0, 0.0], 3, lambda item_id, step: step >= 150, 0.2)
    assert [i for i, _ in late] == ["m150", "m151", "m152"]
    assert index.search([0.0, -1.0], 3, lambda item_id, step: True, 0.2) == []
