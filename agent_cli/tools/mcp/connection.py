"""One MCP server, reached over stdio or streamable HTTP: the only module that imports `mcp`.

Each connection is one task on the background loop that holds the SDK's context managers
(anyio's scopes must be entered and left by the same task) and serves calls one at a time.
A server that crashes, hangs past its timeout or floods the connection with garbage (a burst
of messages that cannot be read, not the log lines it writes now and then over a long run) is
marked broken with the reason, and the task ends, which stops its process group; so is a
stdio server whose process ends while a child of its own keeps the connection open
(`process`). A reply the SDK cannot read fails the call in flight at once, with what is
wrong (`replies`), and the server goes on; so does an HTTP reply over the size one may take.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agent_cli.core.text import clean
from agent_cli.tools.mcp import content, process, replies
from agent_cli.tools.mcp.config import ServerConfig
from agent_cli.workspace.shell import strays

# The SDK logs a server's bad lines with tracebacks; the user gets one notice from us instead.
logging.getLogger("mcp").addHandler(logging.NullHandler())
logging.getLogger("mcp").propagate = False
# A burst of this many messages that cannot be read (log lines among them), with no reply
# read between them and within FLOOD_WINDOW_S, is a flood; the SDK takes about a millisecond
# over each, so a flood is stopped within a second or two, and a server's log lines spread
# over a run, however many, never add up to one.
MAX_BAD_MESSAGES = 1000
FLOOD_WINDOW_S = 10.0
STDERR_TAIL = 2000
STDERR_WAIT_S = 1.0
CONNECTION_CLOSED = -32000
# The largest reply an HTTP server's event stream may carry (the SDK's default, 1 MiB, would
# take a large but valid result, which stdio reads whole, for a broken server). A larger
# reply fails its call; the server goes on.
MAX_EVENT_BYTES = 32 * 1024 * 1024
SSE_FAILED = "SSE stream failed"  # the SDK's words for one request's event stream that broke
HTTP_STAND_IN = "Server returned an error response"  # the SDK's words for any HTTP error
STOP_S = 10.0  # the SDK closes stdin, waits 2 s, then SIGTERM and SIGKILL the group
WATCH_S = 0.25  # how often a stdio server's process is checked for its end


@dataclass(frozen=True)
class ServerTool:
    """A tool as the server listed it."""

    name: str
    description: str
    schema: Any


@dataclass(frozen=True)
class CallOutcome:
    """What a call produced: text for the model, and whether the tool said it failed."""

    text: str
    ok: bool


class StderrTail:
    """The last characters a server wrote on stderr, read on a thread from a pipe."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.inode = os.fstat(write_fd).st_ino  # what the server's fd 2 points at
        self.writer = os.fdopen(write_fd, "w")
        self.tail = b""
        self.thread = threading.Thread(target=self._drain, args=(read_fd,), daemon=True)
        self.thread.start()

    def _drain(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            while chunk := pipe.read1(65536):
                self.tail = (self.tail + chunk)[-STDERR_TAIL:]

    def close_writer(self) -> None:
        """Our copy of the write end: the server holds its own."""
        if not self.writer.closed:
            self.writer.close()

    def text(self) -> str:
        """The tail, decoded, on one line, without terminal escapes or control characters."""
        return " ".join(clean(self.tail.decode("utf-8", "replace")).split())[-300:]


class Connection:
    """One configured server: start, list tools, call, stop; `broken` says why it is gone."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        env: dict[str, str],
        cwd: Path,
        wrap: Callable[[list[str]], list[str]] | None = None,
        token: str | None = None,
    ) -> None:
        self.name, self.config, self.env, self.cwd = name, config, env, cwd
        self.wrap, self.token = wrap, token
        self.broken: str | None = None
        self.bad_messages = 0  # of the burst under way (see MAX_BAD_MESSAGES)
        self.burst_began = 0.0
        self.stderr: StderrTail | None = None
        self.jobs: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[CallOutcome]] | None]
        self.task: asyncio.Task[None] | None = None
        self.call_scope: anyio.CancelScope | None = None
        self.start_scope: anyio.CancelScope | None = None  # while initialize and tools/list run
        self.bad_reply: str | None = None  # what is wrong with the call's reply, once read
        self.exited = asyncio.Event()  # the server's process ended (its connection may stay open)
        self.http_error = ""  # the last HTTP error status an HTTP server answered with

    async def start(self) -> list[ServerTool]:
        """Start or connect, initialize and list the tools; raise RuntimeError saying why not."""
        self.jobs = asyncio.Queue()
        ready: asyncio.Future[list[ServerTool]] = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.name}")
        try:
            return await asyncio.wait_for(
                asyncio.shield(ready), self.config.startup_timeout_s + STOP_S
            )
        except TimeoutError:
            self.broken = f"did not answer initialize within {self.config.startup_timeout_s:g}s"
            await self.stop()
            raise RuntimeError(self.broken) from None

    async def call(self, tool: str, args: dict[str, Any]) -> CallOutcome:
        """Call `tool`; a broken server answers with RuntimeError saying why."""
        if self.broken or self.task is None or self.task.done():
            raise RuntimeError(self.broken or "is not running")
        done: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
        await self.jobs.put((tool, args, done))
        return await done

    async def stop(self) -> None:
        """End the connection and stop the server's process group."""
        task = self.task
        if task is not None and not task.done():
            # the run is ending: a call in flight is cut short, and so is a start (a server
            # that hangs in initialize would otherwise hold the end for STOP_S)
            waiting = self.call_scope or self.start_scope
            if waiting is not None:
                self.broken = self.broken or "was stopped"
                waiting.cancel()
            await self.jobs.put(None)
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_S)
            except (TimeoutError, Exception):
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.stderr is not None:
            self.stderr.close_writer()

    # -- the connection's task --------------------------------------------------------
    async def _serve(self, ready: asyncio.Future[list[ServerTool]]) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                if self.stderr is not None:
                    self.stderr.close_writer()  # the server has its copy now
                    watcher = asyncio.create_task(self._watch(process.find(self.stderr.inode)))
                    stack.callback(watcher.cancel)
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._on_message)
                )
                tools: list[ServerTool] = []
                with anyio.fail_after(self.config.startup_timeout_s) as self.start_scope:
                    started = await session.initialize()
                    tools = await _list_tools(session, started.capabilities.tools is not None)
                self.start_scope = None
                if cut := self._start_cut():
                    raise RuntimeError(cut)
                self._replied()
                ready.set_result(tools)
                while (job := await self.jobs.get()) is not None:
                    tool, args, done = job
                    done.set_result(await self._call(session, tool, args))
                    if self.broken:
                        return
        except BaseException as e:  # a crash, a timeout, a cancel: all end the server
            if not isinstance(e, asyncio.CancelledError):
                await self._stderr_settled()
            why = self._reason(e, starting=not ready.done())
            self.broken = self.broken or why
            if not ready.done():
                ready.set_exception(RuntimeError(self.broken))
                ready.exception()  # seen: a start cancelled by Ctrl-C never awaits it
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            self._fail_waiting()

    def _start_cut(self) -> str | None:
        """Why a start cut short without an error failed: a reply that could not be read, the
        server's process ended, or the run stopped it."""
        if self.bad_reply:
            return f"answered with {self.bad_reply}"
        return "exited" if self.exited.is_set() else self.broken

    def _transport(self) -> Any:
        if self.config.url:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            client = create_mcp_http_client(headers=headers)
            client.event_hooks["response"].append(self._answered)
            return streamable_http_client(
                self.config.url, http_client=client, max_sse_event_size=MAX_EVENT_BYTES
            )
        argv = [str(self.config.command), *self.config.args]
        if self.wrap is not None:
            argv = self.wrap(argv)
        self.stderr = StderrTail()
        params = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            # the mark a later run stops it by if this agent is killed outright (strays.py)
            env={**self.env, **self.config.env, strays.MARK: strays.mark()},
            cwd=self.cwd,
            # bytes that are not UTF-8 become U+FFFD: with "strict" the SDK's reader dies on
            # them and a call waits out its whole tool_timeout_s for an answer never read
            encoding_error_handler="replace",
        )
        return stdio_client(params, errlog=self.stderr.writer)

    async def _call(self, session: ClientSession, tool: str, args: dict[str, Any]) -> CallOutcome:
        timeout = self.config.tool_timeout_s
        result: types.CallToolResult | None = None
        if self.exited.is_set():
            self.broken = self._with_stderr("exited")
            return CallOutcome(f"error: the MCP server {self.name} {self.broken}", ok=False)
        try:
            with anyio.fail_after(timeout) as scope:
                self.call_scope = scope
                result = await session.call_tool(tool, args)
        except TimeoutError:
            self.broken = f"did not answer a call within tool_timeout_s = {timeout:g}s"
        except MCPError as e:
            if e.code != CONNECTION_CLOSED:  # the server refused the call and goes on
                return CallOutcome(f"error: the MCP server said: {self._said(e)}", ok=False)
            if self.config.url and (failed := _stream_failed(e)):
                # the SDK gave up on this request's event stream alone; the session goes on
                return CallOutcome(f"error: the MCP server {self.name} {failed}", ok=False)
            await self._stderr_settled()
            self.broken = self._with_stderr(_closed(e))
        except ValidationError as e:  # one malformed result: the connection itself is fine
            return CallOutcome(
                f"error: the MCP server {self.name} answered with a result that does not "
                f"follow the MCP schema ({schema_error(e)})",
                ok=False,
            )
        except RuntimeError as e:  # the SDK refused one result (not what the tool's own
            # outputSchema says, or a request for input): that call fails, the server goes on
            return CallOutcome(
                f"error: the MCP server {self.name} answered with a result that cannot be "
                f"taken ({_one_line(str(e))})",
                ok=False,
            )
        finally:
            self.call_scope = None
        if result is None and self.exited.is_set() and not self.broken:
            self.broken = self._with_stderr("exited")
        bad_reply, self.bad_reply = self.bad_reply, None
        if bad_reply and not self.broken:  # the reply came, and could not be read
            return CallOutcome(
                f"error: the MCP server {self.name} answered with {bad_reply}", ok=False
            )
        if self.broken or result is None:
            self.broken = self.broken or "stopped answering"
            return CallOutcome(f"error: the MCP server {self.name} {self.broken}", ok=False)
        self._replied()
        text = content.as_text(result.content, result.structured_content)
        if result.is_error:
            return CallOutcome(f"error: {text or 'the tool failed'}", ok=False)
        return CallOutcome(text, ok=True)

    async def _watch(self, server: process.ServerProcess | None) -> None:
        """Once the server's process ends, end the request in flight (and refuse the next):
        a server whose child still holds its stdout never closes the connection."""
        if server is None:
            return
        while process.running(server):
            await asyncio.sleep(WATCH_S)
        await asyncio.sleep(STDERR_WAIT_S)  # a connection that closes says so itself, first
        self.exited.set()
        waiting = self.call_scope or self.start_scope
        if waiting is not None:
            waiting.cancel()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            why = replies.broken_reply(message)
            waiting = self.call_scope or self.start_scope
            if why and waiting is not None and self.bad_reply is None:
                self.bad_reply = why  # the reply to the request in flight: it ends now
                waiting.cancel()
            now = time.monotonic()
            if now - self.burst_began > FLOOD_WINDOW_S:
                self.bad_messages, self.burst_began = 0, now
            self.bad_messages += 1
            if self.bad_messages >= MAX_BAD_MESSAGES and not self.broken:
                self.broken = (
                    f"flooded the connection with {self.bad_messages} unreadable messages in a row"
                )
                if self.call_scope is not None:
                    self.call_scope.cancel()

    def _replied(self) -> None:
        """A reply was read: the unreadable messages before it were no flood."""
        self.bad_messages, self.burst_began = 0, 0.0

    def _reason(self, e: BaseException, starting: bool) -> str:
        leaf = _leaf(e)
        if isinstance(leaf, TimeoutError) and starting:
            return f"did not answer initialize within {self.config.startup_timeout_s:g}s"
        if isinstance(leaf, FileNotFoundError):
            return f"cannot be started: {self.config.command}: command not found"
        if isinstance(leaf, asyncio.CancelledError):
            return "was stopped"
        what = _one_line(self._said(leaf) if isinstance(leaf, MCPError) else str(leaf))
        what = what or type(leaf).__name__
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            what = _closed(leaf)
        if isinstance(leaf, ValidationError):  # the SDK checks a tools/list reply whole
            what = f"its reply does not follow the MCP schema ({schema_error(leaf)})"
        return self._with_stderr(("failed to start: " if starting else "failed: ") + what)

    async def _answered(self, response: Any) -> None:
        """Keep an HTTP server's last error status: the SDK says only that there was one."""
        if response.status_code >= 400:
            self.http_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()

    def _said(self, e: MCPError) -> str:
        """The error's message, with the HTTP status the SDK leaves out of its stand-in
        (`Server returned an error response`: a 401 for a wrong token, a 500...)."""
        said = str(e.message or "")
        if said == HTTP_STAND_IN and self.http_error:
            return f"{said} ({self.http_error})"
        return said

    async def _stderr_settled(self) -> None:
        """Give a server that just ended a moment to have its last words on stderr read."""
        if self.stderr is not None:
            await asyncio.to_thread(self.stderr.thread.join, STDERR_WAIT_S)

    def _with_stderr(self, why: str) -> str:
        tail = self.stderr.text() if self.stderr is not None else ""
        return f"{why} (stderr: {tail})" if tail else why

    def _fail_waiting(self) -> None:
        while not self.jobs.empty():
            job = self.jobs.get_nowait()
            if job is not None and not job[2].done():
                job[2].set_result(
                    CallOutcome(f"error: the MCP server {self.name} {self.broken}", ok=False)
                )


