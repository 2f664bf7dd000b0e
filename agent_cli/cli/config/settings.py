"""Settings: defaults < ~/.agentrc < <repo>/.agentrc < AGENT_* environment < flags.

Each layer is validated on its own, so an error names the file (or variable) it came
from. `Settings.sources` records where every value was taken from, for `agent doctor`.
The API key is read from the environment (`OPENAI_API_KEY` or `AGENT_API_KEY`) or from the
user's own `~/.agentrc`; a key in a repository's `.agentrc` would be committed and shared, so it
is refused. `AGENT_DENY_COMMANDS` is a comma-separated list of regular expressions (a pattern
that contains a comma goes in `deny_commands` in an `.agentrc` instead).
The memory server's token (`AGENT_MEMORY_TOKEN`) is refused in every `.agentrc`: it is a
team's shared credential, and files get copied, committed and pasted into bug reports.

A repository's `.agentrc` comes with a clone, so what it may set is decided key by key
(`repo_keys.RULES`): it may only tighten safety and, until the user trusts it (`agent
trust`), limits; what chooses where data goes, what runs or what is spent needs trust; it
never sets `home`. Each value ignored is named in one notice.
"""

from __future__ import annotations

import codecs
import difflib
import ipaddress
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal, TypedDict, get_args
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agent_cli.cli.config import repo_keys, trust
from agent_cli.core.errors import ConfigError, UsageError
from agent_cli.core.redact import mask_url_credentials, redact, redact_all, redact_argv
from agent_cli.llm import endpoints
from agent_cli.memory import thresholds
from agent_cli.memory.thresholds import Thresholds
from agent_cli.tools.hooks.config import HooksConfig, HookSpec
from agent_cli.tools.mcp.config import ServerConfig, check_server_name
from agent_cli.workspace.git.worktree import main_work_tree

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
ROLES = ("planner", "executor", "verifier")
ROLE_KEYS = tuple(f"{role}_{key}" for role in ROLES for key in ("model", "base_url"))
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CHROMA_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]")  # Chroma's rule
ENV_ONLY = ("memory_token",)  # refused in any .agentrc


class Prices(TypedDict):
    """Dollars per million tokens, as the model client takes them."""

    price_in: float
    price_out: float
    price_cached: float | None  # None: half the input price


PRICE_MAX = 1_000_000.0


