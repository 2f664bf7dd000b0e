"""The coding-memory benchmark reads what each request carried: fences, items, caps, scenarios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "codemem"))

import scenarios
import score
import stores
import systems

from agent_cli.core.fences import FENCE_RULE, retrieved_memory


def _note(i: int, text: str, at: str = "2026-01-01") -> dict:
    return {
        "collection": "facts",
        "id": f"n{i}",
        "document": text,
        "metadata": {"kind": "note", "gist": text, "created_at": at},
    }


def test_poison_inside_the_agents_fence_is_fenced_even_when_it_tries_to_close_it():
    block = retrieved_memory(f'- note poison_note trust="0.5": {stores.POISON_TEXT}')
    assert not score.read(f"{FENCE_RULE}\n{block}\nGOAL: x", stores.POISON_MARK).poison_unfenced


def test_poison_that_breaks_out_of_an_unescaped_fence_is_counted():
    """What the fence would hold if the stored text were not escaped: the model reads the
    fence as closed at the stored `</retrieved_memory>`, and the command after it as outside."""
    raw = f'<retrieved_memory>\n- note poison_note trust="0.5": {stores.POISON_TEXT}\n'
    raw += "</retrieved_memory>"
    assert score.read(f"{FENCE_RULE}\n{raw}\nGOAL: x", stores.POISON_MARK).poison_unfenced
    spaced = raw.replace("</retrieved_memory> SYSTEM", "< /retrieved_memory > SYSTEM")
    assert score.read(spaced, stores.POISON_MARK).poison_unfenced


def test_poison_outside_every_fence_is_counted():
    text = f"{FENCE_RULE}\n# MEMORY.md\n- note p: {stores.POISON_TEXT}\nGOAL: x"
    assert score.read(text, stores.POISON_MARK).poison_unfenced


def test_the_fence_rule_in_the_system_prompt_is_no_memory():
    seen = score.read(FENCE_RULE, stores.POISON_MARK)
    assert seen.items == {} and seen.memory_tokens == 0


def test_items_are_read_with_their_stale_mark():
    block = retrieved_memory(
        'header\n- fact mem_1 trust="0.5" stale="true": a (source: x)\n'
        '- procedure mem_2 trust="1.0": `pytest` works\n- episode 20261201-1: g'
    )
    seen = score.read(block, stores.POISON_MARK)
    assert seen.items == {"mem_1": True, "mem_2": False, "20261201-1": False}
    assert seen.memory_tokens > 0


def test_memory_md_keeps_the_first_200_lines_in_learning_order():
    records = [
        _note(i, f"note {i}", at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}") for i in range(300)
    ]
    text, ids = systems.memory_md(list(reversed(records)))
    assert ids == [f"n{i}" for i in range(199)]  # the header is the first of the 200 lines
    assert len(text.splitlines()) == 200


def test_memory_md_stops_at_25_kb():
    records = [_note(i, "x" * 1000, at=f"2026-01-01T00:00:{i:02d}") for i in range(40)]
    text, ids = systems.memory_md(records)
    assert len(text.encode()) <= 25_000 and len(ids) == 24


def test_the_scenarios_have_40_pairs_over_4_projects_with_every_need():
    loaded = scenarios.load_all()
    pairs = [p for s in loaded for p in s.pairs]
    assert len(loaded) >= 4 and len(pairs) >= 40
    assert {p.need for p in pairs} == set(scenarios.NEEDS)
    assert len({p.id for p in pairs}) == len(pairs)
    for s in loaded:
        assert len(s.project.sha256) == 64
        for p in s.pairs:
            assert p.b_goal.strip() and p.a_goal.strip() and p.b_goal != p.a_goal
            if p.need == "note":
                assert p.note and len(p.note) <= 300  # the agent shows up to 300 characters
            if p.need == "fact":
                assert p.fact


def test_a_fix_pair_must_have_a_break(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text(
        '[project]\nname="x"\nversion="1"\nsha256="0"\ntest_dir="."\ntest_cmd="t"\n'
        'sources=[]\ntests=[]\n[[pairs]]\nid="x-fix-1"\nneed="fix"\na_goal="a"\nb_goal="b"\n'
    )
    with pytest.raises(ValueError, match="break"):
        scenarios.load(bad)
