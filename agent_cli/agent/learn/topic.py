"""The repository that long-term memory items and episodes are filed under."""

from __future__ import annotations

from pathlib import Path


def repo_topic(root: Path) -> str:
    """The repository that episodes, procedures, notes and facts are about: its identity's
    keys (root commit, remote), or its directory's name when it has neither."""
    from agent_cli.workspace.git.identity import repo_identity

    return " ".join(repo_identity(root).keys()) or Path(root).name


def repo_topics(root: Path, own_store: bool) -> list[str]:
    """The topics a read for the repository at `root` keeps to: its identity, and in a store
    that is the repository's own only (not a shared `home` nor a server) also what older
    versions filed its items under, its folder's name and no repository at all, since in a
    shared store those may be any repository's."""
    topic = repo_topic(root)
    legacy = [Path(root).name, ""] if own_store else []
    return [topic, *(t for t in legacy if t != topic)]
