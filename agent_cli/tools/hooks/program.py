"""Whether a hook's program can be started where the hook runs, told before it is started.

The program is looked for as `execvp` looks for it: a name with a `/` is a path from the
repository root (the hook's working directory), any other name is looked up on the PATH of
the hook's environment. Under bubblewrap only what the sandbox shows counts: its private /tmp
hides a program under /tmp outside the directories bound into it. Not found is 127, found but
not executable 126, the codes a shell gives. A run asks before it starts bubblewrap (which
would only say `execvp` failed), and `agent doctor` asks the same, so both find the same.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_cli.workspace.shell.runner import bwrap_hides

NOT_FOUND, NOT_EXECUTABLE = 127, 126


@dataclass(frozen=True)
class CannotStart:
    """Why a hook's program cannot be started, and the exit code a shell would give."""

    exit_code: int
    why: str  # without the program's name: `command not found`


def cannot_start(
    program: str,
    root: Path,
    env: Mapping[str, str],
    sandbox: str = "none",
    readonly: Sequence[Path] = (),
) -> CannotStart | None:
    """Why `program` cannot be started in `root` with `env` (in `sandbox`); None when it can."""
    hidden: list[Path] = []

    def shown(path: Path) -> bool:
        if sandbox == "bwrap" and bwrap_hides(path, [root], readonly):
            hidden.append(path)
            return False
        return os.path.exists(path)

    if "/" in program:
        places = [root / program]
    else:  # an empty or relative PATH entry is taken from the working directory, the root
        places = [root / (entry or ".") / program for entry in os.get_exec_path(dict(env))]
    found = [path for path in places if shown(path)]
    if any(path.is_file() and os.access(path, os.X_OK) for path in found):
        return None
    if found:
        return CannotStart(NOT_EXECUTABLE, "cannot run it (it is not an executable file)")
    if hidden:
        which = "" if "/" in program else f", which hides {hidden[0]}"
        return CannotStart(
            NOT_FOUND,
            f"not found in the sandbox: bubblewrap gives a hook a private /tmp{which}, "
            "so keep its program in the repository or outside /tmp",
        )
    return CannotStart(NOT_FOUND, "command not found")
