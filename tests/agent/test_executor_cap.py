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


def test_a_result_within_the_cap_by_its_bytes_is_not_tokenised():
    # Each token holds at least one byte, so a text of at most `cap` bytes is within the cap;
    # one of more bytes but fewer tokens is still counted and kept whole.
    tokens.get_encoding.cache_clear()
    small = ToolResult("read_file", "x" * 200)
    assert capped(small, 200) is small
    assert tokens.get_encoding.cache_info().currsize == 0
    words = ToolResult("read_file", "word " * 100)  # 500 bytes, about 100 tokens
    assert capped(words, 200) is words and tokens.get_encoding.cache_info().currsize == 1
