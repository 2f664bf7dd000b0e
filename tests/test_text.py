"""Text is cut between words and marked with "…", for display and for commit subjects."""

from __future__ import annotations

import pytest

from agent_cli.agent.judge.dispatch import commit_message
from agent_cli.core.models import Task
from agent_cli.core.text import shorten
from agent_cli.memory.longterm.records import one_line
from agent_cli.ui.render import short

GOAL = (
    "Add median(xs) to calc/stats.py: the middle value, the mean of the two middle values "
    "for an even count, ValueError when empty"
)


@pytest.mark.parametrize(
    "width, expected",
    [
        (200, GOAL),
        (60, "Add median(xs) to calc/stats.py: the middle value, the mean…"),
        (50, "Add median(xs) to calc/stats.py: the middle…"),  # the comma before the cut goes too
        (3, "Ad…"),
    ],
)
def test_shorten_cuts_between_words(width, expected):
    assert shorten(GOAL, width) == expected
    assert len(shorten(GOAL, width)) <= width


def test_shorten_flattens_whitespace_and_cuts_one_long_word_inside():
    assert shorten("a\n  b\tc", 10) == "a b c"
    path = "src/" + "x" * 60 + ".py"
    assert shorten(f"edit {path}", 30) == f"edit {path}"[:29] + "…"
    assert shorten("exactly ten", 11) == "exactly ten"
    assert shorten("", 5) == "" and shorten("abc", 0) == ""


def test_every_display_cut_uses_it():
    assert short("pytest\x1b[31m -q tests and much more", 22) == "pytest -q tests and…"
    assert one_line(GOAL, 40) == "Add median(xs) to calc/stats.py: the…"


def test_a_long_commit_subject_is_cut_between_words_and_the_goal_kept_in_the_body():
    message = commit_message(Task(goal=GOAL, acceptance="", acceptance_cmd=None), "r1")
    subject, blank, body, *_ = message.splitlines()
    assert subject == "Add median(xs) to calc/stats.py: the middle value, the mean of the two…"
    assert len(subject) <= 72 and blank == "" and body == GOAL
    assert message.endswith("Agent-Run: r1\n")


def test_text_that_cannot_be_sent_is_named():
    from agent_cli.core.text import unusable

    assert unusable("median of an empty list — ✓") == ""
    assert unusable("a\x00b") == "holds a NUL character"
    assert unusable("median\udcff") == "is not valid UTF-8 text"


def test_strict_json_takes_a_surrogate_pair_and_refuses_a_lone_half():
    import pytest

    from agent_cli.core import strictjson

    assert strictjson.loads('{"a": "\\ud83d\\ude00"}') == {"a": "😀"}
    with pytest.raises(ValueError, match="lone surrogate"):
        strictjson.loads('{"a": "x\\udcff"}')


@pytest.mark.parametrize(
    "shown, expected",
    [
        ("a\x1b]8;;http://evil.example\x07link\x1b]8;;\x07 b", "alink b"),  # OSC 8 hyperlink
        ("\x1b]0;a new title\x1b\\x", "x"),  # OSC ended by ST
        ("ok \x9b31mred", "ok 31mred"),  # C1 CSI
        ("rm -rf \u202eexe.gnp\u202c keep", "rm -rf exe.gnp keep"),  # bidi override
        ("a\u2066b\u2069c", "abc"),  # bidi isolates
        ("\x1b[1mbold\x1b[0m é 中文\tx", "bold é 中文    x"),
        ("d\ud800.txt \U0001f600", "d.txt \U0001f600"),  # a lone surrogate, a whole emoji
    ],
)
def test_clean_removes_what_a_terminal_would_act_on_or_reorder(shown, expected):
    from agent_cli.core.text import clean

    assert clean(shown) == expected


def test_some_names_the_first_items_then_how_many_more():
    from agent_cli.core.text import some

    assert some(["a", "b"]) == "a, b"
    assert some([f"f{i}" for i in range(7)]) == "f0, f1, f2, f3, f4 and 2 more"
    assert some(["a", "b", "c", "d"], 3) == "a, b, c and 1 more"
