"""The repository that long-term memory items and episodes are filed under."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_cli.workspace.git.identity import RepoIdentity


def repo_topic(root: Path) -> str:
    """The repository that episodes, procedures, notes and facts are about: its identity's
    keys (root commit, remote), or its directory when it has neither (`topic_of`)."""
    from agent_cli.workspace.git.identity import repo_identity

    return topic_of(repo_identity(root), root)


def topic_of(identity: RepoIdentity, root: Path) -> str:
    """The topic of the repository at `root` whose identity is `identity` (`repo_topic`).

    A repository with neither a root commit nor a remote (a shallow clone without one) is
    known by its directory's whole path (hashed: a topic's keys are separated by blanks),
    never by the folder's name alone, which unrelated repositories share."""
    keys = " ".join(identity.keys())
    if keys:
        return keys
    path = str(Path(root).resolve()).encode("utf-8", "surrogateescape")
    return f"dir:{hashlib.sha256(path).hexdigest()[:16]}"


def former_topics(identity: RepoIdentity, root: Path, own_store: bool) -> list[str]:
    """What older versions filed the items of the repository at `root` under, in a store that is
    the repository's own only (not a shared `home` nor a server, where each of them may be
    any repository's): its folder's name (its main work tree's), the root commit they named
    it by when a history merged into it made that another root than today's
    (`RepoIdentity.former_root`), and no repository at all. In a shared store an item filed
    under that older root is still found by its remote, when it has one."""
    if not own_store:
        return []
    from agent_cli.workspace.git.worktree import main_work_tree

    older = [f"git:{identity.former_root}"] if identity.former_root else []
    # the user's checkout's folder, also from a linked work tree (a worktree run's is named
    # after the run, which no item was ever filed under)
    return [main_work_tree(Path(root)).name, *older, ""]


def repo_topics(root: Path, own_store: bool) -> list[str]:
    """The topics a read for the repository at `root` keeps to: its identity, and what older
    versions filed its items under (`former_topics`)."""
    from agent_cli.workspace.git.identity import repo_identity

    identity = repo_identity(root)
    topic = topic_of(identity, root)
    return [topic, *(t for t in former_topics(identity, root, own_store) if t != topic)]
