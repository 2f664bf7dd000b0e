"""The rule that keeps the API key out of git: not in a file, a path, nor a symlink's target."""

from __future__ import annotations

import os
from pathlib import Path

from agent_cli.core.errors import WorkspaceError


def where_secret(root: Path, path: str, secrets: tuple[str, ...]) -> str | None:
    """How `path` (relative to `root`) carries a secret: "name", "link" or "content"; else None."""
    if not secrets:
        return None
    if any(s in path for s in secrets):
        return "name"
    full = root / path
    if full.is_symlink():
        try:
            target = os.readlink(full)
        except OSError:
            return None
        return "link" if any(s in target for s in secrets) else None
    try:
        data = full.read_bytes() if full.is_file() else b""
    except OSError:
        return None
    return "content" if any(s.encode() in data for s in secrets) else None


def refuse_secrets(root: Path, paths: list[str], secrets: tuple[str, ...]) -> None:
    """Raise WorkspaceError before a commit that would carry a secret in any of `paths`."""
    for path in paths:
        how = where_secret(root, path, secrets)
        if how is None:
            continue
        shown = path
        for s in secrets:
            shown = shown.replace(s, "[REDACTED]")
        what = {
            "name": ": its name holds",
            "link": ": its symlink target holds",
            "content": " holds",
        }[how]
        raise WorkspaceError(
            f"{shown}{what} the API key, so it was not committed",
            "remove the key from it (or delete it), then continue with `agent run --resume`",
        )