class Settings(BaseSettings):
    """Every configurable value with its default."""

    # a float is a finite number: `inf` would overflow a timeout, and a state.json cannot save it
    model_config = SettingsConfigDict(
        extra="forbid", validate_default=True, case_sensitive=True, allow_inf_nan=False
    )

    model: str = DEFAULT_MODEL
    base_url: str = OPENAI_DEFAULT_URL
    api_key: SecretStr | None = None
    embedding_model: str | None = None
    max_steps: int = Field(200, ge=1)
    task_max_steps: int = Field(30, ge=1)
    budget_usd: float = Field(5.0, ge=0)
    # dollars per million tokens, at most a dollar a token: a price past any model's, whose
    # costs stay finite numbers (1e308 made a reply's cost infinite and stopped the run)
    price_input_per_mtok: float = Field(0.15, ge=0, le=PRICE_MAX)
    price_output_per_mtok: float = Field(0.60, ge=0, le=PRICE_MAX)
    price_cached_input_per_mtok: float | None = Field(None, ge=0, le=PRICE_MAX)  # None: half input
    memory_max_tokens: int = Field(8000, ge=200)
    reserved_output_tokens: int = Field(4096, ge=0)
    tool_output_max_tokens: int = Field(3000, ge=100)
    recall_cooldown_steps: int = Field(2, ge=0)
    command_timeout_s: float = Field(120.0, gt=0)
    # at most a day: an exchange is ended after 30 times it, a deadline the clock must hold
    # (1e300 stopped every model call with an OverflowError)
    request_timeout_s: float = Field(120.0, gt=0, le=86_400)
    max_retries: int = Field(4, ge=0, le=10)
    retry_backoff_s: float = Field(1.0, ge=0)
    approval: Literal["ask", "auto"] = "ask"
    sandbox: Literal["none", "bwrap"] = "none"
    deny_commands: list[str] = Field(default_factory=list)
    home: str | None = None
    context_window: int = Field(128_000, ge=1024)
    replan: Literal["after_task", "off"] = "after_task"
    max_replans: int = Field(3, ge=0)
    final_summary: bool = True
    memory_ttl_days: float = Field(90.0, ge=0)
    memory_digest_tokens: int = Field(1500, ge=0)
    # how close recalled memory must be; None: the embedder's default (memory/thresholds.py)
    memory_associate_k: int | None = Field(None, ge=1)
    memory_associate_min_score: float | None = Field(None, ge=-1, le=1)
    memory_episode_max_distance: float | None = Field(None, ge=0, le=2)
    memory_url: str | None = None
    memory_tenant: str | None = None
    memory_database: str | None = None
    memory_token: SecretStr | None = None
    hooks: HooksConfig = Field(default_factory=HooksConfig)  # [[hooks.pre_tool]] and the others
    # a model per role (README "Models per role"); None: `model`, `base_url`, the API key
    planner_model: str | None = None
    executor_model: str | None = None
    verifier_model: str | None = None
    planner_base_url: str | None = None
    executor_base_url: str | None = None
    verifier_base_url: str | None = None
    planner_api_key_env: str | None = None
    executor_api_key_env: str | None = None
    verifier_api_key_env: str | None = None
    worktree: Literal["off", "auto"] = "off"  # auto: a second run goes to a worktree
    mcp_servers: dict[str, ServerConfig] = Field(default_factory=dict)
    deny_tools: list[str] = Field(default_factory=list)  # globs over full tool names
    sources: dict[str, str] = Field(default_factory=dict, exclude=True)
    notices: list[str] = Field(default_factory=list, exclude=True)
    # the keys the *_api_key_env variables held when the settings were read, by role
    role_api_keys: dict[str, SecretStr] = Field(default_factory=dict, exclude=True)
    # the bearer tokens the mcp_servers' bearer_token_env_var variables held, by server
    mcp_tokens: dict[str, SecretStr] = Field(default_factory=dict, exclude=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only explicit values: the layers are merged by `load_settings`, not by pydantic."""
        return (init_settings,)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        """`true` or `false` only where a key is a switch: pydantic would read it as 1 or 0
        (`budget_usd = true`, a dollar)."""
        if isinstance(value, bool) and info.field_name is not None:
            kind = cls.model_fields[info.field_name].annotation
            if kind is not bool and bool not in get_args(kind):
                raise ValueError(f"expected {_kind_name(kind)}, not {str(value).lower()}")
        return value

    @field_validator("memory_url")
    @classmethod
    def _server_address(cls, url: str | None) -> str | None:
        """An http(s) address with a host, no path and no credentials; empty means the
        embedded store."""
        if not url or not url.strip():
            return None
        parts = urlsplit(url.strip())
        try:
            _ = parts.port  # reading it validates it
        except ValueError:
            raise ValueError("the port is not a number between 0 and 65535") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("expected a server address like http://chroma.internal:8000")
        if parts.path not in ("", "/") or parts.query:
            raise ValueError("give the server's address only, without a path")
        if parts.username or parts.password:  # shown and stored with the address; never sent
            raise ValueError("put a token in AGENT_MEMORY_TOKEN, not in the server's address")
        return url.strip().rstrip("/")

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: str | None) -> str | None:
        """An absolute path, or one from `~`; empty means unset. A relative one would name
        another directory from each directory a command runs in, inside the work tree from
        the repository's (where git sees the state and a run would commit it)."""
        if not home:
            return None
        try:
            path = Path(home).expanduser()
        except RuntimeError:  # `~someone/x` for a user this machine does not know
            raise ValueError(f"{home.split('/')[0]} is no user's home directory here") from None
        if not path.is_absolute():
            raise ValueError("expected an absolute path, or one starting with ~/")
        return home

    @field_validator("memory_tenant", "memory_database")
    @classmethod
    def _chroma_name(cls, name: str | None) -> str | None:
        """A tenant or database name the Chroma server accepts; empty means Chroma's default."""
        if not name:
            return None
        if not CHROMA_NAME.fullmatch(name):
            raise ValueError(
                "use 3 to 512 letters, digits, '.', '_' or '-', starting and ending "
                "with a letter or a digit"
            )
        return name

    @field_validator(*ROLE_KEYS)
    @classmethod
    def _role_value(cls, value: str | None) -> str | None:
        """Empty means the shared value (`model`, `base_url`, the API key)."""
        return value.strip() or None if value is not None else None

    @field_validator("base_url", *(f"{role}_base_url" for role in ROLES))
    @classmethod
    def _endpoint(cls, url: str | None, info: ValidationInfo) -> str | None:
        """An http(s) address with a host (after `_role_value` for a role's); an empty
        `base_url` is the default one. A role's key goes in the variable its `*_api_key_env`
        names, so that is what an address with credentials in it is told."""
        if url is None:
            return None
        url = url.strip()
        role = (info.field_name or "").removesuffix("_base_url")
        if role in ROLES and (urlsplit(url).username or urlsplit(url).password):
            raise ValueError(
                f"put the key in the variable {role}_api_key_env names, not in the "
                "endpoint's address"
            )
        return endpoints.endpoint(url) if url else OPENAI_DEFAULT_URL

    @field_validator("model")
    @classmethod
    def _model_name(cls, name: str) -> str:
        """A model's name; an empty one (AGENT_MODEL= set to nothing) is the default model,
        as an empty base_url is the default endpoint."""
        return name.strip() or DEFAULT_MODEL

    @field_validator("deny_commands")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        """Regular expressions the command policy can compile."""
        from agent_cli.workspace.shell.policy import pattern_problem

        for pattern in patterns:
            problem = pattern_problem(pattern)
            if problem:
                raise ValueError(problem)
        return patterns

    @field_validator("deny_tools")
    @classmethod
    def _mcp_globs(cls, patterns: list[str]) -> list[str]:
        """Globs over the MCP tools' full names: deny_tools gates the MCP servers' calls, so a
        pattern that matches a built-in tool (`run`, `*`) would not refuse it, and is refused."""
        if not patterns:
            return patterns
        import fnmatch

        from agent_cli.agent.attempt.toolbox import TOOL_NAMES

        for pattern in patterns:
            hit = next((n for n in TOOL_NAMES if fnmatch.fnmatchcase(n, pattern)), None)
            if hit:
                raise ValueError(
                    f"pattern {pattern!r} matches the built-in tool {hit}, which deny_tools does "
                    "not gate: it refuses MCP tools, named mcp__SERVER__TOOL (such as "
                    "'mcp__time__*'); refuse commands with deny_commands"
                )
        return patterns

    @field_validator("api_key", "memory_token", mode="before")
    @classmethod
    def _credential(cls, value: Any) -> Any:
        """A key as it can be sent in a header: the spaces and line ends around it (a file
        saved with CRLF, a paste) dropped, and one with any inside refused, where it was set;
        sent as it was, the request failed as if the server could not be reached."""
        if not isinstance(value, str):
            return value
        value = value.strip()
        problem = credential_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator(*(f"{role}_api_key_env" for role in ROLES))
    @classmethod
    def _variable_name(cls, name: str | None) -> str | None:
        """The name of an environment variable, never a key itself."""
        if name and not ENV_NAME.fullmatch(name):
            raise ValueError("expected the name of an environment variable, like PLANNER_API_KEY")
        return name

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        """Names that can head the tool names `mcp__<server>__<tool>`."""
        for name in servers:
            check_server_name(name)
        return servers

    def state_dir(self, repo: Path) -> Path:
        """Where run state lives: `home` if set, else `<repo>/.agent` (of the main work tree
        when `repo` is a linked one, such as a worktree run's: one repository, one state); a
        ConfigError when something other than a directory is there, or above it."""
        state = Path(self.home).expanduser() if self.home else main_work_tree(repo) / ".agent"
        try:
            self._check_state_dir(state)
        except OSError as e:  # a name too long, a folder above it that cannot be searched
            where = "home" if self.home else "the state directory"
            raise ConfigError(
                f"{where} {state} cannot be used: {e.strerror or e}",
                "set home to another directory",
            ) from None
        return state

    def _check_state_dir(self, state: Path) -> None:
        """A ConfigError when something other than a directory is at `state`, or above it."""
        if not self.home and state.is_symlink():
            refuse_tracked_link(state)
        if state.is_symlink() and not state.exists():  # nothing could be created there
            where = "home" if self.home else "the state directory"
            raise ConfigError(
                f"{where} {state} is a link to {os.readlink(state)}, which does not exist",
                "create the directory it names, or remove the link",
            )
        if state.exists() and not state.is_dir():
            where = "home" if self.home else "the state directory"
            raise ConfigError(
                f"{where} {state} is not a directory",
                "move that file aside" + ("" if self.home else ", or set home to a directory"),
            )
        if not state.exists():  # a file above it: nothing can be created there
            above = next(p for p in state.parents if p.exists())
            if not above.is_dir():
                where = "home" if self.home else "the state directory"
                raise ConfigError(
                    f"{where} {state} cannot be created: {above} is a file, not a directory",
                    f"move {above} aside, or set home to another directory",
                )

    def prices(self, base_url: str | None = None) -> Prices:
        """Dollars per million tokens at `base_url` (default: `base_url`'s): input, output,
        cached input (None: half the input).

        The default prices are an OpenAI model's. A server on this machine or the local network
        (llama.cpp, Ollama, vLLM) bills nothing, so there they count as 0 unless a price is set:
        a local run is not shown a cost it never had, nor stopped by a money budget."""
        if self._billed_nothing(base_url):
            return {"price_in": 0.0, "price_out": 0.0, "price_cached": 0.0}
        return {
            "price_in": self.price_input_per_mtok,
            "price_out": self.price_output_per_mtok,
            "price_cached": self.price_cached_input_per_mtok,
        }

    def _billed_nothing(self, base_url: str | None = None) -> bool:
        """A server on the local network, and no price set (see `prices`)."""
        return _on_local_network(base_url or self.base_url) and all(
            self.sources.get(k, "default") == "default" for k in PRICE_KEYS
        )

    def recall_thresholds(self) -> Thresholds:
        """The associate rule and the episodes' floor: the offline embedder's measured values,
        or the seed's with an endpoint's `embedding_model`, each one set here kept."""
        return thresholds.resolve(
            offline=not self.embedding_model,
            associate_k=self.memory_associate_k,
            associate_min_score=self.memory_associate_min_score,
            episode_max_distance=self.memory_episode_max_distance,
        )

    def key(self) -> str | None:
        """The API key in clear, or None when none is set."""
        return self.api_key.get_secret_value() if self.api_key else None

    def memory_token_value(self) -> str | None:
        """The memory server's token in clear, or None when none is set."""
        return self.memory_token.get_secret_value() if self.memory_token else None

    def secrets(self) -> tuple[str, ...]:
        """The configured secrets, to redact from everything stored or shown and to keep out
        of every child's environment (a variable holding one is removed): the API keys, the
        memory token and the MCP servers' bearer tokens, whatever their variables are named,
        and the credentials their tables hold (`ServerConfig.secrets`: an `env` value named
        as one, `--api-key VALUE` in a command line, `?api_key=VALUE` in a url)."""
        roles = (k.get_secret_value() for k in self.role_api_keys.values())
        bearers = (t.get_secret_value() for t in self.mcp_tokens.values())
        envs = (v for server in self.mcp_servers.values() for v in server.secrets())
        found = (self.key(), self.memory_token_value(), *roles, *bearers, *envs)
        return tuple(dict.fromkeys(s for s in found if s))

    def redacted(self) -> dict[str, Any]:
        """Every value, with the API key and the memory token masked, for display."""
        out = self.model_dump(exclude={"sources", "notices"})
        out["api_key"] = _mask(self.key() or "")
        out["memory_token"] = _mask(self.memory_token_value() or "")
        out["hooks"] = redact(self.hooks.summary(), self.secrets()) or None  # tokens in argv
        servers = out.get("mcp_servers", {})
        out["mcp_servers"] = {name: _shown_server(s, self.secrets()) for name, s in servers.items()}
        return out

    def shown(self) -> tuple[dict[str, Any], dict[str, str]]:
        """`redacted()` with the prices a run is billed at, and where each value came from."""
        values, sources = self.redacted(), dict(self.sources)
        if self._billed_nothing():
            for key in PRICE_KEYS:
                values[key], sources[key] = 0.0, "default; a local server bills nothing"
        t, embedder = self.recall_thresholds(), self.embedding_model or "the offline embedder"
        resolved = (t.associate_k, t.associate_min_score, t.episode_max_distance)
        for key, value in zip(THRESHOLD_KEYS, resolved, strict=True):
            if values[key] is None:
                values[key], sources[key] = value, f"default for {embedder}"
        return values, sources


def refuse_tracked_link(state: Path) -> None:
    """ConfigError when the state directory `state` is a symbolic link that its repository
    tracks: a clone would choose where run state goes (outside the repository, or into a
    submodule whose run records came with it); `home` is the way to put it elsewhere."""
    from agent_cli.workspace.git.repository import tracks

    if tracks(state.parent, state.name):
        raise ConfigError(
            f"the state directory {state} is a symbolic link (to {os.readlink(state)}) that "
            "the repository tracks: where run state goes would be the repository's choice, "
            "not yours; nothing was written",
            f"remove it from the repository with `git rm {state.name}` and commit, or set "
            "home to keep run state elsewhere",
        )


def credential_problem(value: str) -> str | None:
    """What makes `value` no key a request header can carry (said without quoting it), or
    None. A header holds printable ASCII: a space inside is sent as it is (a local server's
    `--api-key` may have one); a line break, a tab or another control character, or a
    character outside ASCII, cannot be sent."""
    if any(not (c.isascii() and c.isprintable()) for c in value):
        return (
            "it holds a line break, a tab or a character no key has "
            "(copy the key again, on its own)"
        )
    return None


PRICE_KEYS = ("price_input_per_mtok", "price_output_per_mtok", "price_cached_input_per_mtok")
THRESHOLD_KEYS = ("memory_associate_k", "memory_associate_min_score", "memory_episode_max_distance")


def _on_local_network(url: str) -> bool:
    """Whether `url` names this machine or a private address (a name is looked up nowhere)."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


# A secret this long shows its first 3 and last 4 characters: under a third of it, and 17 or
# more stay hidden. A shorter one (a password, a short token) shows none: 7 of 11 would be most.
MASK_SHOWS_FROM = 24


def _mask(secret: str) -> str | None:
    """Enough of a long secret to tell which one it is (`sk-…wxyz`), never enough to use it;
    `set` for a shorter one, None for none."""
    if len(secret) >= MASK_SHOWS_FROM:
        return f"{secret[:3]}…{secret[-4:]}"
    return "set" if secret else None


INTERNAL = ("sources", "notices", "role_api_keys", "mcp_tokens")  # read, never set
FIELDS = [f for f in Settings.model_fields if f not in INTERNAL]
ENV_ALIASES = {"OPENAI_API_KEY": "api_key", "OPENAI_BASE_URL": "base_url"}


MAX_RC_BYTES = 1024 * 1024


def _read_settings_file(path: Path) -> str:
    """A settings file's text: a regular file (a link to one is followed), opened without
    blocking and at most MAX_RC_BYTES, else ConfigError. A leading UTF-8 byte order mark (what
    Windows editors write) is dropped: tomllib would refuse the file at line 1, column 1, a
    cause nothing in the error names."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ConfigError(f"{path} is not a regular file", "remove it or make it a file")
        data = f.read(MAX_RC_BYTES + 1)
    if len(data) > MAX_RC_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_RC_BYTES} bytes", "fix the file")
    try:
        return data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start})", "fix the file") from None


