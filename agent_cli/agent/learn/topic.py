"""The repository that long-term memory items and episodes are filed under."""

from __future__ import annotations

from pathlib import Path


def repo_topic(root: Path) -> str:
    """The repository that episodes, procedures, notes and facts are about: its identity's
    keys (root commit, remote), or its directory's name when it has neither."""
    from agent_cli.workspace.git.identity import repo_identity

    return " ".join(repo_identity(root).keys()) or Path(root).name
