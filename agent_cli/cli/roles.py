"""Which endpoint, model and key each role of a run uses, from the settings; one client each.

A role's `<role>_model` and `<role>_base_url` default to `model` and `base_url`. Its key is
the variable named by `<role>_api_key_env` when set (and then it must be set); else the API
key when the role is at `base_url` or at another hosted endpoint, and none at a server on this
machine or the local network (which needs none, and is not sent the hosted API's key). Roles
with the same endpoint, model and key share one client, so what it learns about its server
(context window, forcing form, streaming) holds for each of them.

A run saves, with each role's endpoint and model, the variable its key came from (never the
key): the role's own `<role>_api_key_env`, or for a role at another hosted endpoint sent the
API key, the API key's variable (`OPENAI_API_KEY`). A resume that sends the role to that
endpoint again reads its key from that variable (`cli/config/carried.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agent_cli.agent.run.roles import ROLES, Role, RoleModels
from agent_cli.cli.config.settings import Prices, Settings
from agent_cli.core.errors import ConfigError
from agent_cli.core.protocols import ChatModel
from agent_cli.llm.server.locality import is_local

if TYPE_CHECKING:
    from agent_cli.llm.openai.errors import SetBy

ROLE_SETTINGS = tuple(
    f"{role}_{key}" for role in ROLES for key in ("model", "base_url", "api_key_env")
)


@dataclass(frozen=True)
class Endpoint:
    """Where one role's requests go: the server, the model, the key and the prices."""

    base_url: str
    model: str
    key_env: str | None  # the variable the key is read from (None: the API key, or none)
    prices: Prices = field(compare=False)
    model_setting: str = field(default="--model", compare=False)  # what chose `model`
    url_setting: str = field(default="--base-url", compare=False)  # what chose `base_url`
    used_by: tuple[Role, ...] = field(default=(), compare=False)  # set by `distinct`
    keyless: bool = field(default=False, compare=False)  # a local server base_url does not name

    @property
    def named_for(self) -> str:
        """The roles an error names this endpoint by ("executor", "planner and verifier"),
        or "" when every role uses it (nothing to tell apart)."""
        return "" if len(self.used_by) in (0, len(ROLES)) else " and ".join(self.used_by)

    def set_by(self) -> SetBy:
        """What an error about this endpoint names as its fix: the role's own model setting,
        key variable and address setting, and the roles it is for; for an endpoint sent no
        key, the settings that would send it one (`verifier_api_key_env`)."""
        from agent_cli.llm.openai.errors import SetBy

        roles = self.used_by or ("<role>",)
        unsent = " or ".join(f"{role}_api_key_env" for role in roles) if self.keyless else ""
        return SetBy(
            self.model_setting,
            self.key_env or "OPENAI_API_KEY",
            self.named_for,
            self.url_setting,
            unsent,
        )

    @property
    def ident(self) -> tuple[str, str, str]:
        """Equal for the roles that share one client."""
        return (self.base_url.rstrip("/"), self.model, self.key_env or "")


def endpoint(settings: Settings, role: Role) -> Endpoint:
    """The endpoint `role` talks to."""
    own_url = getattr(settings, f"{role}_base_url")
    base_url = own_url or settings.base_url
    own_model = getattr(settings, f"{role}_model")
    key_env = getattr(settings, f"{role}_api_key_env")
    return Endpoint(
        base_url=base_url,
        model=own_model or settings.model,
        key_env=key_env,
        prices=settings.prices(base_url),
        model_setting=f"{role}_model" if own_model else named(settings, "model", "--model"),
        url_setting=f"{role}_base_url" if own_url else named(settings, "base_url", "--base-url"),
        keyless=not key_env
        and base_url.rstrip("/") != settings.base_url.rstrip("/")
        and is_local(base_url),
    )


def named(settings: Settings, key: str, flag: str) -> str:
    """How a fix names the setting that gave `key` its value: the flag when one gave it (or
    nothing did: the flag is how to give it), the environment variable, or the key in its
    file (`base_url in /home/me/.agentrc`)."""
    source = settings.sources.get(key, "default")
    if source.startswith("env "):
        return source.removeprefix("env ")
    return flag if source in ("flag", "default") else f"{key} in {source}"


def api_key(settings: Settings, role: Role, ep: Endpoint) -> str | None:
    """The key sent to `ep` for `role` (the module docstring says which)."""
    if ep.key_env:
        found = settings.role_api_keys.get(role)
        if found is None:
            # set, yet no key: empty, or only the spaces and line ends dropped from around one
            empty = ep.key_env in os.environ
            raise ConfigError(
                f"{role}_api_key_env names {ep.key_env}, which is "
                + ("set but empty" if empty else "not set in the environment"),
                f"export {ep.key_env}=..., or unset {role}_api_key_env to use the API key",
            )
        return found.get_secret_value()
    return None if ep.keyless else settings.key()