async def _list_tools(session: ClientSession, declared: bool) -> list[ServerTool]:
    """Every page of `tools/list`. A server that did not declare the `tools` capability (one
    of prompts or resources only) is asked too, since some offer tools without saying so;
    its refusal of the method is no failure, only no tools."""
    found: list[ServerTool] = []
    cursor: str | None = None
    for _ in range(100):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        try:
            page = await session.list_tools(params=params)
        except MCPError as e:
            if declared or e.code != types.METHOD_NOT_FOUND:
                raise
            return []
        found += [ServerTool(t.name, t.description or "", t.input_schema) for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            break
    return found


def schema_error(e: ValidationError) -> str:
    """The first thing wrong in a reply, on one line: `tools.1.inputSchema.type: Input should
    be 'object'` (and how many more)."""
    errors = e.errors()
    if not errors:
        return "not valid"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "the reply"
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return " ".join(f"{where}: {first['msg']}{more}".split())[:300]


def _one_line(text: str) -> str:
    """An error's words on one line of at most 300 characters, without the pydantic link a
    reply the SDK could not parse carries (`Failed to parse JSON response: 1 validation
    error ... For further information visit https://errors.pydantic.dev/...`)."""
    kept = [line for line in text.splitlines() if "errors.pydantic.dev" not in line]
    return " ".join(" ".join(kept).split())[:300]


def _closed(e: MCPError) -> str:
    """Why the connection ended: closed, or lost in the SDK's own words when they say more
    (an HTTP event stream that ended without a reply)."""
    said = " ".join(str(e.message or "").split())
    if not said or "closed" in said.lower():
        return "closed the connection"
    return f"lost the connection ({said[:200]})"


def _stream_failed(e: MCPError) -> str | None:
    """What broke one request's HTTP event stream, said as what the server answered (a reply
    over MAX_EVENT_BYTES, in MB); None when the stream did not break but ended."""
    said = " ".join(str(e.message or "").split())
    if not said.startswith(SSE_FAILED):
        return None
    if "byte limit" in said:
        return (
            f"answered with a reply over the {MAX_EVENT_BYTES // (1024 * 1024)} MB one reply "
            "may take; the call failed, the server goes on"
        )
    return f"answered with a reply that could not be read ({said[:200]})"


def _leaf(e: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e
