"""The repository's own instruction files (AGENTS.md and the like), read at the start of a run.

Found by convention: `AGENTS.md` at the root, `CLAUDE.md`, `.github/copilot-instructions.md`,
and `CONTRIBUTING.md` only when none of those exists; later in the run, the nearest
`AGENTS.md` above each file a task touches. They are the owner's words, not retrieved memory:
only files the user's tree held when the run started are read: one that a command or the
model created or changed since (its inode's change time, which no process can set back, is
later) is left out, since a download or an unpacked package is no one's instruction;
each reaches the planning and every execution request in its own `<repo_instructions>` fence,
escaped, and all of them together within a token share of the context window (a longer
file is cut, and the cut is said). Only regular files inside the repository are read.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from agent_cli.core import fences, tokens

CONVENTIONAL = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
FALLBACK = "CONTRIBUTING.md"
NESTED = "AGENTS.md"
SHARE = 0.1  # of the tokens a request may take
MAX_FILE_BYTES = 256_000
# Linux stamps change times from CLOCK_REALTIME_COARSE (id 5), up to a tick behind time_ns
COARSE_CLOCK = 5
CLOCK_SLACK_NS = 100_000_000  # elsewhere: a bound on how far that clock lags


@dataclass
class InstructionFile:
    """One instruction file: its path from the root, its text (maybe cut), its tokens."""

    path: str
    text: str
    tokens: int
    cut: bool = False


@dataclass
class Instructions:
    """The instruction files of a repository, rendered within `max_tokens`."""

    root: Path
    max_tokens: int
    files: list[InstructionFile] = field(default_factory=list)
    looked: set[str] = field(default_factory=set)  # touched paths already looked above
    since: int = field(default_factory=lambda: fs_now())  # when the run started, in ns
    # a path's blob id in the commit the run began at (None: none there): a file that still
    # holds it is the owner's, whenever git wrote it (a resumed run's work tree made again)
    began: Callable[[str], str | None] | None = None

    @property
    def tokens(self) -> int:
        """Tokens of every file's text as sent."""
        return sum(f.tokens for f in self.files)

    def names(self) -> list[str]:
        return [f.path for f in self.files]

    def render(self) -> str:
        """Every file in its own `<repo_instructions source="PATH">` fence."""
        return "\n".join(fences.repo_instructions(f.path, f.text) for f in self.files)

    def add(self, path: str) -> bool:
        """Read `path` (relative to the root) if it is an instruction file not yet read."""
        if path in self.names():
            return False
        if not unchanged_since(self.root, path, self.since) and not self._as_began(path):
            return False
        text = read_inside(self.root, path)
        if text is None or not text.strip():
            return False
        room = self.max_tokens - self.tokens
        if room <= 32:
            return False
        count = tokens.count(text)
        cut = count > room
        if cut:
            note = (
                f"\n[… {path} is {count} tokens long; cut here to stay within the "
                "instructions' share of the context]"
            )
            text = tokens.truncate(text, room - tokens.count(note) - 2) + note
            count = tokens.count(text)
        self.files.append(InstructionFile(path, text, count, cut))
        return True

    def _as_began(self, path: str) -> bool:
        """Whether `path` holds what the commit the run began at held there."""
        from agent_cli.workspace.git.blobs import blob_hash

        began = self.began(path) if self.began is not None else None
        return began is not None and blob_hash(self.root, path) == began

    def touch(self, paths: list[str] | set[str]) -> bool:
        """Add the nearest AGENTS.md above each of `paths`; True when one was new."""
        added = False
        for path in sorted(set(paths) - self.looked):
            self.looked.add(path)
            nearest = nearest_agents_md(self.root, path)
            if nearest is not None:
                added = self.add(nearest) or added
        return added


def load(
    root: Path,
    max_tokens: int,
    since: int | None = None,
    began: Callable[[str], str | None] | None = None,
) -> Instructions:
    """The conventional instruction files of the repository at `root` that no one created or
    changed after `since` (ns by `fs_now`; default: now), or that hold what `began` names
    (their blob id in the commit the run began at)."""
    found = Instructions(Path(root), max_tokens, began=began)
    if since is not None:
        found.since = since
    for path in CONVENTIONAL:
        found.add(path)
    if not found.files:
        found.add(FALLBACK)
    return found


def share_of(window_tokens: int) -> int:
    """The tokens instruction files may take in a request of `window_tokens`."""
    return max(int(window_tokens * SHARE), 256)


def nearest_agents_md(root: Path, path: str) -> str | None:
    """The closest AGENTS.md in a directory above `path`, below the root; None if none."""
    parts = PurePosixPath(path).parts
    if not parts or ".." in parts or PurePosixPath(path).is_absolute():
        return None
    for depth in range(len(parts) - 1, 0, -1):
        candidate = "/".join(parts[:depth] + (NESTED,))
        if read_inside(root, candidate) is not None:
            return candidate
    return None


def fs_now() -> int:
    """Now (ns), by the clock the file system stamps change times with, or a little before."""
    linux = sys.platform.startswith("linux")
    return time.clock_gettime_ns(COARSE_CLOCK) if linux else time.time_ns() - CLOCK_SLACK_NS


def unchanged_since(root: Path, path: str, since: int) -> bool:
    """Whether `path` (and, when it is a link, what it names) was last created or changed
    before `since` (ns): no command or tool of the run made or changed it."""
    full = Path(root) / path
    try:
        return os.lstat(full).st_ctime_ns < since and os.stat(full).st_ctime_ns < since
    except (OSError, ValueError):
        return False


def read_inside(root: Path, path: str) -> str | None:
    """The text of a regular file at `path` that lies inside `root`, or None."""
    base = Path(root).resolve()
    try:
        real = (base / path).resolve()
        if not real.is_relative_to(base) or not real.is_file():
            return None
        with open(real, "rb") as f:
            data = f.read(MAX_FILE_BYTES)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", errors="replace")
