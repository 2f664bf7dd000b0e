"""`agent trust`: let a repository's `.agentrc` choose the endpoint and model.

Only typer is imported at module level. Trust is recorded in the user's own state
(`agent_cli.cli.config.trust.trust_file`), never in the repository, and covers the `.agentrc` as it
is now: when the file changes, the repository is untrusted again until the next `agent trust`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def trust_command(
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    revoke: bool = typer.Option(False, "--revoke", help="Stop trusting the repository."),
) -> None:
    """Trust this repository's .agentrc to set the keys that need trust (endpoints, models, memory_url)."""
    from agent_cli.cli.config import trust
    from agent_cli.cli.shared import find_repo

    root = find_repo(repo)
    rc = root / ".agentrc"
    if not revoke and not rc.is_file():
        from agent_cli.core.errors import ConfigError

        raise ConfigError(
            f"there is no .agentrc in {root} to trust; nothing was recorded",
            "settings come from ~/.agentrc, the environment and flags until the repository has one",
        )
    data, content = _parsed(rc) if not revoke else ({}, None)
    if revoke and trust.status(root) == "untrusted":
        typer.echo(f"{root} was not trusted; nothing changed ({trust.trust_file()})")
        return
    path = trust.record(root, revoke=revoke, content=content)  # the bytes summarised below
    if revoke:
        typer.echo(f"{root} is no longer trusted (recorded in {path})")
        return
    typer.echo(f"trusted {root} (recorded in {path})")
    for line in summary(data):
        typer.echo(line)
    files = run_files(root, data)
    if files:
        typer.echo(
            "its hooks and MCP servers run files of the repository, which trust does not "
            f"cover (a pull may change them without a word): {', '.join(files)}"
        )
    typer.echo(
        "safety settings (approval, sandbox, home) still come only from you; "
        "if .agentrc changes, run `agent trust` again"
    )


def _parsed(rc: Path) -> tuple[dict[str, Any], bytes]:
    """The file as TOML and the bytes it was read from, or a ConfigError naming it (then
    nothing is recorded): what every other command refuses in it (a key that is not one,
    `api_key`, a value out of range, a pattern that does not compile) is not trusted either.
    A file that changes while it is read and checked is refused: what is trusted is what was
    shown and checked, byte for byte."""
    from agent_cli.cli.config.settings import load_settings, read_rc
    from agent_cli.core.errors import ConfigError

    try:
        data, content = read_rc(rc)
        load_settings(rc.parent)  # read as every other command reads it
        if read_rc(rc)[1] != content:
            raise ConfigError(f"{rc} changed while it was read")
        return data, content
    except ConfigError as e:
        raise ConfigError(
            f"{e.message}; nothing was recorded", "fix the file, then trust it"
        ) from None


def run_files(root: Path, data: dict[str, Any]) -> list[str]:
    """The repository files the file's hooks and stdio MCP servers run (`tools.held`)."""
    from agent_cli.tools.held import HeldFiles

    hooks, servers = data.get("hooks"), data.get("mcp_servers")
    hooks = hooks if isinstance(hooks, dict) else {}
    servers = servers if isinstance(servers, dict) else {}
    tables = [t for event in hooks.values() if isinstance(event, list) for t in event]
    commands = [t["command"] for t in tables if isinstance(t, dict) and "command" in t]
    commands += [
        [s["command"], *s.get("args", [])]
        for s in servers.values()
        if isinstance(s, dict) and isinstance(s.get("command"), str)
    ]
    words = [c for c in commands if isinstance(c, list) and all(isinstance(w, str) for w in c)]
    return HeldFiles(root, words).files()


def _visible(text: str) -> str:
    """`text` with every character a terminal would not show as itself (a control, a format
    character that reorders or hides what follows, a blank other than the space) as `\\uXXXX`."""
    return "".join(c if c == " " or c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def summary(data: dict[str, Any]) -> list[str]:
    """Every key the file sets with its value, then the keys trust lets it set."""
    import json

    from agent_cli.cli.config.repo_keys import RULES, USER, set_keys
    from agent_cli.cli.config.settings import without_credentials
    from agent_cli.core.redact import redact

    if not data:
        return ["its .agentrc sets nothing"]
    shown = []
    for top, whole in data.items():
        # as doctor shows them: a server's env values, an address's credentials, key shapes
        masked = without_credentials(whole) if top == "mcp_servers" else whole
        for key, value in set_keys({top: masked}):
            # whole, every character visible: what is trusted is all that is shown
            text = _visible(redact(json.dumps(value, ensure_ascii=False, default=str)))
            if RULES.get(top, USER) is USER:  # a secret or `home`: never used from here
                text = "(ignored: a repository's .agentrc never sets it)"
            shown.append(f"{key} = {text}")
    lines = ["its .agentrc now sets: " + "; ".join(shown)]
    trusted = [k for k in data if RULES.get(k, USER).kind in ("trust", "limit")]
    if trusted:
        lines.append(
            "now that it is trusted it may set: "
            + ", ".join(trusted)
            + " (a limit even when looser than yours)"
        )
    return lines
