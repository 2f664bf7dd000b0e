"""`agent runs` draws what it reads from disk as text: a run directory's name and what its
state.json says (which a command the model ran, or a cloned repository that tracks `.agent/`,
can make anything) reach the terminal without an escape sequence, a bidirectional override
or a line break, in the table and in the stacked layout."""

from __future__ import annotations

import io

import pytest
from rich.console import Console as RichConsole

from agent_cli.agent.run.live import shown
from agent_cli.ui.render import STACKED_BELOW, runs_view

HOSTILE = [
    {"run_id": "x\x1b]0;PWNED\x07y", "status": "unreadable", "goal": ""},  # a title, unended
    {"run_id": "\u202eevil\nz", "status": "unreadable", "goal": ""},  # reversed, a fake row
    {
        "run_id": "20260101-000000-abcd",
        "started_at": "2026-01-01T00:00:00+00:00",
        "status": "\x1b[8mverified\r\x9b",  # conceal the rest of the line
        "steps": 1,
        "goal": "g\x1b[1A",
    },
    shown(
        {
            "run_id": "20260102-000000-abcd",
            "started_at": "2026-01-02T00:00:00+00:00",
            "status": "running",
            "steps": 2,
            "goal": "h",
            "live": True,
            "pid": 42,
            "worktree": "/w/\x1b[2Jtree\nfake row",
        }
    ),
]


def _drawn(width: int) -> str:
    out = io.StringIO()
    RichConsole(file=out, width=width, color_system=None).print(runs_view(HOSTILE))
    return out.getvalue()


@pytest.mark.parametrize("width", [30, STACKED_BELOW - 1, STACKED_BELOW, 160])
def test_every_cell_read_from_disk_reaches_the_terminal_as_text(width):
    drawn = _drawn(width)
    assert not any(c in drawn for c in "\x1b\x07\x9b\r\u202e"), repr(drawn)
    flat = " ".join(drawn.split())
    assert "xy" in flat and "evil z" in flat and "verified" in flat, flat
    assert "PWNED" not in flat and "in /w/tree fake row" in flat, flat


def test_the_table_keeps_one_line_per_run_and_one_per_live_run_below():
    lines = _drawn(160).splitlines()
    runs = [line for line in lines if line.startswith(("xy", "evil", "2026"))]
    assert [line.split()[0] for line in runs] == [
        "xy",
        "evil",
        "20260101-000000-abcd",
        "20260102-000000-abcd",
        "20260102-000000-abcd",  # its live line, below the table
    ], lines
    assert "verified" in runs[2] and runs[3].split()[3] == "live", runs
    assert runs[4].endswith("live: pid 42, in /w/tree fake row"), runs
