"""A large store's digest beyond what the goal's words say: the notes that state a rule of the
repository, the procedures one per test file, and the items tied to the code the goal names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agent_cli.agent.learn import codemap, digest, learning, procedures, rules
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.records import Result
from embedkit import HashEmbedder

TOPIC = "rootcommit123 github.com/acme/shop"
PYTEST = "python -m pytest -q -o addopts="


def _note(text: str) -> Result:
    return Result(0.0, "note", "n1", text, "", "run r1", "2026-11-02")


def _fill(store: LongTermMemory, n: int = 150) -> None:
    for i in range(n):
        store.curate(
            f"test_case{i} in tests/test_mod{i}.py covers case {i}; run it after touching that code",
            topic=TOPIC,
            origin_event_id=f"e{i}",
        )


def test_a_note_is_a_rule_when_it_says_it_holds_for_the_whole_repository():
    assert rules.is_rule(_note("Convention: tests are table-driven"))
    assert rules.is_rule(_note("Pitfall - the fixture leaks"))
    assert rules.is_rule(_note("plain pytest fails in this repository without -o addopts="))
    assert rules.is_rule(_note("every user-facing string is wrapped in _()"))
    assert not rules.is_rule(_note("test_case3 in tests/test_mod3.py covers case 3"))
    fact = Result(0.0, "fact", "f1", "Convention: ...", "", "run r1", "2026-11-02")
    assert not rules.is_rule(fact)


def test_a_rule_of_the_repository_reaches_a_goal_that_shares_no_word_with_it(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        _fill(store)
        rule = store.curate(
            "Convention: tests here are table-driven with pytest.mark.parametrize",
            topic=TOPIC,
            origin_event_id="r",
        )
        got = digest.build(store, "Write tests for dasherize", [TOPIC], 1500, min_score=0.2)
    assert rule in [r.id for r in got.items]
    assert sum(digest.cost(r) for r in got.items) <= 1500


def test_the_rule_closest_to_the_goal_by_meaning_outranks_rules_that_only_share_its_names(
    tmp_path,
):
    goal = "pad_row: why is it still the same as before, when it should not be?"
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        _fill(store)
        for i in range(30):  # rules naming the goal's function, about other work
            store.curate(
                f"Pitfall: pad_row in shop/table{i}.py is called from several places in this "
                "repository; a change to what it returns must update every caller",
                topic=TOPIC,
                origin_event_id=f"p{i}",
            )
        closest = store.curate(  # by meaning the nearest of all, sharing no name with it
            "Convention: when it is still the same as before, it should not be; why is it so",
            topic=TOPIC,
            origin_event_id="c",
        )
        got = digest.build(store, goal, [TOPIC], 1500, min_score=0.2)
    notes = [r.id for r in got.items if r.kind == "note"]
    assert notes[0] == closest
    assert sum(digest.cost(r) for r in got.items) <= 1500


def test_procedures_on_one_test_file_are_one_and_later_ones_are_brief():
    assert procedures.shape(f"{PYTEST} tests/test_a.py::test_x") == (
        f"{PYTEST} {{file}}",
        "tests/test_a.py",
        "tests/test_a.py::test_x",
    )
    assert procedures.shape(f"{PYTEST} tests/test_a.py -k 'x or y'")[2] == (
        "tests/test_a.py -k 'x or y'"
    )

    def proc(i: str, cmd: str, task: str = "") -> Result:
        text = f"`{cmd}` checks work in this repository (the harness saw it exit 0 after: {task})"
        r = Result(0.0, "procedure", i, text, "", "run r1", "2026-11-02")
        r.metadata = {"command": cmd, "task": task}
        return r

    first = proc("p1", f"{PYTEST} tests/test_a.py::test_x")
    same_file = proc("p2", f"{PYTEST} tests/test_a.py -k y")
    other = proc("p3", f"{PYTEST} tests/test_b.py", "Add a test for b")
    kept = procedures.one_per_file([first, same_file, other])
    assert [r.id for r in kept] == ["p1", "p3"]
    shown = procedures.briefly(kept)
    assert shown[0] is first
    assert shown[1].id == "p3" and shown[1].gist == ("the command of p1 on tests/test_b.py")
    assert other.gist == ""  # the record itself is left as it was
    assert digest.cost(shown[1]) < digest.cost(other)


def _repo(root: Path) -> Path:
    (root / "src" / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "shop" / "number.py").write_text(
        'def intcomma(value):\n    """Commas every three digits."""\n    return f"{value:,}"\n'
    )
    (root / "src" / "shop" / "filesize.py").write_text(
        'suffixes = {"binary": (" KiB", " MiB"), "decimal": (" kB", " MB")}\n\n\n'
        "def naturalsize(value, binary=False):\n    return str(value)\n"
    )
    (root / "tests" / "test_bench_commas.py").write_text(
        "from shop.number import intcomma\n\n\ndef test_it():\n"
        "    assert intcomma(1000) == '1,000'\n"
    )
    for i in range(40):
        (root / "tests" / f"test_other{i}.py").write_text(f"def test_other{i}():\n    pass\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_a_procedure_whose_test_file_uses_the_code_the_goal_names_is_recalled(tmp_path):
    root = _repo(tmp_path / "repo")
    goal = "run the number formatting tests for me"
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        _fill(store)
        wanted = store.add_procedure(  # the oldest, and no closer to the goal than the others
            f"{PYTEST} tests/test_bench_commas.py", "Add a test for commas", topic=TOPIC
        )
        for i in range(40):
            store.add_procedure(
                f"{PYTEST} tests/test_other{i}.py", f"Add a test for other{i}", topic=TOPIC
            )
        blind = digest.build(store, goal, [TOPIC], 1500, min_score=0.2)
        got = learning.recall_for_run(store, goal, [TOPIC], lambda p: None, count=False, root=root)
    assert wanted not in [r.id for r in blind.items]  # no word of the goal is in it
    assert wanted in [r.id for r in got.items]


def test_a_fact_about_the_code_holding_the_goals_words_is_recalled(tmp_path):
    root = _repo(tmp_path / "repo")
    code = codemap.read(root)
    goal = "Which code chooses between KiB and kB style units?"
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        _fill(store, 300)
        wanted = store.add_fact(
            "naturalsize() picks its suffixes from the suffixes dict", "t", topic=TOPIC
        )
        blind = digest.build(store, goal, [TOPIC], 1500, min_score=0.2)
        got = digest.build(store, goal, [TOPIC], 1500, min_score=0.2, code=lambda: code)
    assert wanted not in [r.id for r in blind.items]
    assert wanted in [r.id for r in got.items]


def test_the_code_map_stays_within_its_bounds(tmp_path):
    root = _repo(tmp_path / "repo")
    (root / ".venv").mkdir()
    (root / ".venv" / "hidden.py").write_text("def hidden_name():\n    pass\n")
    (root / "big.py").write_text("x = 1\n" * (codemap.MAX_FILE_BYTES // 6 + 1))
    (root / "broken.py").write_text("def (:\n")
    code = codemap.read(root)
    assert "hidden_name" not in code.by_name and "x" not in code.by_name
    assert {"intcomma", "naturalsize", "suffixes"} <= set(code.by_name)
    assert "intcomma src/shop/number.py" in code.files["tests/test_bench_commas.py"]


def test_the_code_map_reads_no_link_device_fifo_or_too_deep_a_file(tmp_path):
    root = _repo(tmp_path / "repo")
    outside = tmp_path / "secret.py"
    outside.write_text("def secret_name():\n    pass\n")
    (root / "linked.py").symlink_to(outside)
    (root / "zeros.py").symlink_to("/dev/zero")
    os.mkfifo(root / "pipe.py")
    (root / "deep.py").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    code = codemap.read(root)  # returns: nothing blocks on the FIFO or reads /dev/zero
    assert "secret_name" not in code.by_name and "linked.py" not in code.files
    assert {"intcomma", "naturalsize", "suffixes"} <= set(code.by_name)
