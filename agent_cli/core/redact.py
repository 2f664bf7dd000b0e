"""Remove API keys and tokens from text before it is stored or shown."""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

# Each pattern's group "keep" (when present) is left in place; the rest of the match is masked.
_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),  # OpenAI (sk-..., sk-proj-...)
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key ids
    re.compile(r"(?i)(?P<keep>authorization\s*[:=]\s*(?:bearer\s+|basic\s+|token\s+)?)[^\s\"']+"),
    re.compile(
        r"(?i)(?P<keep>\b(?:api[_-]?key|secret|password|token)\s*[:=]\s*[\"']?)[A-Za-z0-9_\-./+]{12,}"
    ),
]


def _mask(m: re.Match[str]) -> str:
    return (m.groupdict().get("keep") or "") + MASK


def redact(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """`text` with known key shapes and each exact secret in `secrets` replaced by a mask."""
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, MASK)
    for pat in _PATTERNS:
        text = pat.sub(_mask, text)
    return text


def redact_all(value: Any, secrets: tuple[str, ...] | list[str] = ()) -> Any:
    """`value` with every string it holds (in lists and dict values, at any depth) redacted."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [redact_all(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: redact_all(v, secrets) for k, v in value.items()}
    return value
