"""The previous tool result is shown in full up to a cap, with its fence intact."""

from agent_cli.agent.attempt.executor import capped
from agent_cli.agent.attempt.toolbox import ToolResult, fenced
from agent_cli.core import tokens
from fencekit import balanced


def test_long_results_are_cut_with_a_marker_inside_the_fence():
    big = ToolResult("run", "line of output\n" * 2000, kind="tool_output")
    shown = fenced(capped(big, 200))
    assert balanced(shown) and shown.endswith("</tool_output>")
    assert "more tokens cut" in shown and tokens.count(shown) < 260


def test_short_results_are_untouched():
    small = ToolResult("run", "ok")
    assert capped(small, 200) is small
