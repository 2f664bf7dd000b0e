"""Issue 22's workload, reported by bench/working_memory.py: items of about 1.2 KB into a
4,000-token working memory, one edit and one note in twenty, and the note-heavy mix (17% notes)
on the same item shapes; protoprompt 0.20.0 on the same items in the same run (wm_proto.py).

Through the public WorkingMemory API only (add, note, assemble, recall): what is checked is
that the 10 latest edits are in the assembled context, that no context is over budget, that
evicted edits are recalled by name, and the add time against protoprompt's.
"""

from __future__ import annotations

import statistics

from agent_cli.core import tokens
from wm_proto import TARGET, side_by_side
from wm_runs import BUDGET, SIZES, Result, print_rows
from wm_workload import PINNED_MIX, SESSION_MIX, make_kb_session

WORKLOADS = (
    ("one edit and one note in twenty", SESSION_MIX, 13),
    ("note-heavy, 17% notes", PINNED_MIX, 11),
)


def _verdict(mems: list[Result], ratios: list[float] | None) -> str:
    """One line: the done-when checks of issue 22 on these rows."""
    recent = all(m.recent_min == 10 for m in mems)
    found = all(m.hits.split("/")[0] == m.hits.split("/")[1] for m in mems)
    budget = all(m.largest <= BUDGET for m in mems)
    line = (
        f"  10/10 latest edits in every context checked: {recent}; never over budget: {budget}; "
        f"every evicted edit sampled recalled by name: {found}"
    )
    if ratios is not None:
        line += f"; add >= {TARGET}x protoprompt at {', '.join(map(str, SIZES))}: "
        line += str(all(r >= TARGET for r in ratios))
    return line


def report() -> None:
    """Each workload at every size, with protoprompt side by side when it is installed."""
    for label, mix, seed in WORKLOADS:
        session = make_kb_session(max(SIZES), mix, seed=seed)
        sizes = [tokens.count(text) for _, text, _ in session.items]
        kilobytes = statistics.mean(len(text.encode()) for _, text, _ in session.items) / 1000
        print(
            f"\nissue 22's workload, {label}: {len(session.items)} items of {kilobytes:.2f} KB "
            f"on average, {min(sizes)}-{max(sizes)} tokens (mean {statistics.mean(sizes):.0f}), "
            f"budget {BUDGET} tokens"
        )
        mems, ratios = side_by_side(session, "working memory (InMemStore)", BUDGET)
        print_rows(mems)
        print(_verdict(mems, ratios))
