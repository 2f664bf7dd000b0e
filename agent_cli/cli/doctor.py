"""`agent doctor`: the resolved settings with their sources, then a check of each dependency."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_cli.core.errors import AgentError, ConfigError

if TYPE_CHECKING:
    from agent_cli.cli.config.settings import Settings


class Printer(Protocol):
    """Where doctor's lines go (the command console)."""

    def print(self, *objects: object) -> None: ...


def _check_endpoint(settings: Settings) -> str:
    from agent_cli.llm.openai.chat import OpenAIChat

    client = OpenAIChat(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.key(),
        timeout_s=min(settings.request_timeout_s, 15.0),
        max_retries=1,
        backoff_s=0.2,
    )
    models = client.list_models()
    if models and settings.model not in models:
        if not _answers_anyway(settings):
            shown = ", ".join(models[:8]) + (" …" if len(models) > 8 else "")
            raise AgentError(
                f"model {settings.model!r} is not served by {settings.base_url}",
                f"set --model to one of: {shown}",
            )
        return (
            f"{settings.base_url} answers; it lists {models[0]!r}"
            f"{f' and {len(models) - 1} more' if len(models) > 1 else ''} but answers "
            f"requests for {settings.model!r} too (llama.cpp serves its model under any name)"
        )
    return f"{settings.base_url} answers; {len(models)} model(s), {settings.model!r} among them"


def _answers_anyway(settings: Settings) -> bool:
    """Whether a one-token request for a model the server does not list is answered: llama.cpp
    serves its one model whatever name a request gives (unless started with --alias)."""
    from agent_cli.llm.openai.chat import OpenAIChat

    client = OpenAIChat(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.key(),
        timeout_s=min(settings.request_timeout_s, 30.0),
        max_retries=0,
        max_tokens=1,
        stream=False,
    )
    try:
        client.chat([{"role": "user", "content": "Say ok."}])
    except AgentError:
        return False
    return True


def _check_server(settings: Settings) -> str:
    from agent_cli.llm.openai.chat import OpenAIChat
    from agent_cli.llm.server.probe import describe, probe

    client = OpenAIChat(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.key(),
        timeout_s=settings.request_timeout_s,
        max_retries=0,
        max_tokens=settings.reserved_output_tokens,  # the room a run leaves a plan
        context_window=settings.context_window,
    )
    return describe(
        probe(client),
        settings.memory_max_tokens,
        settings.tool_output_max_tokens,
        settings.reserved_output_tokens,
    )


def _check_tokenizer(settings: Settings) -> str:
    from agent_cli.core import tokens

    ids = tokens.encode("hello world", settings.model)
    name = tokens.encoding_name_for_model(settings.model)
    return f"{name} loaded offline ('hello world' -> {ids})"


def _check_state_dir(settings: Settings, repo: Path | None) -> str:
    if repo is None and not settings.home:
        raise AgentError("no repository, so no state directory", "pass --repo DIR or set home")
    state = settings.state_dir(repo or Path.cwd())
    probe = state if state.exists() else next(p for p in state.parents if p.exists())
    if not os.access(probe, os.W_OK):
        raise AgentError(f"{probe} is not writable", "fix its permissions or set home")
    return f"{state} ({'exists' if state.exists() else 'will be created on the first run'})"


def _check_instructions(settings: Settings, repo: Path | None) -> str:
    """Which instruction files a run would send, and how many tokens they take."""
    from agent_cli.agent.learn import instructions

    if repo is None:
        return "none (no repository)"
    found = instructions.load(
        repo, instructions.share_of(settings.context_window - settings.reserved_output_tokens)
    )
    if not found.files:
        return "none (AGENTS.md, CLAUDE.md, .github/copilot-instructions.md or CONTRIBUTING.md)"
    cut = (
        " (cut to the instructions' share of the context window)"
        if any(f.cut for f in found.files)
        else ""
    )
    return f"{', '.join(found.names())}, {found.tokens} tokens{cut}"


