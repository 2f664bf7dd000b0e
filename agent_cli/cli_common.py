"""Helpers every command shares: finding the repository and loading settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_cli.errors import WorkspaceError


def find_repo(start: Path | None) -> Path:
    """The top of the git work tree containing `start` (default: the current directory)."""
    here = (start or Path.cwd()).expanduser()
    if not here.exists():
        raise WorkspaceError(f"{here} does not exist", "pass --repo DIR with an existing directory")
    here = here.resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    raise WorkspaceError(f"{here} is not inside a git repository",
                         "run inside a git repository or pass --repo DIR")


def settings_for(repo: Path | None, **flags: Any):
    """Settings for `repo` with command-line flags on top (heavy import kept out of start-up)."""
    from agent_cli.settings import load_settings

    return load_settings(repo, flags)


def make_embedder(settings):
    """The endpoint embedder when `embedding_model` is set, else the offline WordLlama one."""
    if not settings.embedding_model:
        from agent_cli.memory.embed import WordLlamaEmbedder

        return WordLlamaEmbedder()
    from agent_cli.llm.openai_model import OpenAIEmbedder

    return OpenAIEmbedder(base_url=settings.base_url, api_key=settings.key(),
                          model=settings.embedding_model)


def memory_place(settings, state_dir: Path):
    """Where long-term memory lives: the Chroma server at `memory_url`, else `<state>/chroma`."""
    if not settings.memory_url:
        return state_dir / "chroma"
    from agent_cli.memory.place import DEFAULT_DATABASE, DEFAULT_TENANT, ChromaServer

    return ChromaServer(settings.memory_url, tenant=settings.memory_tenant or DEFAULT_TENANT,
                        database=settings.memory_database or DEFAULT_DATABASE,
                        token=settings.memory_token_value())
