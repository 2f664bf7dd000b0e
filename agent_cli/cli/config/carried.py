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

A role's key variable (`executor_api_key_env`) is carried with its endpoint: a role sent to
the endpoint it was started with again reads its key from the variable it was started with
(the API key's, `OPENAI_API_KEY`, for one that was sent that), unless the user names the
role's key variable now; a role the user sends elsewhere now is given the key that endpoint
would get in a new run, said in a notice. Before any request, a resume refuses in one line
(`_keys_for_saved_endpoints`) when such a variable is not set, and when a role would be sent
the API key at a saved endpoint other than `base_url` it was not started with: a run saved
before key variables were (no `api_key_env`), or an API key that now comes from elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cli.agent.run.roles import ROLES, Role
from agent_cli.agent.run.store import RunStartedWith
from agent_cli.cli import roles
from agent_cli.cli.config import repo_keys, trust
from agent_cli.cli.config.settings import Settings
from agent_cli.core.errors import ConfigError
from agent_cli.core.redact import mask_url_credentials
from agent_cli.llm.server.locality import is_local

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
    # a role's saved key variable not taken: the role is sent to another endpoint now
    unpaired: list[str] = field(default_factory=list)


def carried(
    saved: RunStartedWith, now: Settings, repo: Path, env: dict[str, str] | None = None
) -> Carried:
    """The saved values a resume takes as flags, given `now`, the settings read without them:
    none where the user sets a different value now (`Changed`) or the same one, none that
    the repository's `.agentrc` gave when it is not trusted now (`dropped`), and no role's key
    variable when the role is sent elsewhere now (`unpaired`). A ConfigError when a role would
    be sent to its saved endpoint without the key it was started with there."""
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
    taken = Carried(out, sorted(dropped), changed, _follow_endpoints(saved, now, out))
    _keys_for_saved_endpoints(saved, now, taken, env)
    return taken


def _endpoint(values: dict[str, Any], role: Role) -> str:
    """The endpoint `role` is sent to, given the settings `values`."""
    return str(values.get(f"{role}_base_url") or values.get("base_url") or "").rstrip("/")


def _resumed(now: Settings, out: dict[str, Any]) -> dict[str, Any]:
    """The settings a resume goes on with: `now`, with the saved values taken (`out`)."""
    keys = ("base_url", *roles.ROLE_SETTINGS)
    return {key: out[key] if key in out else getattr(now, key) for key in keys}


def _follow_endpoints(saved: RunStartedWith, now: Settings, out: dict[str, Any]) -> list[str]:
    """Take out of `out` each role's saved key variable whose role is sent to another endpoint
    now than the one it was started with (that variable's key was for that endpoint alone),
    and say each in a notice."""
    said, resumed, before = [], _resumed(now, out), saved.flags()
    for role in ROLES:
        key = f"{role}_api_key_env"
        if key not in out or _endpoint(resumed, role) == _endpoint(before, role):
            continue
        del out[key]
        said.append(
            f"{key} {saved.flags()[key]} saved with the run is not used: the {role} is sent to "
            f"{_shown(_endpoint(resumed, role))} now, not the "
            f"{_shown(_endpoint(before, role))} it was started with (its key is the one a new "
            f"run sends there; set {key} to choose another)"
        )
    return said


def _keys_for_saved_endpoints(
    saved: RunStartedWith, now: Settings, taken: Carried, env: dict[str, str] | None = None
) -> None:
    """Raise a one-line ConfigError when a role would be sent to an endpoint saved with the run
    without the key it was started with there: the variable it took its key from is not set
    now, or (no variable saved for it) the API key would go to a saved endpoint other than
    `base_url` while the run does not say the role was sent that key. A role whose key variable
    the user names now, or whose endpoint the user names now, is sent what they set."""
    env = dict(os.environ) if env is None else env
    resumed, before = _resumed(now, taken.flags), saved.flags()
    main_now = roles.key_variable(now)
    for role in ROLES:
        key, url = f"{role}_api_key_env", _endpoint(resumed, role)
        if key in taken.flags:
            variable = str(taken.flags[key])
            if not env.get(variable, "").strip():
                how = "set but empty" if variable in env else "not set"
                raise ConfigError(
                    f"the {role} endpoint {_shown(url)} of this run takes its key from "
                    f"{variable}, as when the run started, and {variable} is {how}",
                    f"export {variable}=... and resume again, or set {key} to the variable "
                    "that holds its key now",
                )
            continue
        at_saved = f"{role}_base_url" in taken.flags  # a role endpoint no setting names now
        if not at_saved or resumed[key]:
            continue  # an endpoint or a key variable the user names now: as they set it
        if url == str(resumed["base_url"]).rstrip("/") or is_local(url):
            continue  # base_url's own key; or a server of the user's own, sent none
        fix = f"set {key} to the variable that holds its key and resume again"
        if saved.api_key_env is None:
            raise ConfigError(
                f"this run was saved by an earlier version, which did not record the key the "
                f"{role} endpoint {_shown(url)} was sent: it is not sent the API key unasked",
                f"{fix} (AGENT_{key.upper()}=OPENAI_API_KEY for the API key)",
            )
        if before.get(key):  # its own variable, not taken: from a file not trusted now
            raise ConfigError(
                f"the {role} endpoint {_shown(url)} of this run was started with its key from "
                f"{before[key]}, which is not used now",
                fix,
            )
        if saved.api_key_env != main_now:
            started = saved.api_key_env or "no environment variable"
            comes = main_now or "no environment variable"
            raise ConfigError(
                f"the {role} endpoint {_shown(url)} of this run was sent the API key from "
                f"{started} when the run started, and the API key now comes from {comes}",
                fix,
            )


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
