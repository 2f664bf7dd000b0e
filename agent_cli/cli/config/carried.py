"""What a resumed run carries over from its start, under the trust rules.

A resumed run takes the endpoints, models and limits it was started with (`RunStartedWith`)
as if they were flags given again, except where the user sets a different value now: a flag,
the environment, their own `~/.agentrc`, or the repository's `.agentrc` while it is trusted
(`Settings.sources` says which gave each value). That value takes the saved one's place, and
is said (`Changed`); a value left at its default never does. So a fix that an error asked for
(`check executor_base_url`) reaches the run it stopped. A value the run was given as a flag
(saved as `from_flags`) gives way only to a flag, as it did when the run started: a model
chosen with `--model` is not replaced by the one `~/.agentrc` names.

A value that the repository's `.agentrc` gave while the user trusted it is carried only while
that trust holds: after `agent trust --revoke`, or once the file changed since it was trusted,
a resume does not send the code and the API key to the endpoint the file named, and says so.
The keys each run took from the file are saved with it (`from_repo`); for a run saved before
they were, every endpoint and model is taken as the file's when the repository has an
`.agentrc`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cli.agent.run.store import RunStartedWith
from agent_cli.cli import roles
from agent_cli.cli.config import repo_keys, trust
from agent_cli.cli.config.settings import Settings
from agent_cli.core.redact import mask_url_credentials

# the saved values a repository's file may only set when trusted: endpoints and models
TRUSTED_KEYS = tuple(
    key
    for key in RunStartedWith.model_fields
    if key in repo_keys.RULES and repo_keys.RULES[key].kind == "trust"
)


@dataclass(frozen=True)
class Changed:
    """A saved value the user set differently now: the key, both values, and where from."""

    key: str
    saved: Any
    now: Any
    source: str  # as `Settings.sources` names it: "flag", "env AGENT_MODEL", a file's path

    def notice(self) -> str:
        """`executor_base_url: http://… from AGENT_EXECUTOR_BASE_URL, in place of the
        http://… the run was started with`."""
        origin = self.source.removeprefix("env ") if self.source != "flag" else "a flag"
        return (
            f"{self.key}: {_shown(self.now)} from {origin}, in place of the "
            f"{_shown(self.saved)} the run was started with"
        )


@dataclass(frozen=True)
class Carried:
    """What a resume takes from the saved values."""

    flags: dict[str, Any] = field(default_factory=dict)  # saved values taken as flags
    dropped: list[str] = field(default_factory=list)  # from the file, which is not trusted now
    changed: list[Changed] = field(default_factory=list)  # replaced by what the user set now


def carried(
    saved: RunStartedWith, now: Settings, repo: Path, env: dict[str, str] | None = None
) -> Carried:
    """The saved values a resume takes as flags, given `now`, the settings read without them:
    none where the user sets a different value now (`Changed`) or the same one, and none that
    the repository's `.agentrc` gave when it is not trusted now (`dropped`)."""
    trusted = trust.status(repo, env) == "trusted"
    from_file = set() if trusted else _maybe_from_file(saved, repo)
    flagged = _maybe_flagged(saved)
    out: dict[str, Any] = {}
    dropped, changed = [], []
    for key, value in saved.flags().items():
        source = now.sources.get(key, "default")
        if key in from_file and source != "flag":
            dropped.append(key)
        elif not _users(source, repo, trusted) or (key in flagged and source != "flag"):
            out[key] = value
        elif getattr(now, key) != value:
            changed.append(Changed(key, value, getattr(now, key), source))
    return Carried(out, sorted(dropped), changed)


def from_flags(given: dict[str, Any], saved: RunStartedWith, kept: dict[str, Any]) -> list[str]:
    """The keys of a run's saved values that were flags: those `given` now, and those carried
    over (`kept`) that were flags before."""
    now = {k for k, v in given.items() if v is not None and k in RunStartedWith.model_fields}
    return sorted(now | (set(kept) & _maybe_flagged(saved)))


def _maybe_flagged(saved: RunStartedWith) -> set[str]:
    """The saved keys that may have been flags (for a run saved before they were recorded,
    every one `agent run` has a flag for)."""
    return set(saved.from_flags) if saved.from_flags is not None else set(roles.RUN_FLAGS)


def _users(source: str, repo: Path, trusted: bool) -> bool:
    """Whether a value from `source` is one the user sets now: a flag, the environment, their
    own file, the repository's only while it is trusted (an untrusted one may set a limit
    lower than the default, never one in place of the run's own)."""
    if source == "default":
        return False
    return trusted or source != str(repo / ".agentrc")


def _shown(value: Any) -> str:
    """A saved or current value in a notice: an address with any credentials masked."""
    if value is None:
        return "none (the shared value)"
    return mask_url_credentials(str(value))


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
