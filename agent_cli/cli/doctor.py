"""`agent doctor`: the resolved settings with their sources, then a check of each dependency."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_cli.core.errors import AgentError, ConfigError, ModelRefused

if TYPE_CHECKING:
    from agent_cli.agent.run.roles import Role
    from agent_cli.cli.config.settings import Settings
    from agent_cli.cli.roles import Endpoint
    from agent_cli.llm.openai.chat import OpenAIChat
    from agent_cli.llm.server.probe import ServerReport


class Printer(Protocol):
    """Where doctor's lines go (the command console)."""

    @property
    def is_terminal(self) -> bool: ...

    def print(self, *objects: object) -> None: ...

    def status(self, status: str) -> AbstractContextManager[Any]: ...


class Target:
    """The endpoint one check is about, as a run's roles use it (`roles.distinct`): its
    model, address and key, what an error names as its fix (`Endpoint.set_by()`), and the
    roles it is for when they do not all share it."""

    def __init__(self, settings: Settings, ep: Endpoint, roles: Sequence[Role]) -> None:
        self.settings, self.endpoint, self.role_names = settings, ep, tuple(roles)
        self.model, self.base_url = ep.model, ep.base_url
        self.set_by = ep.set_by()  # `executor_model`, `EXEC_KEY`, `verifier_base_url`
        # "planner, verifier" when the roles are set apart; "" when every role uses it
        self.roles = ", ".join(roles) if ep.named_for else ""

    def key(self) -> str | None:
        """The key a run sends to this endpoint (a ConfigError when its variable is not set)."""
        from agent_cli.cli.roles import api_key

        return api_key(self.settings, self.role_names[0], self.endpoint)

    def client(self, **options: Any) -> OpenAIChat:
        """A client for this endpoint whose errors name the setting that fixes them."""
        from agent_cli.llm.openai.chat import OpenAIChat

        return OpenAIChat(
            model=self.model,
            base_url=self.base_url,
            api_key=self.key(),
            set_by=self.set_by,
            **options,
        )

    @property
    def whose(self) -> str:
        """The start of a line about this endpoint: the roles it is for, when set apart."""
        return f"for {self.roles}: " if self.roles else ""

    def said(self, e: AgentError) -> AgentError:
        """`e` naming the roles this endpoint is for (unless its words already do)."""
        if not self.roles or f"the {self.set_by.role} " in e.message:
            return e
        return type(e)(f"{self.whose}{e.message}", e.hint)


def _check_endpoint(settings: Settings, at: Target) -> str:
    try:
        return _endpoint_line(settings, at)
    except AgentError as e:  # which role's endpoint failed
        raise at.said(e) from None


def _endpoint_line(settings: Settings, at: Target) -> str:
    client = at.client(
        timeout_s=min(settings.request_timeout_s, 15.0),
        max_retries=1,
        backoff_s=0.2,
    )
    whose = at.whose
    models = client.list_models()
    if not models:
        return f"{whose}{at.base_url} answers, but lists no model; requests name {at.model!r}"
    if at.model not in models:
        if not _answers_anyway(settings, at):
            shown = ", ".join(map(_model_id, models[:8])) + (" …" if len(models) > 8 else "")
            raise AgentError(
                f"model {at.model!r} is not served by {at.base_url}",
                f"set {at.set_by.model} to one of: {shown}",
            )
        return (
            f"{whose}{at.base_url} answers; it lists {_model_id(models[0])!r}"
            f"{f' and {len(models) - 1} more' if len(models) > 1 else ''} but answers "
            f"requests for {at.model!r} too (llama.cpp serves its model under any name)"
        )
    return f"{whose}{at.base_url} answers; {len(models)} model(s), {at.model!r} among them"


def _model_id(name: str) -> str:
    """A model id the endpoint listed, cut for a line (a server may list one of any length)."""
    return name if len(name) <= MODEL_ID_CHARS else name[: MODEL_ID_CHARS - 1] + "…"


MODEL_ID_CHARS = 100