def _check_memory(settings: Settings, repo: Path | None) -> str:
    """Which long-term memory is used; a server is opened and counted (which creates its
    database and collections when missing, as the first run would)."""
    from agent_cli.cli.wiring import make_embedder, memory_place

    if repo is None and not settings.home and not settings.memory_url:
        return "embedded Chroma in <repo>/.agent/chroma (no repository here)"
    place = memory_place(settings, settings.state_dir(repo or Path.cwd()))
    if isinstance(place, Path):
        made = (place / "chroma.sqlite3").exists()
        return f"embedded Chroma at {place} ({'exists' if made else 'created on the first run'})"
    from agent_cli.memory.longterm.chroma import LongTermMemory

    with LongTermMemory(place, make_embedder(settings), secrets=settings.secrets()) as memory:
        counts = memory.counts()
    return (
        f"Chroma server {place} answers: {counts['episodes']} episode(s), "
        f"{counts['facts']} fact(s), {counts['archive']} archived item(s)"
    )


def _check_git(repo: Path | None) -> str:
    git = shutil.which("git")
    if not git:
        raise AgentError("git is not installed", "install git (apt-get install git)")
    version = subprocess.run([git, "--version"], capture_output=True, text=True).stdout.strip()
    if repo is None:
        raise AgentError(
            f"{version}, but {Path.cwd()} is not inside a git repository",
            "run inside a git repository or pass --repo DIR",
        )
    from agent_cli.workspace.git.repository import check_identity

    identity = check_identity(repo)
    return f"{version}; repository {repo}; commits as {identity}"


def _run_check(out: Printer, name: str, check: Callable[[], str]) -> bool:
    """Print one check's line; True when it passed."""
    from agent_cli.ui.render import check_line

    try:
        out.print(check_line(name, True, check()))
        return True
    except AgentError as e:
        out.print(check_line(name, False, e.one_line()))
        return False


def run_doctor(repo_opt: Path | None, flags: dict[str, Any]) -> int:
    """Print settings and checks; 0 when every check passes, else 1."""
    from agent_cli.cli.config.settings import Settings
    from agent_cli.cli.wiring import find_repo, prepare_state_dir, settings_for
    from agent_cli.ui.console import command_console
    from agent_cli.ui.render import check_line, heading, settings_view

    out = command_console(soft_wrap=True)
    try:
        repo: Path | None = find_repo(repo_opt)
    except AgentError:
        if repo_opt is not None:
            raise
        repo = None
    try:
        settings = settings_for(repo, **flags)
    except ConfigError as e:  # still list the keys, which is what a misspelt one needs
        for line in (
            *settings_view(Settings().redacted(), {}),
            heading("checks"),
            check_line("settings", False, e.one_line()),
        ):
            out.print(line)
        return 1
    if repo is not None and settings.state_dir(repo).exists():
        prepare_state_dir(repo, settings.state_dir(repo), create=False)  # keep it out of git
    for line in (*settings_view(*settings.shown()), heading("checks")):
        out.print(line)
    checks: list[tuple[str, Callable[[], str]]] = [
        ("endpoint", lambda: _check_endpoint(settings)),
        ("tokenizer", lambda: _check_tokenizer(settings)),
        ("state", lambda: _check_state_dir(settings, repo)),
        ("memory", lambda: _check_memory(settings, repo)),
        ("git", lambda: _check_git(repo)),
        ("instructions", lambda: _check_instructions(settings, repo)),
    ]
    failed = 0
    for name, check in checks:
        ok = _run_check(out, name, check)
        failed += not ok
        if name == "endpoint" and ok:  # what the server can do, once it answers
            failed += not _run_check(out, "server", lambda: _check_server(settings))
    failed += _check_mcp_servers(out, settings, repo)
    return 1 if failed else 0


def _check_mcp_servers(out: Printer, settings: Settings, repo: Path | None) -> int:
    """One line per configured MCP server (started, listed, stopped); how many failed."""
    from agent_cli.cli.mcp_tools import status_text, statuses
    from agent_cli.ui.render import check_line

    where = repo or Path.cwd()
    failed = 0
    for status in statuses(settings, where, settings.state_dir(where)):
        ok = status.status in ("ready", "disabled")
        failed += not ok
        out.print(check_line(f"mcp {status.name}", ok, status_text(status)))
    return failed
