"""The tools of the configured MCP servers for one run, behind a synchronous facade.

Servers are started (or connected) together at the start, their tools listed once and kept
for the whole run, so the tool list at the head of every request stays the same. A server
that fails is said once; its tools then answer with an error for the rest of the run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cli.core import tokens
from agent_cli.core.redact import redact
from agent_cli.tools.held import HeldFiles, Started
from agent_cli.tools.mcp import schema
from agent_cli.tools.mcp.config import ServerConfig
from agent_cli.tools.mcp.connection import STOP_S, Connection
from agent_cli.tools.mcp.loop import BackgroundLoop
from agent_cli.workspace.shell import reaper

Notice = Callable[[str], None]
LEFT_OUT_SAID = 5  # tools left out said one by one, per server; the rest in one notice


@dataclass(frozen=True)
class Reply:
    """A provided tool's answer (`core.protocols.ToolReply`)."""

    text: str
    ok: bool
    summary: str


@dataclass
class ServerStatus:
    """One server as `agent doctor` and `agent mcp list` show it."""

    name: str
    transport: str
    status: str  # "ready", "disabled", or why it is not
    tools: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # tools that cannot be offered
    # names in enabled_tools or disabled_tools that the server does not list (a typo, a rename)
    unlisted: list[str] = field(default_factory=list)


@dataclass
class _Server:
    name: str
    connection: Connection
    status: ServerStatus
    tools: dict[str, str] = field(default_factory=dict)  # full name -> the server's tool name
    listed: list[str] | None = None  # every tool it listed, by its own names, once started
    said_broken: bool = False


