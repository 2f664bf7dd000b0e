"""What a resumed run carries over from its start, under the trust rules.

A resumed run takes the endpoints, models and limits it was started with as if they were
flags given again (`RunStartedWith`). A value that the repository's `.agentrc` gave while the
user trusted it is carried only while that trust holds: after `agent trust --revoke`, or once
the file changed since it was trusted, a resume does not send the code and the API key to the
endpoint the file named, and says so. The keys each run took from the file are saved with it
(`from_repo`); for a run saved before they were, every endpoint and model is taken as the
file's when the repository has an `.agentrc`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_cli.agent.run.store import RunStartedWith
from agent_cli.cli.config import repo_keys, trust
from agent_cli.cli.config.settings import Settings

# the saved values a repository's file may only set when trusted: endpoints and models
TRUSTED_KEYS = tuple(
    key
    for key in RunStartedWith.model_fields
    if key in repo_keys.RULES and repo_keys.RULES[key].kind == "trust"
)


def carried(
    saved: RunStartedWith, given: dict[str, Any], repo: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The saved values a resume takes as flags (none where a flag is given now), and the keys
    left out because the repository's `.agentrc` gave them and is not trusted now."""
    out = {k: v for k, v in saved.flags().items() if given.get(k) is None}
    if trust.status(repo, env) == "trusted":
        return out, []
    dropped = sorted(k for k in out if k in _maybe_from_file(saved, repo))
    return {k: v for k, v in out.items() if k not in dropped}, dropped


def from_repo(
    settings: Settings, repo: Path, saved: RunStartedWith, kept: dict[str, Any]
) -> list[str]:
    """The keys of a run's saved values that came from the repository's `.agentrc`: those the
    file gives `settings` now, and those carried over (`kept`) that came from it before."""
    rc = str(repo / ".agentrc")
    now = {k for k in TRUSTED_KEYS if settings.sources.get(k) == rc}
    return sorted(now | (set(kept) & _maybe_from_file(saved, repo)))


def _maybe_from_file(saved: RunStartedWith, repo: Path) -> set[str]:
    """The saved keys that may have come from the repository's file."""
    if saved.from_repo is not None:
        return set(saved.from_repo)
    return set(TRUSTED_KEYS) if (repo / ".agentrc").is_file() else set()
