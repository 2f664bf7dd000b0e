"""submit_facts arguments: what is kept, and that anything malformed keeps nothing."""

from agent_cli.agent.ask.facts import MAX_FACTS, parse_facts
from agent_cli.agent.learn.learning import Learned


def test_well_formed_facts_are_kept_with_their_repository_files():
    found = parse_facts(
        '{"facts": [{"text": " Tests  run with\\nmake check ", '
        '"files": ["Makefile", "/etc/passwd", "../x", ".git/config", 3]}]}'
    )
    assert [(f.text, f.files) for f in found] == [("Tests run with make check", ["Makefile"])]


def test_malformed_replies_store_nothing():
    for bad in (
        "not json",
        "[]",
        '{"facts": "x"}',
        '{"facts": [{"files": []}]}',
        '{"facts": [{"text": ""}]}',
        '{"facts": [{"text": 3}]}',
    ):
        assert parse_facts(bad) == []


def test_at_most_ten_facts():
    many = (
        '{"facts": [' + ",".join(f'{{"text": "fact {i}", "files": []}}' for i in range(30)) + "]}"
    )
    assert len(parse_facts(many)) == MAX_FACTS


def test_a_fix_is_what_a_task_that_had_failed_passed_with():
    learned = Learned()
    learned.passed(0, "first task", "nothing failed")
    learned.failed(1, ["tests/t.py::test_a failed"])
    learned.failed(1, ["tests/t.py::test_a failed", "tests/t.py::test_b failed"])
    learned.passed(1, "second task", "fixed both")
    assert [(f.task, f.signatures, f.summary) for f in learned.fixes] == [
        ("second task", ["tests/t.py::test_a failed", "tests/t.py::test_b failed"], "fixed both")
    ]
    assert Learned.from_dict(learned.to_dict()).to_dict() == learned.to_dict()