def _answers_anyway(settings: Settings, at: Target) -> bool:
    """Whether a one-token request for a model the server does not list is answered: llama.cpp
    serves its one model whatever name a request gives (unless started with --alias). Only a
    refusal says no; a server that does not answer in time (busy, stalled) raises that, since
    it tells nothing of the model's name."""
    client = at.client(
        timeout_s=min(settings.request_timeout_s, 30.0),
        max_retries=0,
        max_tokens=1,
        stream=False,
    )
    try:
        client.chat([{"role": "user", "content": "Say ok."}])
    except ModelRefused:
        return False
    return True


def _probe_server(settings: Settings, at: Target) -> ServerReport:
    """What the server at `at` can do (an AgentError when it cannot be asked)."""
    from agent_cli.llm.server.probe import probe

    client = at.client(
        timeout_s=settings.request_timeout_s,
        max_retries=0,
        max_tokens=settings.reserved_output_tokens,  # the room a run leaves a plan
        context_window=settings.context_window,
    )
    # A plan-sized reply matters only where plans are asked for: not at an executor's own server.
    plans = "planner" in at.role_names
    return probe(client, plans)


def _check_server(
    settings: Settings,
    at: Target,
    found: ServerReport | AgentError,
    narrowest: tuple[int, str] | None = None,
) -> str:
    """The server's line from what `_probe_server` found; working memory and tool output as a
    run fits them: to `narrowest`, the smallest window of the roles' endpoints, when smaller."""
    from agent_cli.llm.server.probe import describe

    if isinstance(found, AgentError):
        raise at.said(found)
    return at.whose + describe(
        found,
        settings.memory_max_tokens,
        settings.tool_output_max_tokens,
        settings.reserved_output_tokens,
        narrowest,
    )


def _narrowest(probed: list[tuple[Target, ServerReport | AgentError]]) -> tuple[int, str] | None:
    """The smallest window the servers reported, and whose endpoint it is."""
    windows = [
        (found.window, f"the {at.roles.replace(', ', ' and ')} endpoint")
        for at, found in probed
        if not isinstance(found, AgentError)
    ]
    return min(windows, default=None)


def _check_tokenizer(settings: Settings) -> str:
    from agent_cli.core import tokens

    ids = tokens.encode("hello world", settings.model)
    name = tokens.encoding_name_for_model(settings.model)
    return f"{name} loaded offline ('hello world' -> {ids})"


def _check_state_dir(settings: Settings, repo: Path | None) -> str:
    from agent_cli.cli.shared import current_dir

    if repo is None and not settings.home:
        raise AgentError("no repository, so no state directory", "pass --repo DIR or set home")
    state = settings.state_dir(repo or current_dir())
    probe = state if state.exists() else next(p for p in state.parents if p.exists())
    if not _writable(probe):
        raise AgentError(f"{probe} is not writable", "fix its permissions or set home")
    return f"{state} ({'exists' if state.exists() else 'will be created on the first run'})"


