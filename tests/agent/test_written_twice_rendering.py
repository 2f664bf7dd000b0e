"""A rewrite's diff as the model reads it keeps what the file holds now, never what it replaced."""

from agent_cli.agent.attempt.toolbox import without_removed


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


def test_a_diff_that_removes_nothing_is_unchanged():
    created = "created file n.py (1 lines)\n--- a/n.py\n+++ b/n.py\n@@ -0,0 +1 @@\n+x = 1"
    assert without_removed(created) is created
