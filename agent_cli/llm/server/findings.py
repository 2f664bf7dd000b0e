"""What probing a local server found, kept a day per (base URL, model) so the next run skips it.

One JSON file in the directory the caller names (the user's cache directory; the llm layer
does not read settings). It is written atomically; a file that is missing, unreadable,
oversized or not the expected shape is treated as empty, never as an error, and an entry
older than `MAX_AGE_S` is ignored and dropped on the next write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_cli.core.atomic import write_atomic

FILE_NAME = "servers.json"
MAX_AGE_S = 24 * 3600.0
MAX_BYTES = 256 * 1024  # far beyond MAX_ENTRIES entries: anything larger is not ours
MAX_ENTRIES = 100
VERSION = 1


class Findings:
    """The findings about one (base URL, model), read from and written to `directory`."""

    def __init__(
        self,
        directory: Path,
        base_url: str,
        model: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(directory) / FILE_NAME
        self.key = f"{base_url.rstrip('/')} {model}"
        self._clock = clock

    def get(self, name: str) -> tuple[bool, Any]:
        """(True, value) when `name` was found less than a day ago, else (False, None)."""
        entry = _entries(self.path).get(self.key, {})
        found = entry.get(name)
        if isinstance(found, dict) and "value" in found and self._fresh(found.get("at")):
            return True, found["value"]
        return False, None

    def put(self, name: str, value: Any) -> None:
        """Keep `value` (JSON) as the finding `name`; a write that fails is let go."""
        entries = {
            key: fresh
            for key, entry in _entries(self.path).items()
            if (fresh := {n: f for n, f in entry.items() if self._fresh_finding(f)})
        }
        entries.setdefault(self.key, {})[name] = {"value": value, "at": self._clock()}
        kept = sorted(entries, key=lambda k: _newest(entries[k]), reverse=True)[:MAX_ENTRIES]
        data = {"version": VERSION, "servers": {k: entries[k] for k in kept}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True))
        except (OSError, ValueError, TypeError):
            pass  # a cache that cannot be written only means probing again next time

    def _fresh(self, at: Any) -> bool:
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            return False
        return 0 <= self._clock() - at < MAX_AGE_S

    def _fresh_finding(self, finding: Any) -> bool:
        return isinstance(finding, dict) and "value" in finding and self._fresh(finding.get("at"))


def _newest(entry: dict[str, Any]) -> float:
    return max((float(f["at"]) for f in entry.values()), default=0.0)


def _entries(path: Path) -> dict[str, dict[str, Any]]:
    """The file's entries by key; {} for a file that is not a findings file of this version."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or data.get("version") != VERSION:
        return {}
    return {k: v for k, v in servers.items() if isinstance(k, str) and isinstance(v, dict)}
