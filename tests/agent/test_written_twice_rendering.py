"""A change as the model reads it keeps what the file holds now, never what it replaced."""

import json

from agent_cli.agent.attempt.executor import Exchange, exchange_messages
from agent_cli.agent.attempt.toolbox import without_removed
from agent_cli.core.models import ToolCall


def test_removed_lines_are_counted_not_repeated_and_headers_stay():
    diff = (
        "--- a/q.sql\n+++ b/q.sql\n@@ -1,3 +1,2 @@\n keep\n-old one\n--- a comment removed\n+new\n"
    )
    shown = without_removed(diff)
    assert shown.splitlines() == [
        "--- a/q.sql",
        "+++ b/q.sql",
        "@@ -1,3 +1,2 @@",
        " keep",
        "+new",
        "[2 replaced lines not repeated]",
    ]


def test_a_removed_line_holding_a_form_feed_is_counted_once_and_not_shown():
    diff = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n-x = 1  # page\x0cbreak\n+x = 2\n y\n"
    assert without_removed(diff).split("\n") == [
        "--- a/f.py",
        "+++ b/f.py",
        "@@ -1,2 +1,2 @@",
        "+x = 2",
        " y",
        "[1 replaced lines not repeated]",
    ]


def test_a_diff_that_removes_nothing_is_unchanged():
    created = "created file n.py (1 lines)\n--- a/n.py\n+++ b/n.py\n@@ -0,0 +1 @@\n+x = 1"
    assert without_removed(created) is created


def _echoed(ok: bool) -> dict:
    args = json.dumps({"path": "a.py", "old": "x = 1\n", "new": "x = 2\n"})
    call = ToolCall(id="c1", name="edit_file", arguments=args)
    message = exchange_messages(Exchange(calls=[call], results=["r"], ok=[ok]))[0]
    return json.loads(message["tool_calls"][0]["function"]["arguments"])


def test_a_done_edit_echoes_its_old_text_as_its_size_and_a_failed_one_whole():
    assert _echoed(True) == {"path": "a.py", "old": "[6 characters, replaced]", "new": "x = 2\n"}
    assert _echoed(False)["old"] == "x = 1\n"  # what did not match is shown to be fixed
