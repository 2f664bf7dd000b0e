"""A mention is a whole word: a run of ASCII letters, digits and underscores equal to a name."""

from agent_cli.memory.working.symbols import mentioned

KNOWN = {"ms": 0, "count_attempts": 0, "job_1": 0}


def test_a_name_glued_after_digits_is_not_mentioned():
    assert mentioned("took 456ms", KNOWN) == set()
    assert mentioned("took 456 ms", KNOWN) == {"ms"}


def test_a_name_inside_a_longer_word_is_not_mentioned():
    assert mentioned("count_attempts_total job_10 xjob_1", KNOWN) == set()


def test_punctuation_and_other_characters_end_a_word():
    assert mentioned("count_attempts(job_1);ms\tx", KNOWN) == {"count_attempts", "job_1", "ms"}
    assert mentioned("“count_attempts” → job_1…", KNOWN) == {"count_attempts", "job_1"}
    assert mentioned("456ms → x", KNOWN) == set()
