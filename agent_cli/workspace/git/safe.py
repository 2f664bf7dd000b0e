"""git run by the harness without running anything the repository controls.

A model command can write `.git/config` (or create a nested repository): a clean filter,
a textconv or diff driver, an fsmonitor or hook command there would run inside the
harness's own git calls, outside any sandbox. So every git process the harness starts
gets the scrubbed environment model commands get, runs no hooks and no fsmonitor, and
has each command-valued key of the repository's own config emptied with `-c`; the user's
global config (git-lfs filters, signing) still applies. Submodules are never entered.
`safe_env` carries the same settings as `GIT_CONFIG_*` variables, for git processes whose
command line the harness does not write (GitPython's).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from agent_cli.workspace.shell.runner import scrub_env

BASE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "submodule.recurse=false",
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "diff.ignoreSubmodules=all",
    "-c",
    "core.untrackedCache=false",
)
# Keys of repository config whose value is a command git may run (lower-cased as git lists them).
_COMMAND_KEYS = re.compile(
    r"(filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|merge\..*\.driver"
    r"|core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy|alternaterefscommand)"
    r"|sequence\.editor|gpg(\..*)?\.program|credential(\..*)?\.helper|diff\.external"
    r"|uploadpack\.packobjectshook|.*\.cmd|.*\.command)"
)
_FORCE_FALSE = re.compile(r"filter\..*\.required|(commit|tag)\.gpgsign")
_REPO_SCOPES = {"local", "worktree"}
TIMEOUT_S = 120


def git_env(secrets: tuple[str, ...] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a harness git process: secrets removed, never prompting."""
    env = scrub_env(dict(os.environ), list(secrets))
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    env.update(extra or {})
    return env


def neutralizing_config(cwd: Path, env: dict[str, str]) -> list[str]:
    """`-c KEY=` (or `=false`) for every command-valued key the repository's own config sets."""
    try:
        out = subprocess.run(
            ["git", *BASE_CONFIG, "config", "--list", "--show-scope", "-z"],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    overrides: list[str] = []
    fields = out.stdout.decode("utf-8", "surrogateescape").split("\0")
    for scope, entry in zip(
        fields[::2], fields[1::2], strict=False
    ):  # -z: SCOPE NUL KEY LF VALUE NUL
        key = entry.split("\n", 1)[0]
        if scope not in _REPO_SCOPES:
            continue
        if _FORCE_FALSE.fullmatch(key.lower()):
            overrides += ["-c", f"{key}=false"]
        elif _COMMAND_KEYS.fullmatch(key.lower()):
            overrides += ["-c", f"{key}="]
    return overrides


def run_git(
    args: list[str],
    cwd: Path,
    secrets: tuple[str, ...] = (),
    extra_env: dict[str, str] | None = None,
) -> tuple[int, bytes, str]:
    """Run one harness git command; (exit code, stdout bytes, stderr text)."""
    env = git_env(secrets, extra_env)
    argv = ["git", *BASE_CONFIG, *neutralizing_config(cwd, env), *args]
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return 124, b"", f"git {args[0]} did not finish in {TIMEOUT_S}s"
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def safe_env(
    cwd: Path, secrets: tuple[str, ...] = (), extra_env: dict[str, str] | None = None
) -> dict[str, str]:
    """`git_env` plus BASE_CONFIG and the neutralizing config as `GIT_CONFIG_*` variables."""
    env = git_env(secrets, extra_env)
    return with_config(env, [*BASE_CONFIG, *neutralizing_config(cwd, env)])


def with_config(env: dict[str, str], flags: list[str]) -> dict[str, str]:
    """`env` with the `-c KEY=VALUE` pairs of `flags` appended as `GIT_CONFIG_KEY_n`/`_VALUE_n`."""
    out = dict(env)
    count = out.get("GIT_CONFIG_COUNT", "0")
    n = int(count) if count.isdigit() else 0  # the caller's own entries come first: ours win
    for flag in flags[1::2]:
        key, _, value = flag.partition("=")
        out[f"GIT_CONFIG_KEY_{n}"] = key
        out[f"GIT_CONFIG_VALUE_{n}"] = value
        n += 1
    out["GIT_CONFIG_COUNT"] = str(n)
    return out
