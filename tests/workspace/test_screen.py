"""Command output reaches the model as a terminal would show it: no escape sequences, and a
line redrawn in place (a progress bar) as its last drawing only."""

from __future__ import annotations

from agent_cli.workspace.shell import screen
from agent_cli.workspace.shell.runner import run_command

_PROGRESS = (
    "for i in $(seq 1 3000); do printf '\\r\\033[32mdownloading %d%%\\033[0m' $((i / 30)); done; "
    "printf '\\n\\033[1;31mFAILED\\033[0m test_x\\r\\n'; printf 'spin\\b\\b\\a ok\\r\\n'"
)


def test_colours_go_and_a_redrawn_progress_line_is_kept_as_its_last_drawing(tmp_path):
    result = run_command(_PROGRESS, tmp_path, 30, max_output_chars=1000)
    assert result.exit_code == 0
    # 3000 redraws (60,000 characters) no longer fill the budget and push the result out
    assert result.output == "downloading 100%\nFAILED test_x\nsp ok\n"


def test_a_progress_line_never_ended_by_a_newline_is_its_last_drawing(tmp_path):
    result = run_command("printf '10%%\\r50%%\\r100%%\\r'", tmp_path, 10)
    assert result.output == "100%"


_RAW = (
    "a\x1b[1;31mred\x1b[0m\r\nb\x1b]8;;http://example.com\x07link\x1b]8;;\x1b\\\r\n"
    "10%\r20%\r\x1b(Bdone\n\x07bell\x1b\n"
)


def test_escapes_and_crlf_cut_by_any_chunk_boundary_come_out_the_same():
    whole = screen.Screen()
    expected = screen.without_controls(whole.feed(_RAW) + whole.finish())
    assert expected == "ared\nblink\ndone\nbell\n"
    for size in (1, 2, 3, 5):
        parts = screen.Screen()
        out = "".join(parts.feed(_RAW[i : i + size]) for i in range(0, len(_RAW), size))
        assert screen.without_controls(out + parts.finish()) == expected, size


def test_output_without_newlines_is_passed_on_not_held_whole():
    s = screen.Screen()
    assert len(s.feed("x" * (screen.MAX_LINE_HELD + 1))) == screen.MAX_LINE_HELD + 1
    assert s.feed("\rnew") == "" and s.finish() == "new"


def test_a_backspace_moves_back_and_what_follows_writes_over_it():
    """A spinner drawn with backspaces leaves its last frame, as on a terminal, also when the
    chunks cut it anywhere; a backspace at the start of a line stays on it."""
    text = "wait |\b/\b-\b\\\b| done\n\b\bok\n"
    for size in (1, 2, 3, len(text)):
        parts = screen.Screen()
        out = "".join(parts.feed(text[i : i + size]) for i in range(0, len(text), size))
        assert screen.without_controls(out + parts.finish()) == "wait | done\nok\n", size
    held = screen.Screen()
    assert held.feed("50%\b\b\b") == "" and held.finish() == "50%"
