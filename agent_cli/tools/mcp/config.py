"""What a `[mcp_servers.NAME]` table may say: a stdio command or a streamable-HTTP address."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, model_validator

from agent_cli.core.redact import argv_secrets, names_a_secret, url_secrets

# Tool names go to the model as `mcp__<server>__<tool>`, within a function name's 64 characters.
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ServerConfig(BaseModel):
    """One MCP server: `command` (stdio) or `url` (streamable HTTP), and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    bearer_token_env_var: str | None = None
    # strict: `true` is no number of seconds (an int is one)
    startup_timeout_s: StrictFloat = Field(10.0, gt=0, le=600)
    tool_timeout_s: StrictFloat = Field(60.0, gt=0, le=3600)
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] = Field(default_factory=list)
    enabled: bool = True

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (a stdio server) or url (streamable HTTP)")
        if self.url:
            if self.args or self.env:
                raise ValueError("args and env are for a stdio server (command), not a url")
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("url must be an http(s) address like http://127.0.0.1:8931/mcp")
        elif self.bearer_token_env_var:
            raise ValueError("bearer_token_env_var is for a url server, not a command")
        if self.bearer_token_env_var and not ENV_NAME.fullmatch(self.bearer_token_env_var):
            raise ValueError("bearer_token_env_var must name an environment variable")
        bad = [k for k in self.env if not ENV_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"env has a name that is no environment variable: {bad[0]!r}")
        if any("\0" in word for word in [self.command or "", *self.args, *self.env.values()]):
            raise ValueError("command, args and env values cannot hold a NUL character")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """How the agent reaches the server."""
        return "stdio" if self.command else "http"

    def secrets(self) -> list[str]:
        """The credentials the server's table holds, to redact from what the server sends back
        (and from everything stored or shown), as a bearer token is: the `env` values whose
        names say they hold one (`GITHUB_TOKEN`, `NOTION_API_KEY`, `DB_PASSWORD`), those its
        command line names (`--api-key VALUE`, `--token=VALUE`), and those its `url` carries
        (`user:password@`, `?api_key=VALUE`)."""
        found = [value for name, value in self.env.items() if names_a_secret(name)]
        if self.command:
            found += argv_secrets([self.command, *self.args])
        if self.url:
            found += url_secrets(self.url)
        return found

    def offers(self, tool: str) -> bool:
        """Whether the server's tool `tool` is offered (the allow list, then the deny list)."""
        if self.enabled_tools is not None and tool not in self.enabled_tools:
            return False
        return tool not in self.disabled_tools


def check_server_name(name: str) -> str:
    """`name` when it can head tool names; ValueError saying what a name may hold otherwise."""
    if not SERVER_NAME.fullmatch(name) or "__" in name:
        raise ValueError(f"server name {name!r}: use 1 to 32 letters, digits, '_' or '-' (no '__')")
    return name
