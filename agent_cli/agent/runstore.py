"""Runs on disk: `<state>/runs/<run-id>/state.json` (atomic) and `trajectory.jsonl` (appended).

state.json is replaced whole after every step (temp file, fsync, rename), so a killed
process leaves either the previous or the next state, never half of one. Run ids sort by
time: `YYYYMMDD-HHMMSS-xxxx`.
"""

from __future__ import annotations

import json
import secrets as _secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent_cli.errors import AgentError, StorageError
from agent_cli.redact import redact
from agent_cli.workspace.atomic import append_line, write_atomic

FINISHED = {"verified", "planned", "skipped"}  # skipped: the human chose to go on without a task


def new_run_id(now: datetime | None = None) -> str:
    """A fresh run id that sorts by start time."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{_secrets.token_hex(2)}"


def utc_now() -> str:
    """The current UTC time in ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunStore:
    """Reads and writes the runs under one state directory."""

    def __init__(self, state_dir: Path, secrets: tuple[str, ...] = ()) -> None:
        self.root = Path(state_dir) / "runs"
        self.secrets = secrets

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    def save(self, run_id: str, state: dict[str, Any]) -> None:
        """Replace the run's state.json atomically (secrets redacted)."""
        self.run_dir(run_id).mkdir(parents=True, exist_ok=True)
        text = json.dumps(state, indent=1, ensure_ascii=False)
        write_atomic(self.run_dir(run_id) / "state.json", redact(text, self.secrets))

    def log(self, run_id: str, record: dict[str, Any]) -> None:
        """Append one record to the run's trajectory (secrets redacted)."""
        self.run_dir(run_id).mkdir(parents=True, exist_ok=True)
        record = {"t": utc_now(), **record}
        line = json.dumps(record, ensure_ascii=False, default=str)
        append_line(self.run_dir(run_id) / "trajectory.jsonl", redact(line, self.secrets))

    def load(self, run_id: str) -> dict[str, Any]:
        """The saved state of a run; a clear error when missing or unreadable."""
        path = self.run_dir(run_id) / "state.json"
        if not path.exists():
            raise AgentError(f"no run {run_id!r} in {self.root}", "`agent runs` lists the runs")
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StorageError(f"{path} cannot be read: {e}",
                               "the file is left as it is; inspect or move it aside") from None

    def list(self) -> list[dict[str, Any]]:
        """Every run's summary, oldest first."""
        out = []
        for d in sorted(self.root.glob("*/state.json")):
            try:
                s = json.loads(d.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                s = {"run_id": d.parent.name, "status": "unreadable", "goal": ""}
            out.append(s)
        return out

    def latest_unfinished(self) -> str | None:
        """The newest run that did not end with every task verified."""
        for s in reversed(self.list()):
            if s.get("status") not in FINISHED and s.get("status") != "unreadable":
                return s["run_id"]
        return None
