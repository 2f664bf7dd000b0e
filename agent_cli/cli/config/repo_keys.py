"""What a repository's `.agentrc` may set, key by key, and the repository layer that follows.

A repository's file arrives with a clone, so every settings key has one rule (`RULES`):

- `free`: it changes only how the agent works here (`worktree`, `recall_cooldown_steps`, the
  recall thresholds: they choose among this repository's own items, within the digest's share).
- `limit`: a number or choice that bounds what is spent or how long anything runs; untrusted,
  its value is taken only when it is stricter than yours (or the default).
- `safety`: `approval`, `sandbox`, `deny_*`: only ever tightened, trusted or not.
- `trust`: it chooses where data goes, what runs or what is spent (endpoints, models, prices,
  the memory server and its database, MCP servers, hooks): applied only once the user trusts
  the file (`agent trust`).
- `user`: never from a repository (`home`; the secrets are refused before this).

Each value ignored is named in one notice line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_cli.tools.hooks.config import combined

Kind = Literal["free", "limit", "safety", "trust", "user"]


@dataclass(frozen=True)
class Rule:
    """How a repository's value of one key is taken: its kind, and for an enumerated limit or
    safety key its values from the strictest to the loosest (a number: the lower the stricter,
    except `unbounded`, the number that means no bound at all, which is the loosest)."""

    kind: Kind
    order: tuple[Any, ...] = ()
    unbounded: float | None = None

    def stricter_or_equal(self, value: Any, current: Any) -> bool:
        """Whether `value` bounds at least as much as `current`."""
        if self.order:
            return bool(self.order.index(value) <= self.order.index(current))
        if self.unbounded is not None and self.unbounded in (value, current):
            return bool(current == self.unbounded)
        return bool(value <= current)


FREE, LIMIT, TRUST, USER = Rule("free"), Rule("limit"), Rule("trust"), Rule("user")
ROLES = ("planner", "executor", "verifier")
ROLE_RULES = {f"{r}_{k}": TRUST for r in ROLES for k in ("model", "base_url", "api_key_env")}

RULES: dict[str, Rule] = {
    "model": TRUST,
    "base_url": TRUST,
    "api_key": USER,
    "embedding_model": TRUST,
    "max_steps": LIMIT,
    "task_max_steps": LIMIT,
    "budget_usd": LIMIT,
    # a lower price lifts the budget, any price set bills a local server: what is spent
    "price_input_per_mtok": TRUST,
    "price_output_per_mtok": TRUST,
    "price_cached_input_per_mtok": TRUST,
    "memory_max_tokens": LIMIT,  # the tokens of every request
    "reserved_output_tokens": Rule("limit", unbounded=0),  # 0: replies sent without a cap
    "tool_output_max_tokens": LIMIT,
    "recall_cooldown_steps": FREE,
    "memory_associate_k": FREE,
    "memory_associate_min_score": FREE,
    "memory_episode_max_distance": FREE,
    "command_timeout_s": LIMIT,
    "request_timeout_s": LIMIT,
    "max_retries": LIMIT,
    "retry_backoff_s": LIMIT,
    "approval": Rule("safety", ("ask", "auto")),
    "sandbox": Rule("safety", ("bwrap", "none")),
    "deny_commands": Rule("safety"),  # added to the user's
    "home": USER,
    "context_window": LIMIT,
    "replan": Rule("limit", ("off", "after_task")),
    "max_replans": LIMIT,
    "final_summary": Rule("limit", (False, True)),  # one more request
    "memory_ttl_days": TRUST,  # expiry archives every repository's unused items in the store
    "memory_digest_tokens": LIMIT,
    "memory_url": TRUST,
    "memory_tenant": TRUST,
    "memory_database": TRUST,
    "memory_token": USER,
    "hooks": TRUST,  # run after the user's own
    **ROLE_RULES,
    "worktree": FREE,
    "mcp_servers": TRUST,  # joined to the user's, by name
    "deny_tools": Rule("safety"),  # added to the user's
}


def keys_of(kind: Kind) -> list[str]:
    """The keys whose rule is `kind`, in the settings' order."""
    return [k for k, rule in RULES.items() if rule.kind == kind]


def added(lower: list[str], repo: list[str]) -> list[str]:
    """`lower`'s entries, then the repository's that `lower` lacks."""
    return list(lower) + [x for x in repo if x not in lower]


ADDED = ("deny_commands", "deny_tools")  # a repository's are added to the user's, in every layer
MERGED: dict[str, Callable[[Any, Any], Any]] = {
    "deny_commands": added,
    "deny_tools": added,
    "hooks": combined,  # a trusted repository's hooks run after the user's, never instead
}


def restrict(
    data: dict[str, Any], parsed: object, lower: object, trusted: str, rc: Path
) -> tuple[dict[str, Any], str]:
    """The repository layer `data` (`parsed`: its values validated, as Settings) without what it
    may not set given `lower` (the Settings of the user's file and the defaults) and `trusted` (`trust.status`), and one
    notice naming what was dropped."""
    kept: dict[str, Any] = {}
    untrusted: list[str] = []
    loosening: list[str] = []
    for key, value in data.items():
        rule = RULES.get(key, USER)
        current, new = getattr(lower, key, None), getattr(parsed, key, None)
        if rule.kind == "user" or (
            rule.kind == "safety" and rule.order and not rule.stricter_or_equal(new, current)
        ):
            loosening.append(f"{key} = {value!r}")
        elif trusted != "trusted" and (
            rule.kind == "trust"
            or (rule.kind == "limit" and not rule.stricter_or_equal(new, current))
        ):
            untrusted.append(key)
        else:
            kept[key] = MERGED[key](current, value) if key in MERGED else value
    parts = []
    if untrusted:
        why = "it changed since you trusted it" if trusted == "changed" else "it is not trusted"
        parts.append(
            f"{', '.join(sorted(untrusted))} ignored ({why}; run `agent trust` in the "
            "repository to use them; until then its limits may only be stricter than yours)"
        )
    if loosening:
        parts.append(
            f"{', '.join(loosening)} ignored (a repository's .agentrc may only tighten "
            "safety and never sets home)"
        )
    return kept, (f"{rc}: " + "; ".join(parts)) if parts else ""


def set_keys(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Every key a parsed TOML file sets, as dotted paths (a key that is not bare quoted, an
    array of tables indexed: `hooks.pre_tool[0].command`), with its value, in the file's order."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        path = prefix + _toml_key(key)
        if isinstance(value, dict) and value:
            out += set_keys(value, path + ".")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for n, table in enumerate(value):
                out += set_keys(table, f"{path}[{n}].")
        else:
            out.append((path, value))
    return out


def _toml_key(key: str) -> str:
    """`key` as TOML writes it: bare when it may be, else quoted."""
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else json.dumps(key, ensure_ascii=False)