def _kind_name(kind: Any) -> str:
    """`a number` for a numeric key, `text` for a string, `a value` for any other."""
    kinds = set(get_args(kind)) or {kind}
    return "a number" if kinds & {int, float} else "text" if str in kinds else "a value"


def read_toml(path: Path) -> dict[str, Any]:
    """A settings file as TOML (bounded, a regular file, UTF-8), or a ConfigError naming it."""
    return read_rc(path)[0]


def read_rc(path: Path) -> tuple[dict[str, Any], bytes]:
    """read_toml(), and the bytes it was read from (what trust is judged on)."""
    try:
        text = _read_settings_file(path)
        return tomllib.loads(text), text.encode("utf-8")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}", "fix the file or move it aside") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise ConfigError(
            f"{path}: not valid TOML: its values nest too deeply", "fix the file or move it aside"
        ) from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}") from None


def unknown_key_hint(key: str) -> str:
    """`did you mean `model`?` for a misspelt key (`command` for one in an `[mcp_servers.X]`
    table), else where the keys are listed."""
    parts = key.split(".")
    fields, word = FIELDS, key.lower()
    if len(parts) == 3 and parts[0] == "mcp_servers":
        fields, word = list(ServerConfig.model_fields), parts[-1].lower()
    elif len(parts) in (2, 4) and parts[0] == "hooks":  # [hooks] pre_tol, [[hooks.x]] comand
        model = HooksConfig if len(parts) == 2 else HookSpec
        fields, word = list(model.model_fields), parts[-1].lower()
    close = difflib.get_close_matches(word, fields, n=1, cutoff=0.6)
    listed = "`agent doctor` lists every key with its value"
    return f"did you mean `{close[0]}`? {listed}" if close else listed