def _writable(folder: Path) -> bool:
    """Whether a file can be made in `folder`. os.access says yes to root almost everywhere
    (/proc, a folder of mode 555), so a nameless file is made there too and dropped."""
    if not os.access(folder, os.W_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


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
    """Which long-term memory is used; a server is opened (which creates its database and
    collections when missing, as the first run would), checked for the embedder its
    collections were written with (a run refuses another's) and counted."""
    from agent_cli.cli.shared import current_dir, make_embedder, memory_place

    if repo is None and not settings.home and not settings.memory_url:
        return "embedded Chroma in <repo>/.agent/chroma (no repository here)"
    place = memory_place(settings, settings.state_dir(repo or current_dir()))
    if isinstance(place, Path):
        from agent_cli.memory.longterm.place import check_database

        check_database(place)  # an empty, foreign or cut-short database is said here
        made = (place / "chroma.sqlite3").exists()
        return f"embedded Chroma at {place} ({'exists' if made else 'created on the first run'})"
    from agent_cli.memory.longterm.chroma import LongTermMemory

    with LongTermMemory(place, make_embedder(settings), secrets=settings.secrets()) as memory:
        memory.store.require_match()  # what a run's first read or write refuses
        counts = memory.counts()
    return (
        f"Chroma server {place} answers: {counts['episodes']} episode(s), "
        f"{counts['facts']} fact(s), {counts['archive']} archived item(s)"
    )


def _check_hooks(settings: Settings, repo: Path | None) -> str:
    """Each hook's program can be run where a run starts it (`hooks.program`, as the run
    asks): found on PATH (or, named with a `/`, from the repository root), executable, and
    in sight in the sandbox. A pre_tool hook that cannot run blocks every tool it matches,
    so a missing one is said here rather than by a run's every step."""
    from agent_cli.cli.shared import current_dir
    from agent_cli.core.text import clean
    from agent_cli.tools.hooks.config import HOOK_EVENTS
    from agent_cli.tools.hooks.program import cannot_start

    hooks = settings.hooks
    if not hooks.any():
        return "none configured"
    root = repo or current_dir()
    missing = []
    for event in HOOK_EVENTS:
        for hook in hooks.at(event):
            cannot = cannot_start(hook.command[0], root, os.environ, settings.sandbox)
            if cannot is not None:
                missing.append(f"{event} `{clean(hook.shown())[:80]}` ({clean(cannot.why)})")
    if missing:
        raise ConfigError(
            f"cannot run the program of hook {'; '.join(missing)}",
            "a pre_tool hook that cannot run blocks every tool it matches; "
            "at the other points it is a notice at every run",
        )
    return clean(hooks.summary())


def _check_git(repo: Path | None, not_a_repo: AgentError | None) -> str:
    """git's version and the repository's state; without a repository, `not_a_repo` says why
    (not inside one, a bare repository, a `.git` directory), as every other command does."""
    git = shutil.which("git")
    if not git:
        raise AgentError("git is not installed", "install git (apt-get install git)")
    version = subprocess.run([git, "--version"], capture_output=True, text=True).stdout.strip()
    if repo is None:
        why = not_a_repo or AgentError("no repository", "run inside a git repository")
        raise AgentError(f"{version}, but {why.message}", why.hint)
    from agent_cli.workspace.git.repository import GitRepo, check_identity

    git_repo = GitRepo(repo)
    try:  # what every run would refuse (no commit yet, a detached HEAD, a merge going on)
        git_repo.check_state()
    except AgentError as e:
        raise AgentError(f"{version}; repository {repo}, but {e.message}", e.hint) from None
    finally:
        git_repo.close()
    identity = check_identity(repo)
    return f"{version}; repository {repo}; commits as {identity}"


def _run_check(
    out: Printer, name: str, check: Callable[[], str], secrets: tuple[str, ...] = ()
) -> bool:
    """Print one check's line, `secrets` redacted (a server's error may echo a key back);
    True when it passed."""
    from agent_cli.core.redact import redact
    from agent_cli.ui.render import check_line

    try:
        with _waiting(out, name):
            said = check()
        out.print(check_line(name, True, redact(said, secrets)))
        return True
    except AgentError as e:
        out.print(check_line(name, False, redact(_here(e).one_line(), secrets)))
        return False
    except OSError as e:  # a file or directory the check reads: the others still run
        out.print(check_line(name, False, redact(_os_said(e), secrets)))
        return False


def _here(e: AgentError) -> AgentError:
    """`e` without the parts of its hint that say to run `agent doctor`: the reader is
    running it (a hint's parts are separated by "; ")."""
    parts = [part for part in e.hint.split("; ") if "`agent doctor`" not in part]
    return AgentError(e.message, "; ".join(parts))


def _os_said(e: OSError) -> str:
    """An OSError in words: what went wrong, and with which file."""
    what = e.strerror or str(e) or type(e).__name__
    return f"{what}: {e.filename}" if e.filename else what


def _waiting(out: Printer, name: str) -> AbstractContextManager[Any]:
    """A check can wait on a server for many seconds (minutes for a local model's plan-sized
    reply): a terminal shows which one is running and what it waits for."""
    what = WAITING.get(name, "checking…")
    return out.status(f"{name}: {what}") if out.is_terminal else contextlib.nullcontext()


WAITING = {  # what the checks that wait on the network wait for
    "endpoint": "asking for the models",
    "server": "a forced tool call, then a plan-sized reply (minutes on a slow model)",
}


def run_doctor(repo_opt: Path | None, flags: dict[str, Any]) -> int:
    """Print settings and checks; 0 when every check passes, else 1."""
    from agent_cli.cli.config.settings import Settings
    from agent_cli.cli.shared import find_repo, prepare_state_dir, settings_for
    from agent_cli.ui.console import command_console
    from agent_cli.ui.render import check_line, heading, settings_view

    out = command_console(soft_wrap=True)
    repo: Path | None = None
    not_a_repo: AgentError | None = None  # why there is none: the git check says it
    try:
        repo = find_repo(repo_opt)
    except AgentError as e:
        if repo_opt is not None:
            raise
        not_a_repo = e
    try:
        settings = settings_for(repo, **flags)
    except ConfigError as e:  # still list the keys, which is what a misspelt one needs
        for line in (
            *settings_view(Settings().redacted(), {}, unread=True),
            heading("checks"),
            check_line("settings", False, e.one_line()),
        ):
            out.print(line)
        return 1
    with contextlib.suppress(ConfigError, OSError):  # not a directory: the state check says so
        if repo is not None and settings.state_dir(repo).exists():
            prepare_state_dir(repo, settings.state_dir(repo), create=False)  # out of git
    for line in (*settings_view(*settings.shown()), heading("checks")):
        out.print(line)
    checks: list[tuple[str, Callable[[], str]]] = [
        ("tokenizer", lambda: _check_tokenizer(settings)),
        ("state", lambda: _check_state_dir(settings, repo)),
        ("memory", lambda: _check_memory(settings, repo)),
        ("git", lambda: _check_git(repo, not_a_repo)),
        ("hooks", lambda: _check_hooks(settings, repo)),
        ("instructions", lambda: _check_instructions(settings, repo)),
    ]
    failed = 0
    secrets = settings.secrets()
    # Each distinct endpoint once; what its server can do, once it answers. The servers are
    # all asked before their lines are said: a run fits working memory and tool output to
    # the smallest window of its roles, so each line says what the run will use.
    probed: list[tuple[Target, ServerReport | AgentError]] = []
    for at in targets(settings):
        if not _run_check(out, "endpoint", lambda: _check_endpoint(settings, at), secrets):  # noqa: B023
            failed += 1
            continue
        try:
            with _waiting(out, "server"):
                probed.append((at, _probe_server(settings, at)))
        except AgentError as e:
            probed.append((at, e))
    narrowest = _narrowest(probed) if len(probed) > 1 else None
    for at, found in probed:
        failed += not _run_check(
            out,
            "server",
            lambda: _check_server(settings, at, found, narrowest),  # noqa: B023
            secrets,
        )
    for name, check in checks:
        failed += not _run_check(out, name, check, secrets)
    failed += _check_mcp_servers(out, settings, repo)
    return 1 if failed else 0


def targets(settings: Settings) -> list[Target]:
    """Each distinct endpoint of the run's roles once, as a run builds their clients (one
    when the roles are not set apart)."""
    from agent_cli.cli import roles

    return [Target(settings, ep, names) for ep, names in roles.distinct(settings)]


def _check_mcp_servers(out: Printer, settings: Settings, repo: Path | None) -> int:
    """One line per configured MCP server (started, listed, stopped); how many failed."""
    from agent_cli.cli.mcp_tools import status_text, statuses
    from agent_cli.cli.shared import current_dir
    from agent_cli.ui.render import check_line

    if not settings.mcp_servers:
        return 0
    try:
        where = repo or current_dir()
        state = settings.state_dir(where)
    except AgentError as e:
        out.print(check_line("mcp", False, f"no server started: {e.one_line()}"))
        return 1
    except OSError as e:
        out.print(check_line("mcp", False, f"no server started: {_os_said(e)}"))
        return 1
    failed = 0
    waiting = (
        out.status("starting the MCP servers…") if out.is_terminal else contextlib.nullcontext()
    )
    with waiting:
        found = statuses(settings, where, state)
    for status in found:
        ok = status.status in ("ready", "disabled")
        failed += not ok
        out.print(check_line(f"mcp {status.name}", ok, status_text(status)))
    return failed
