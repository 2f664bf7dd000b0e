"""Which acceptance commands a plan may carry: runnable, allowed by the policy, able to fail.

The harness runs a plan's `acceptance_cmd` itself (split with shlex, no shell), so each one
is checked when the plan arrives: its program exists (on PATH or in the repository), the
command policy does not refuse it, and it can fail at all (`true`, `:`, `echo ...`,
`sh -c '... || true'` prove nothing). A plan with a bad command goes back to the model
with the reason.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from agent_cli.workspace.shell.cmdline import shell_words, unwrap

Refusal = Callable[[str], "str | None"]
_ALWAYS_SUCCEED = {"true", ":", "echo", "printf", "yes", "sleep", "pwd", "date"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash"}
_ENDINGS = {";", "||", "&", "\n"}  # `X ; true` and `X || true` end in success whatever X does


def problem(cmd: str, root: Path, refusal: Refusal | None = None) -> str | None:
    """Why `cmd` cannot be a task's acceptance command, or None when it can."""
    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        return f"`{cmd}` cannot be parsed ({e})"
    if not argv:
        return "the acceptance command is empty"
    reason = refusal(cmd) if refusal else None
    if reason:
        return f"`{cmd}` is refused by the command policy: {reason}"
    if cannot_fail(argv):
        return (
            f"`{cmd}` always succeeds, so it proves nothing; use a command that fails when "
            "the task is not done (a test, a script that checks the result)"
        )
    for program in {argv[0], *unwrap(argv)[:1]}:
        if not _exists(program, root):
            return (
                f"`{cmd}`: the program {program!r} is not on PATH nor in the repository, so "
                "the command could only fail with exit 127"
            )
    return None


def _exists(program: str, root: Path) -> bool:
    if "/" in program:
        path = Path(program) if os.path.isabs(program) else root / program
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program) is not None or (root / program).is_file()


def cannot_fail(argv: list[str]) -> bool:
    """Whether the command (an argv run without a shell) exits 0 whatever the repository holds."""
    argv = unwrap(argv)
    if not argv:
        return True
    program = os.path.basename(argv[0])
    if program in _ALWAYS_SUCCEED:
        return True
    if program in _SHELLS:
        script = _dash_c(argv[1:])
        return script is not None and _script_cannot_fail(script)
    return False


def _dash_c(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg[1:] and i + 1 < len(args):
            return args[i + 1]
    return None


def _script_cannot_fail(script: str) -> bool:
    """Whether a shell script's exit status is 0 whatever its commands do."""
    try:
        words = shell_words(script)
    except ValueError:
        return False
    while words and words[-1] in (";", "\n", "&"):
        words = words[:-1]
    if not words:
        return True
    cut = max((i for i, w in enumerate(words) if w in _ENDINGS | {"&&", "|"}), default=-1)
    last, joiner = words[cut + 1 :], words[cut] if cut >= 0 else None
    if last and os.path.basename(last[0]) == "exit":  # a bare `exit` repeats the last status
        trivial = last[1:] == ["0"] or (last[1:] == [] and joiner is None)
    else:
        trivial = cannot_fail(last)
    return trivial and (joiner is None or joiner in _ENDINGS)


def plan_problems(
    commands: list[str | None], root: Path, refusal: Refusal | None
) -> dict[int, str]:
    """The problem of each task's acceptance command, by task index (tasks without one skipped)."""
    found = {}
    for index, cmd in enumerate(commands):
        reason = problem(cmd, root, refusal) if cmd else None
        if reason:
            found[index] = reason
    return found