def _check(layer: dict[str, Any], origin: str) -> None:
    """Validate one layer alone, so the error names where the bad value came from."""
    try:
        Settings(**layer)
    except ValidationError as e:
        errors = e.errors()  # an unknown key first: it explains the others (a misspelt one)
        err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
        key = ".".join(str(p) for p in err["loc"]) or "?"
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"{origin}: unknown key '{key}'", unknown_key_hint(key)) from None
        got = without_credentials(err.get("input"))
        if tuple(err["loc"])[:1] in (("api_key",), ("memory_token",)):
            got = "***"  # a key of the wrong type (a number, a table) is still the key
        if tuple(err["loc"])[:1] == ("mcp_servers",) and tuple(err["loc"])[2:3] == ("env",):
            got = _masked_env(err.get("input")) if len(err["loc"]) == 3 else "***"
        what = f"--{key.replace('_', '-')}" if origin == "flag" else f"{origin}: key '{key}'"
        msg = str(err["msg"]).removeprefix("Value error, ")  # a validator's own words
        wrong = UsageError if origin == "flag" else ConfigError  # a flag is the command line
        raise wrong(f"{what}: {msg[:1].lower()}{msg[1:]} (got {got!r})") from None


def without_credentials(value: Any) -> Any:
    """A refused value as an error line may quote it (a whole `[mcp_servers.X]` table): an
    address's `user:password@` and query values, key shapes, an `env` table's values, and
    what a table's command line names as a credential (`args = ["--api-key", "VALUE"]`)
    masked, at any depth."""
    if isinstance(value, str):
        return redact(mask_url_credentials(value))
    if isinstance(value, (list, tuple)):
        return [without_credentials(v) for v in value]
    if isinstance(value, dict):
        out = {
            k: _masked_env(v) if k == "env" else without_credentials(v) for k, v in value.items()
        }
        args = out.get("args")
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            out["args"] = redact_argv([str(out.get("command")), *args])[1:]
        return out
    return value