def distinct(settings: Settings) -> list[tuple[Endpoint, list[Role]]]:
    """Each endpoint once, with the roles that use it, in the order of the roles."""
    found: dict[tuple[str, str, str], tuple[Endpoint, list[Role]]] = {}
    for role in ROLES:
        ep = endpoint(settings, role)
        found.setdefault(ep.ident, (ep, []))[1].append(role)
    return [(replace(ep, used_by=tuple(names)), names) for ep, names in found.values()]


def check_keys(settings: Settings) -> None:
    """Raise what the first request of a role would: a key missing for its endpoint (said
    once, before anything is started or spent)."""
    from agent_cli.llm.endpoints import missing_key

    for ep, names in distinct(settings):
        error = missing_key(ep.base_url, api_key(settings, names[0], ep))
        if error is not None:
            raise error


def check_reachable(settings: Settings, timeout_s: float = 30.0) -> None:
    """Raise what the first request of a role would when its endpoint cannot be reached at
    all (refused, no such host, silent for `timeout_s`): once for each endpoint, before
    anything is started. An endpoint that answers, even with an error, passes."""
    from agent_cli.llm.openai.chat import OpenAIChat

    for ep, names in distinct(settings):
        client = OpenAIChat(
            model=ep.model,
            base_url=ep.base_url,
            api_key=api_key(settings, names[0], ep),
            timeout_s=min(settings.request_timeout_s, timeout_s),
            max_retries=0,
            set_by=ep.set_by(),
        )
        client.reach(min(settings.request_timeout_s, timeout_s))


def set_apart(settings: Settings) -> bool:
    """Whether the roles do not all use one endpoint."""
    return len(distinct(settings)) > 1


def build(
    settings: Settings,
    make: Callable[[Endpoint, str | None], ChatModel],
    used: tuple[Role, ...] = ROLES,
) -> RoleModels:
    """Each role's model: `make(endpoint, key)` once per distinct endpoint. Only the `used`
    roles' endpoints are made (a plan-only run asks the planner alone, so an executor's key
    that is not set stops nothing); another role is given the first used role's model."""
    made: dict[tuple[str, str, str], ChatModel] = {}
    for ep, roles in distinct(settings):
        if any(role in used for role in roles):
            made[ep.ident] = make(ep, api_key(settings, roles[0], ep))
    first = made[endpoint(settings, used[0]).ident]
    planner, executor, verifier = (made.get(endpoint(settings, r).ident, first) for r in ROLES)
    return RoleModels(planner=planner, executor=executor, verifier=verifier)


def narrowest_window(models: RoleModels) -> int | None:
    """The smallest context window the role models know (None: none knows one).

    Working memory, tool output and every request are fitted to it, so each fits every role."""
    return min((w for m in models.distinct() if (w := m.context_window)), default=None)


def whose_window(models: RoleModels, window: int) -> str:
    """Whose context `window` is, for a notice: `the model's` when every role's model has it,
    else `the planner's` (`the executor's and verifier's`), the smallest of the roles'."""
    narrow = [role for role in ROLES if models.of(role).context_window == window]
    if len(narrow) == len(ROLES):
        return "the model's"
    return f"the {' and '.join(narrow)}'s"


def started_with(settings: Settings) -> dict[str, Any]:
    """The role endpoints, models and key variables set apart from `model`, `base_url` and the
    API key, to save with a run; and the variable the API key came from (`api_key_env`).

    A role at another hosted endpoint than `base_url`, sent the API key, is saved with the API
    key's variable as its own: a resume that sends it there again sends it that variable's key,
    never one the endpoint was not given (another variable's, or a file's)."""
    saved = {
        key: getattr(settings, key)
        for key in ROLE_SETTINGS
        if getattr(settings, key) is not None and settings.sources.get(key, "default") != "default"
    }
    main = key_variable(settings)
    for role in ROLES:
        ep = endpoint(settings, role)
        apart = ep.base_url.rstrip("/") != settings.base_url.rstrip("/")
        saved.pop(f"{role}_api_key_env", None)  # an empty one (the API key) is not saved
        if ep.key_env:
            saved[f"{role}_api_key_env"] = ep.key_env
        elif main and apart and not ep.keyless:
            saved[f"{role}_api_key_env"] = main
    return {**saved, "api_key_env": main}


def key_variable(settings: Settings) -> str:
    """The environment variable the API key was read from (`OPENAI_API_KEY`, `AGENT_API_KEY`),
    or "" when it came from none: a settings file, or no key at all."""
    source = settings.sources.get("api_key", "default")
    return source.removeprefix("env ") if source.startswith("env ") and settings.key() else ""


RUN_FLAGS = ("model", "base_url", "max_steps", "budget_usd")  # the saved values `agent run` has


def shown_name(key: str) -> str:
    """How a saved value is named in a notice: `--model` for one `agent run` has a flag for,
    else its settings key (`task_max_steps`, a role's)."""
    return f"--{key.replace('_', '-')}" if key in RUN_FLAGS else key
