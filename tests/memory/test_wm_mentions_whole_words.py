"""A mention is a whole word: a run of ASCII letters, digits and underscores equal to a name."""

from agent_cli.memory.working.names.mentions import Mentions

KNOWN = {"ms": 0, "count_attempts": 0, "job_1": 0}


def mentioned(text: str, known: dict[str, int]) -> set[str]:
    return Mentions(known).found_in(text)


def test_a_name_glued_after_digits_is_not_mentioned():
    assert mentioned("took 456ms", KNOWN) == set()
    assert mentioned("took 456 ms", KNOWN) == {"ms"}


def test_a_name_inside_a_longer_word_is_not_mentioned():
    assert mentioned("count_attempts_total job_10 xjob_1", KNOWN) == set()


def test_punctuation_and_other_characters_end_a_word():
    assert mentioned("count_attempts(job_1);ms\tx", KNOWN) == {"count_attempts", "job_1", "ms"}
    assert mentioned("“count_attempts” → job_1…", KNOWN) == {"count_attempts", "job_1"}
    assert mentioned("456ms → x", KNOWN) == set()


def test_a_name_defined_later_is_found_and_one_known_keeps_its_count():
    mentions = Mentions({"ms": 4})
    mentions.define("parse_x")
    mentions.define("ms")
    assert mentions.counts == {"ms": 4, "parse_x": 0}
    assert mentions.found_in("call parse_x(1) in 3 ms") == {"parse_x", "ms"}
    assert mentions.found_in("call parse_x(1) → ms") == {"parse_x", "ms"}  # not ASCII


def test_a_name_with_other_characters_is_never_mentioned():
    mentions = Mentions()
    mentions.define("größe")
    assert mentions.found_in("größe = 1") == set() and mentions.found_in("grosse") == set()