def _masked_env(env: Any) -> Any:
    """An `env` table with each value masked: the tokens a server needs live there."""
    if not isinstance(env, dict):
        return "***"
    return {name: _mask(str(value)) for name, value in env.items()}


def _shown_server(server: dict[str, Any], secrets: tuple[str, ...]) -> dict[str, Any]:
    """A `[mcp_servers.X]` table as doctor shows it: its `env` values, the credentials in its
    `url` and the secrets and key shapes in its command line masked."""
    shown = without_credentials(server)
    return {k: redact_all(v, secrets) if k != "env" else v for k, v in shown.items()}


def _refuse_env_only(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` unless it holds a key that may only come from the environment."""
    for key in ENV_ONLY:
        if key in data:
            raise ConfigError(
                f"{path}: key '{key}' is not allowed in an .agentrc",
                f"a token in a file gets copied and shared; set AGENT_{key.upper()} "
                "in the environment instead",
            )
    return data


def _env_layer(env: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    layers = []
    for var, field in ENV_ALIASES.items():
        if env.get(var, "").strip():  # only spaces or a line end: unset, as an empty one is
            layers.append((f"env {var}", {field: env[var]}))
    for field in FIELDS:
        var = f"AGENT_{field.upper()}"
        if var in env:
            raw: Any = env[var]
            if field in ("deny_commands", "deny_tools"):
                raw = [c.strip() for c in raw.split(",") if c.strip()]
            layers.append((f"env {var}", {field: raw}))
    return layers


def _user_file(named: str) -> tuple[Path | None, str]:
    """The user's settings file (`AGENT_RC`, else ~/.agentrc; None for AGENT_RC=/dev/null,
    which means none) and a notice when AGENT_RC names a file that is not there: a mistyped
    path would otherwise leave every key at its default without a word."""
    if not named:
        return Path.home() / ".agentrc", ""
    if named == os.devnull:
        return None, ""
    try:  # `~/x` quoted where no shell expands it (a systemd unit, a .env file), as `home`
        path = Path(named).expanduser()
    except RuntimeError:  # `~someone/x` for a user this machine does not know
        path = Path(named)
    if os.path.lexists(path):
        return path, ""
    shown = named if str(path) == named else f"{named} ({path})"
    return path, (
        f"AGENT_RC names {shown}, which does not exist: no user settings were read "
        f"(AGENT_RC={os.devnull} reads none without this notice)"
    )


def load_settings(
    repo: Path | None = None,
    flags: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    user_rc: Path | None = None,
) -> Settings:
    """Merge every layer in order of precedence and validate the result."""
    env = dict(os.environ) if env is None else env
    notices: list[str] = []
    if user_rc is None:
        user_rc, notice = _user_file(env.get("AGENT_RC", ""))
        notices += [notice] if notice else []
    layers: list[tuple[str, dict[str, Any]]] = []
    # a path that is there but no file (a directory, a FIFO, a broken link) is said, not skipped
    if user_rc is not None and os.path.lexists(user_rc):
        layers.append((str(user_rc), _refuse_env_only(user_rc, read_toml(user_rc))))
        _check(layers[-1][1], str(user_rc))  # before the repository's file is judged by it
    added: dict[str, list[str]] = {}  # the repository's deny lists, kept whatever layer follows
    if repo is not None and os.path.lexists(repo / ".agentrc"):
        rc = repo / ".agentrc"
        data, content = read_rc(rc)
        data = _refuse_env_only(rc, data)
        if "api_key" in data:
            raise ConfigError(
                f"{rc}: key 'api_key' is not allowed in a repository's .agentrc",
                "a key there gets committed and shared; set OPENAI_API_KEY instead",
            )
        _check(data, str(rc))
        lower, parsed = _merge(layers), Settings(**data)
        data, notice = repo_keys.restrict(data, parsed, lower, trust.status(repo, env, content), rc)
        notices += [notice] if notice else []
        layers.append((str(rc), data))
        added = {k: getattr(parsed, k) for k in repo_keys.ADDED if k in data}
    layers += _env_layer(env)
    notices += _hidden_key(layers, env)
    layers.append(("flag", {k: v for k, v in (flags or {}).items() if v is not None}))
    notices += _empty_endpoint(layers)
    merged: dict[str, Any] = {}
    sources = dict.fromkeys(FIELDS, "default")
    for origin, layer in layers:
        _check(layer, origin)
        notices += _replaced_servers(merged.get("mcp_servers", {}), layer, origin)
        servers = {**merged.get("mcp_servers", {}), **layer.get("mcp_servers", {})}
        merged.update(layer)
        if servers:  # a repository's servers join the user's, by name
            merged["mcp_servers"] = servers
        sources.update(dict.fromkeys(layer, origin))
    for key, theirs in added.items():  # added to yours, never replaced by AGENT_DENY_* or a flag
        merged[key] = repo_keys.added(merged.get(key) or [], theirs)
    names = {role: merged.get(f"{role}_api_key_env") for role in ROLES}
    role_keys = {}
    for role, name in names.items():
        value = env.get(name or "", "").strip()
        problem = credential_problem(value)
        if problem:
            raise ConfigError(f"env {name} ({role}_api_key_env names it): {problem}")
        if value:
            role_keys[role] = SecretStr(value)
    settings = Settings(**merged, sources=sources, notices=notices, role_api_keys=role_keys)
    settings.mcp_tokens = _bearer_tokens(settings.mcp_servers, env)
    return settings


def _hidden_key(layers: list[tuple[str, dict[str, Any]]], env: dict[str, str]) -> list[str]:
    """A notice when an empty AGENT_API_KEY (a CI secret that is not defined, an `export
    AGENT_API_KEY=` meant to unset it) hides a key set below it: it is taken as it says, no key,
    so the run goes without one, and the error that follows would ask for the OPENAI_API_KEY
    that is already there. Only spaces or a line end (a secret file holding just `\n`) is
    empty too: they are dropped from around a key."""
    if env.get("AGENT_API_KEY", "unset").strip() != "":
        return []
    below = [
        origin
        for origin, layer in layers
        if str(layer.get("api_key") or "").strip() and origin != "flag"
    ]
    if not below:
        return []
    return [
        f"env AGENT_API_KEY is set but empty, so no API key is used: it takes the place of the "
        f"key from {below[-1]} (unset AGENT_API_KEY to use that one)"
    ]


def _empty_endpoint(layers: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """An empty `base_url` (or a role's) from the environment or a flag (`--base-url
    "$LOCAL_URL"` with the variable unset, `AGENT_BASE_URL=` meant to unset it) is dropped
    where a file sets one, with a notice: taken as it says, it would be the default endpoint,
    api.openai.com (for a role: the run's base_url), and send the repository's code there in
    place of the server the file names."""
    notices: list[str] = []
    for key in ("base_url", *(f"{role}_base_url" for role in ROLES)):
        for at, (origin, layer) in enumerate(layers):
            if origin != "flag" and not origin.startswith("env "):
                continue
            value = layer.get(key)
            if not isinstance(value, str) or value.strip():
                continue
            below = [o for o, lower in layers[:at] if str(lower.get(key) or "").strip()]
            if below:
                del layer[key]
                name = "--" + key.replace("_", "-") if origin == "flag" else origin
                notices.append(
                    f"{name} is empty, so it is ignored: the {key} of {below[-1]} is used"
                )
    return notices


def _replaced_servers(earlier: dict[str, Any], layer: dict[str, Any], origin: str) -> list[str]:
    """A notice naming the servers of `layer` that take the place of an earlier layer's server
    of the same name with another table (a trusted repository's `[mcp_servers.docs]` is then
    the run's `docs`, not yours), or none."""
    ours = layer.get("mcp_servers")
    if not isinstance(ours, dict) or not isinstance(earlier, dict):
        return []
    replaced = sorted(n for n, table in ours.items() if n in earlier and earlier[n] != table)
    if not replaced:
        return []
    tables = ", ".join(f"[mcp_servers.{name}]" for name in replaced)
    verb = "replaces the server" if len(replaced) == 1 else "replace the servers"
    return [
        f"{origin}: {tables} {verb} of that name in your own settings "
        "(its whole table is used, none of yours)"
    ]


def _bearer_tokens(servers: dict[str, ServerConfig], env: dict[str, str]) -> dict[str, SecretStr]:
    """Each HTTP server's bearer token as its variable holds it (a disabled server's too),
    without the spaces and line ends around it; one with any inside is a ConfigError."""
    tokens = {}
    for name, server in servers.items():
        var = server.bearer_token_env_var or ""
        token = env.get(var, "").strip()
        problem = credential_problem(token)
        if problem:
            raise ConfigError(f"env {var} (mcp_servers.{name}.bearer_token_env_var): {problem}")
        if token:
            tokens[name] = SecretStr(token)
    return tokens


def _merge(layers: list[tuple[str, dict[str, Any]]]) -> Settings:
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged.update(layer)
    return Settings(**merged)
