"""Ordered, named upgrades of a saved state.json, each from one schema version to the next.

A record without `schema_version` is version 1: what agent 0.1.0 and every version before
the field was written. `upgrade()` applies, in order, every migration past the record's
version; migration N (1-based in `MIGRATIONS`) turns version N into N + 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_cli.core.errors import StorageError

Record = dict[str, Any]

# Keys that versions up to 0.1.0 saved in agent_state; the budgets are the loop's and the
# attempts each task's since.
_OLD_AGENT_STATE_KEYS = ("budget_steps", "budget_usd", "spent_usd", "attempts")


def m001_base_branch_and_learned(record: Record) -> Record:
    """The branch the run started from and what it learned are fields (absent: none)."""
    record.setdefault("base_branch", "")
    record.setdefault("learned", {})
    return record


def m002_agent_state_without_budgets(record: Record) -> Record:
    """agent_state no longer carries the budgets and attempts of 0.1.0."""
    state = record.get("agent_state")
    if isinstance(state, dict):
        for key in _OLD_AGENT_STATE_KEYS:
            state.pop(key, None)
    return record


def m003_task_statuses(record: Record) -> Record:
    """A task may be `failed` (an attempt failed, another follows) or `nothing_to_do`; a task
    saved `running` by an earlier version keeps its meaning: an attempt cut short."""
    return record


def m004_started_with(record: Record) -> Record:
    """The endpoint, models and limits the run was started with are a field (absent: none)."""
    record.setdefault("started_with", {})
    return record


MIGRATIONS: list[Callable[[Record], Record]] = [
    m001_base_branch_and_learned,
    m002_agent_state_without_budgets,
    m003_task_statuses,
    m004_started_with,
]
SCHEMA_VERSION = len(MIGRATIONS) + 1


def upgrade(record: Record, where: str) -> Record:
    """`record` brought to SCHEMA_VERSION; a StorageError for one written by a newer agent."""
    version = record.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise StorageError(
            f"{where} cannot be read: schema_version: {version!r} is not a version",
            "the file is left as it is; inspect or move it aside",
        )
    if version > SCHEMA_VERSION:
        raise StorageError(
            f"{where} was written by a newer agent (schema {version}; this one reads up to "
            f"{SCHEMA_VERSION})",
            "resume it with the agent version that wrote it; the file is left as it is",
        )
    for migration in MIGRATIONS[version - 1 :]:
        record = migration(record)
    record["schema_version"] = SCHEMA_VERSION
    return record