class McpTools:
    """Every configured server's tools: `start` once, then `specs` and `call` (ToolProvider)."""

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        *,
        env: dict[str, str],
        cwd: Path,
        environ: Mapping[str, str],
        wrap: Callable[[list[str]], list[str]] | None = None,
        notice: Notice | None = None,
        secrets: tuple[str, ...] = (),
        started: Started | None = None,
    ) -> None:
        self.configs = dict(servers)
        self.started_files = started  # a resumed run: the repository files as the run began
        self.env, self.cwd, self.environ, self.wrap = env, cwd, environ, wrap
        self.notice = notice or (lambda text: None)
        self.secrets = secrets
        self.loop: BackgroundLoop | None = None
        self.servers: list[_Server] = []
        self.by_tool: dict[str, _Server] = {}
        self._specs: list[dict[str, Any]] = []
        self.started = False
        self._spared: set[int] = set()  # the agent's processes from before the servers

    def start(self) -> list[ServerStatus]:
        """Start or connect every enabled server and list its tools; what failed is a notice."""
        if self.started:
            return self.statuses()
        self.started = True
        pending: list[_Server] = []
        for name, config in sorted(self.configs.items()):
            status = ServerStatus(name, config.transport, "disabled")
            if not config.enabled:
                self.servers.append(_Server(name, self._connection(name, config), status))
                continue
            changed = self._changed(config)
            if changed:
                status.status = (
                    f"not started: {', '.join(changed)} changed since the run began "
                    "(the model may have changed it; a resumed run starts only what the run "
                    "began with)"
                )
                self.notice(f"MCP server {name}: {status.status}; its tools are left out")
                self.servers.append(_Server(name, self._connection(name, config), status))
                continue
            token = None
            if config.bearer_token_env_var:
                # as the settings read it: spaces and line ends around it dropped, none left
                # is no token (sent, `Bearer ` or a header with a line break)
                token = self.environ.get(config.bearer_token_env_var, "").strip() or None
                if token is None:
                    status.status = f"not connected: {config.bearer_token_env_var} is not set"
                    self.notice(f"MCP server {name}: {status.status}; its tools are left out")
                    self.servers.append(_Server(name, self._connection(name, config), status))
                    continue
                self.secrets = (*self.secrets, token)
            server = _Server(name, self._connection(name, config, token), status)
            self.servers.append(server)
            pending.append(server)
        if pending:
            self._spared = reaper.adopt_orphans()  # what a server detaches stays findable
            self.loop = BackgroundLoop()
            timeout = max(s.connection.config.startup_timeout_s for s in pending) + 2 * STOP_S
            try:
                results = self.loop.run(self._start_all(pending), timeout)
            except TimeoutError:  # each start is bounded; this is the last resort
                results = [RuntimeError("did not start in time")] * len(pending)
            for server, found in zip(pending, results, strict=True):
                self._adopt(server, found)
        return self.statuses()

    def _changed(self, config: ServerConfig) -> list[str]:
        """The repository files a stdio server's command runs that a resumed run's model
        changed since the run began (none for a new run: the files are the user's); when
        none, the bytecode of the modules it runs is cleared (HeldFiles.clear_bytecode)."""
        if not config.command:
            return []
        argv = [config.command, *config.args]
        held = HeldFiles(self.cwd, [argv], self.started_files)
        changed = held.changed(argv) if self.started_files is not None else []
        if not changed:
            held.clear_bytecode(argv)
        return changed

    def _connection(self, name: str, config: ServerConfig, token: str | None = None) -> Connection:
        return Connection(name, config, env=self.env, cwd=self.cwd, wrap=self.wrap, token=token)

    async def _start_all(self, servers: list[_Server]) -> list[Any]:
        return await asyncio.gather(
            *(s.connection.start() for s in servers), return_exceptions=True
        )

    def _adopt(self, server: _Server, found: Any) -> None:
        """Keep a started server's offerable tools, or say why it has none."""
        if isinstance(found, BaseException):
            reason = self._clean(str(found) or type(found).__name__)
            server.status.status = reason if reason.startswith("failed") else f"failed: {reason}"
            self.notice(
                f"MCP server {server.name} {self._clean(str(found))}; "
                "its tools are unavailable for this run"
            )
            return
        config = server.connection.config
        server.listed = [tool.name for tool in found]
        for tool in found:
            if not config.offers(tool.name):
                continue
            full = schema.full_name(server.name, tool.name)
            why = schema.problem(server.name, tool.name, tool.schema)
            why = why or self._taken(full, server, tool.name)
            if why and self.by_tool.get(full) is server and tool.name in server.status.left_out:
                continue  # listed a third time, or more: said once
            if why:
                server.status.left_out.append(tool.name)
                if len(server.status.left_out) <= LEFT_OUT_SAID:
                    self.notice(
                        f"MCP server {server.name}: tool {tool.name!r} is left out: "
                        f"{self._clean(why)}"
                    )
                continue
            server.tools[full] = tool.name
            self.by_tool[full] = server
            self._specs.append(
                schema.function_spec(server.name, tool.name, tool.description, tool.schema)
            )
            server.status.tools.append(tool.name)
        server.status.status = "ready"
        more = len(server.status.left_out) - LEFT_OUT_SAID
        if more > 0:  # a server of hundreds of broken tools is not a screen of notices
            self.notice(
                f"MCP server {server.name}: {more} more tools are left out "
                "(`agent mcp list` names them)"
            )
        self._unlisted(server, {tool.name for tool in found})

    def _unlisted(self, server: _Server, listed: set[str]) -> None:
        """Say the names in `enabled_tools` and `disabled_tools` that `server` does not list: they
        choose nothing, so a misspelt name would leave a tool out, or let one in, unseen."""
        config = server.connection.config
        for key, names in (
            ("enabled_tools", config.enabled_tools or []),
            ("disabled_tools", config.disabled_tools),
        ):
            missing = [name for name in names if name not in listed]
            if missing:
                server.status.unlisted += missing
                self.notice(
                    f"MCP server {server.name}: {key} names "
                    f"{', '.join(repr(self._clean(n)) for n in missing)}, which the server does "
                    "not list (`agent mcp list` shows its tools)"
                )

    def _taken(self, full: str, server: _Server, tool: str) -> str | None:
        """Why `full` cannot name `server`'s `tool`: a tool offered before has that name (the
        server lists it twice, or its `a.b` and `a_b` are both `mcp__s__a_b`, or `mcp__a___x`
        is both server `a`'s `_x` and `a_`'s `x`)."""
        other = self.by_tool.get(full)
        if other is None:
            return None
        if other is server and other.tools[full] != tool:
            return f"its name {full} is already that of the server's tool {other.tools[full]!r}"
        if other is server:
            return "the server lists a tool of that name twice"
        return f"its name {full} is already that of a tool of MCP server {other.name}"

    def within(self, max_tokens: int) -> None:
        """Keep the offered tools within `max_tokens` of every request (the tools schema heads
        each one): the servers whose tools take the most are left out, each with a notice,
        until the rest fit. Else one server's hundred tools fill a small model's window."""
        cost = {
            s.name: sum(tokens.count(json.dumps(spec)) for spec in self._specs_of(s))
            for s in self.servers
        }
        total = sum(cost.values())
        for server in sorted(self.servers, key=lambda s: -cost[s.name]):
            if total <= max_tokens or not cost[server.name]:
                break
            total -= cost[server.name]
            names = set(server.tools)
            self._specs = [spec for spec in self._specs if spec["function"]["name"] not in names]
            for name in names:
                self.by_tool.pop(name, None)
            server.status.left_out += server.status.tools
            server.status.tools = []
            server.status.status = (
                f"left out: its tools take {cost[server.name]:,} tokens of every request, "
                f"past the {max_tokens:,} the MCP tools may take"
            )
            self.notice(
                f"MCP server {server.name}: {len(names)} tools left out: they take "
                f"{cost[server.name]:,} tokens of every request, past the {max_tokens:,} the "
                "MCP tools may take of the model's window (choose some with enabled_tools)"
            )
            server.tools = {}

    def _specs_of(self, server: _Server) -> list[dict[str, Any]]:
        return [spec for spec in self._specs if spec["function"]["name"] in server.tools]

    def statuses(self) -> list[ServerStatus]:
        """Each configured server, its transport, status and tools."""
        return [s.status for s in self.servers]

    def specs(self) -> list[dict[str, Any]]:
        """The offered tools, by server name then in the server's own order."""
        return list(self._specs)

    def owns(self, name: str) -> bool:
        return name in self.by_tool

    def names(self, name: str) -> tuple[str, ...]:
        """The names of the offered tool `name`: that one, and `mcp__<server>__<the server's own
        name>` when the two differ (`mcp__git__git_push` is also `mcp__git__git.push`)."""
        server = self.by_tool.get(name)
        own = f"mcp__{server.name}__{server.tools[name]}" if server is not None else name
        return (name, own) if own != name else (name,)

    def listed(self) -> dict[str, list[str]]:
        """Each server that started, with both names of every tool it listed (offered or not)."""
        return {
            s.name: [n for tool in s.listed for n in _both(s.name, tool)]
            for s in self.servers
            if s.listed is not None
        }

    def call(self, name: str, args: dict[str, Any]) -> Reply:
        """Call a server's tool; a failure of any kind is an error reply for the model."""
        server = self.by_tool.get(name)
        if server is None or self.loop is None:
            return Reply(f"error: no MCP tool {name!r}", False, "unknown MCP tool")
        tool = server.tools[name]
        connection = server.connection
        if connection.broken:
            return Reply(
                f"error: the MCP server {server.name} is unavailable for the rest of this run "
                f"({self._clean(connection.broken)})",
                False,
                "server unavailable",
            )
        try:
            outcome = self.loop.run(
                connection.call(tool, args), connection.config.tool_timeout_s + 2 * STOP_S
            )
        except (RuntimeError, TimeoutError) as e:
            connection.broken = connection.broken or str(e) or "stopped answering"
            outcome = None
        if connection.broken and not server.said_broken:
            server.said_broken = True
            server.status.status = f"failed: {self._clean(connection.broken)}"
            self.notice(
                f"MCP server {server.name} {self._clean(connection.broken)}; "
                "its tools are unavailable for the rest of the run"
            )
        if outcome is None:
            return Reply(
                f"error: the MCP server {server.name} {self._clean(str(connection.broken))}",
                False,
                "server failed",
            )
        text = self._clean(outcome.text)
        summary = "ok" if outcome.ok else ("server failed" if connection.broken else "tool error")
        return Reply(text, outcome.ok, summary)

    def _clean(self, text: str) -> str:
        return redact(text, self.secrets)

    def close(self) -> None:
        """Stop every server and the background loop, then kill what the servers left: a
        server that exits when its stdin closes leaves the rest of its process group (and any
        daemon it detached) running, which the SDK only kills for a server that does not."""
        if self.loop is None:
            return
        live = [s.connection for s in self.servers if s.connection.task is not None]
        try:
            self.loop.run(_stop_all(live), 3 * STOP_S)
        except (TimeoutError, RuntimeError):
            pass
        finally:
            self.loop.stop()
            self.loop = None
            if any(not s.connection.config.url for s in self.servers):
                reaper.kill_other_sessions(self._spared)


def _both(server: str, tool: str) -> list[str]:
    full, own = schema.full_name(server, tool), f"mcp__{server}__{tool}"
    return [full, own] if own != full else [full]


async def _stop_all(connections: list[Connection]) -> None:
    await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)
