"""The diff a write or an edit returns is bounded in time: a large rewrite gets a summary."""

from __future__ import annotations

import time

from agent_cli.workspace.files import Files

LINES = 20_000


def _text(changed: bool) -> str:
    """20,000 lines (about 550 KB); `changed` alters every other one."""
    return "".join(
        f"value_{i} = compute({i + 1 if changed and i % 2 else i})\n" for i in range(LINES)
    )


def test_rewriting_every_other_line_of_a_large_file_returns_a_summary_at_once(tmp_path):
    (tmp_path / "big.py").write_text(_text(changed=False))
    tools = Files(tmp_path)
    started = time.monotonic()
    result = tools.write("big.py", _text(changed=True))
    assert time.monotonic() - started < 10  # difflib takes about 100 s on it
    assert result.startswith("[diff omitted: big.py lines 2-20000 (19,999 lines) rewritten")
    assert "read a range of the file to check the change" in result
    assert (tmp_path / "big.py").read_text() == _text(changed=True)


def test_a_small_change_in_a_large_file_still_gets_its_diff(tmp_path):
    (tmp_path / "big.py").write_text(_text(changed=False))
    tools = Files(tmp_path)
    result = tools.edit("big.py", "value_10000 = compute(10000)\n", "value_10000 = 0\n")
    assert "-value_10000 = compute(10000)" in result
    assert "+value_10000 = 0" in result
    assert "@@ -9998,7 +9998,7 @@" in result
