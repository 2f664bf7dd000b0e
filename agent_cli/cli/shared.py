"""What every command shares: the repository, its settings, its state directory, and where
long-term memory lives with the embedder that reads it.

Apart from the wiring of a run (wiring.py), so that a command that only reads memory or
settings (`agent recall`, `agent memory ...`, `agent runs`) does not import the run's parts.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_cli.cli.config.settings import Settings, load_settings
from agent_cli.core.errors import ConfigError, WorkspaceError
from agent_cli.core.protocols import Embedder
from agent_cli.core.text import short, some
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.place import DEFAULT_DATABASE, DEFAULT_TENANT, ChromaServer
from agent_cli.workspace.git.exclude import exclude_state_dir
from agent_cli.workspace.git.repository import tracked_state
from agent_cli.workspace.git.worktree import main_work_tree

if TYPE_CHECKING:
    from agent_cli.agent.run.store import RunStore


def current_dir() -> Path:
    """The current directory, or a WorkspaceError when it was removed (a shell left in a
    worktree run's folder after the run verified, or after `agent clean`)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise WorkspaceError(
            "the current directory no longer exists (it was removed)",
            "cd to the repository, or pass --repo DIR",
        ) from None


def find_repo(start: Path | None) -> Path:
    """The top of the git work tree containing `start` (default: the current directory)."""
    here = (start or current_dir()).expanduser()
    if not here.exists():
        raise WorkspaceError(f"{here} does not exist", "pass --repo DIR with an existing directory")
    here = here.resolve()
    if not here.is_dir():
        raise WorkspaceError(f"{here} is not a directory", "pass --repo DIR with a directory")
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
        if (d / "HEAD").is_file() and (d / "objects").is_dir() and (d / "refs").is_dir():
            if d.name == ".git":  # a work tree's own git directory, not a bare repository
                raise WorkspaceError(
                    f"{d} is the git directory of {d.parent}, not a work tree",
                    f"run in {d.parent} (or pass --repo {d.parent})",
                )
            raise WorkspaceError(
                f"{d} is a bare git repository: it has no work tree to work in",
                f"clone it (git clone {d} DIR) and run in the clone",
            )
    raise WorkspaceError(
        f"{here} is not inside a git repository", "run inside a git repository or pass --repo DIR"
    )


def settings_for(repo: Path | None, **flags: Any) -> Settings:
    """Settings for `repo` with command-line flags on top; what a repository's .agentrc may not set is said."""
    settings = load_settings(repo, flags)
    for notice in settings.notices:
        print(f"notice: {notice}", file=sys.stderr)
    return settings


def make_embedder(settings: Settings) -> Embedder:
    """The endpoint embedder when `embedding_model` is set, else the offline WordLlama one."""
    if not settings.embedding_model:
        return WordLlamaEmbedder()
    from agent_cli.llm.openai.embedder import OpenAIEmbedder

    return OpenAIEmbedder(
        base_url=settings.base_url,
        api_key=settings.key(),
        model=settings.embedding_model,
        timeout_s=settings.request_timeout_s,  # as a chat request's, whatever the server
        secrets=settings.secrets(),
        max_retries=settings.max_retries,
        backoff_s=settings.retry_backoff_s,
    )


def memory_place(settings: Settings, state_dir: Path) -> Path | ChromaServer:
    """Where long-term memory lives: the Chroma server at `memory_url`, else `<state>/chroma`."""
    if not settings.memory_url:
        return state_dir / "chroma"
    return ChromaServer(
        settings.memory_url,
        tenant=settings.memory_tenant or DEFAULT_TENANT,
        database=settings.memory_database or DEFAULT_DATABASE,
        token=settings.memory_token_value(),
    )


def own_memory(settings: Settings) -> bool:
    """Whether long-term memory is the repository's own: neither a server nor under a `home`
    other repositories may share."""
    return not settings.memory_url and not settings.home


def run_secrets(settings: Settings, repo_path: Path) -> tuple[str, ...]:
    """What a run masks in all it stores, shows or sends: the configured secrets, the
    passwords in the URLs of the repository's remotes (`git remote -v` shows them), and those
    in URLs the environment holds (`DATABASE_URL=postgres://app:PASSWORD@db/app`: the model's
    commands and the tests get the variable, and what they print never shows the password)."""
    from agent_cli.workspace.git.identity import remote_passwords, url_passwords

    return (
        *settings.secrets(),
        *remote_passwords(repo_path),
        *url_passwords(os.environ.values()),
    )


def prepare_state_dir(repo: Path, state_dir: Path, create: bool) -> None:
    """Exclude the state directory from git (when inside the repository), then create it."""
    exclude_state_dir(repo, state_dir)
    if create:
        state_dir.mkdir(parents=True, exist_ok=True)


def refuse_tracked_state(repo: Path, state_dir: Path) -> None:
    """ConfigError when the repository `repo` is a work tree of tracks files under the state
    directory: run state and long-term memory there came with a clone, not from the user (a
    run record could name an endpoint for `--resume` to send the user's code and key to)."""
    top = main_work_tree(repo)
    tracked = tracked_state(top, state_dir)
    if tracked:
        where = os.path.relpath(state_dir, top)
        named = some([short(name) for name in tracked], 2)
        raise ConfigError(
            f"the repository tracks {len(tracked)} file(s) in the state directory {where}/ "
            f"({named}): what is kept there would be the repository's, not yours",
            f"untrack them with `git rm -r --cached {shlex.quote(where)}` and commit, or set "
            "home to keep run state elsewhere",
        )


def run_store(state_dir: Path, repo: Path, secrets: tuple[str, ...] = ()) -> RunStore:
    """The runs under `state_dir` of the repository `repo` is a work tree of (a shared `home`
    holds other repositories' runs too); refused when the repository itself tracks files
    there (`refuse_tracked_state`)."""
    from agent_cli.agent.run.store import RunStore

    refuse_tracked_state(repo, state_dir)
    return RunStore(state_dir, secrets, repo=repo_key(repo))


def repo_key(repo: Path) -> str:
    """The repository a run is of, as its state and its lock name it: its main work tree."""
    return str(main_work_tree(repo).resolve())
