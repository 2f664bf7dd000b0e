"""Runs of one batch whose branches change the same files: merged one after the other, the
second merge may conflict, so the batch says which before anyone merges.

Each run's files are those its branch changed since it left the branch it started from
(`git diff --name-only BASE...BRANCH`: from their merge base, so work that lands on the base
meanwhile is not counted). A branch git cannot compare (deleted, renamed) is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from agent_cli.core.text import clean, readable
from agent_cli.workspace.git.safe import run_git

SHOWN_FILES = 3  # files named in the line; the rest are counted


@dataclass(frozen=True)
class Branch:
    """A run of the batch with work to merge: its place in the file, its branch, its base."""

    index: int
    branch: str
    base: str


@dataclass(frozen=True)
class Overlap:
    """Two runs whose branches change the same files."""

    first: Branch
    second: Branch
    files: tuple[str, ...]

    def line(self) -> str:
        """One line for the summary."""
        named = ", ".join(clean(f) for f in self.files[:SHOWN_FILES])
        more = len(self.files) - SHOWN_FILES
        named += f" and {more} more" if more > 0 else ""
        return (
            f"{self.first.index}. and {self.second.index}. both change {named}: once one of "
            f"{self.first.branch} and {self.second.branch} is merged, the other may conflict"
        )

    def record(self) -> dict[str, Any]:
        """What batch.json says of it."""
        return {
            "runs": [self.first.index, self.second.index],
            "branches": [self.first.branch, self.second.branch],
            "files": list(self.files),
        }


def changed_files(repo: Path, run: Branch, secrets: tuple[str, ...] = ()) -> set[str]:
    """The files `run`'s branch changed since its base, named to compare and show (one not
    UTF-8 as `\\xNN`: batch.json and the summary are UTF-8 text); empty when git cannot tell."""
    if run.base.startswith("-") or run.branch.startswith("-"):
        return set()  # no ref is named so; git would read the range as an option
    args = ["diff", "--name-only", "-z", "--no-renames", f"{run.base}...{run.branch}", "--"]
    try:
        code, out, _ = run_git(args, repo, secrets)
    except OSError:
        return set()
    if code != 0:
        return set()
    return {readable(name.decode("utf-8", "surrogateescape")) for name in out.split(b"\0") if name}


def overlaps(repo: Path, runs: Sequence[Branch], secrets: tuple[str, ...] = ()) -> list[Overlap]:
    """Each pair of `runs` whose branches change a file in common, in the file's order."""
    changed = [(run, changed_files(repo, run, secrets)) for run in runs]
    return [
        Overlap(a, b, tuple(sorted(files_a & files_b)))
        for (a, files_a), (b, files_b) in combinations(changed, 2)
        if files_a & files_b
    ]
