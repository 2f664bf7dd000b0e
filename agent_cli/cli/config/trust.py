"""Which repositories' `.agentrc` the user trusts, kept in the user's own state, never in a repo.

A repository's `.agentrc` arrives with a clone. Its `base_url` would receive the API key in
every request, so endpoint keys apply only when the user ran `agent trust` in that
repository, and only while the file is byte-for-byte what the user trusted (its SHA-256 is
recorded): a later pull that changes it asks for trust again.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_cli.core import atomic
from agent_cli.core.atomic import write_atomic
from agent_cli.core.errors import ConfigError


def trust_file(env: dict[str, str] | None = None) -> Path:
    """Where trust is recorded: AGENT_TRUST_FILE, else $XDG_CONFIG_HOME/agent/trusted.json."""
    env = dict(os.environ) if env is None else env
    if env.get("AGENT_TRUST_FILE"):
        return Path(env["AGENT_TRUST_FILE"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "agent" / "trusted.json"


def _digest(rc: Path, content: bytes | None = None) -> str:
    """The SHA-256 of `content`, the .agentrc as it was read (else read now; "" for none)."""
    if content is not None:
        return hashlib.sha256(content).hexdigest()
    return hashlib.sha256(rc.read_bytes()).hexdigest() if rc.is_file() else ""


MAX_TRUST_BYTES = 4 * atomic.MiB


def _load(path: Path) -> dict[str, dict[str, Any]]:
    """The trusted repositories: a regular file (no link followed), bounded, strict JSON."""
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        data = atomic.read_json(path, MAX_TRUST_BYTES)
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"{path}: the trusted-repositories file cannot be read ({e})",
            "fix it or delete it (every repository becomes untrusted)",
        ) from None
    repos = data.get("repos") if isinstance(data, dict) else None
    return (
        {k: v for k, v in repos.items() if isinstance(v, dict)} if isinstance(repos, dict) else {}
    )


def status(repo: Path, env: dict[str, str] | None = None, content: bytes | None = None) -> str:
    """ "trusted", "changed" (trusted, but its .agentrc changed since) or "untrusted".

    `content` is the .agentrc as the caller read it, to judge the very bytes it uses: read a
    second time, the file could have changed in between."""
    entry = _load(trust_file(env)).get(str(Path(repo).resolve()))
    if entry is None:
        return "untrusted"
    digest = _digest(Path(repo) / ".agentrc", content)
    return "trusted" if entry.get("agentrc_sha256") == digest else "changed"


def record(
    repo: Path,
    env: dict[str, str] | None = None,
    revoke: bool = False,
    content: bytes | None = None,
) -> Path:
    """Trust `repo`'s .agentrc (or forget it with `revoke`): `content`, the bytes the user was
    shown, else the file as it is now; returns the file written."""
    path = trust_file(env)
    repos = _load(path)
    key = str(Path(repo).resolve())
    if revoke:
        repos.pop(key, None)
    else:
        repos[key] = {
            "agentrc_sha256": _digest(Path(repo) / ".agentrc", content),
            "trusted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"repos": repos}, indent=1, sort_keys=True) + "\n")
    except OSError as e:  # a read-only or missing HOME (a service account's /nonexistent)
        raise ConfigError(
            f"cannot record trust in {path}: {e.strerror or e}"
            + (f" ({e.filename})" if e.filename and str(e.filename) != str(path) else ""),
            "set AGENT_TRUST_FILE or XDG_CONFIG_HOME to a writable place; nothing was recorded",
        ) from None
    return path
