"""What the console shows of a text or an event: the text as a terminal shows it, then redacted.

Redacting the text as it came is not enough: an escape sequence inside a key
(`sk-ab<ESC>[mcd…`) keeps it from matching, and taking the sequence out for display joins
it again; a tool call's arguments are JSON, where `\\u0041` hides an `A` until they are
decoded for display. So what is shown is redacted as it came, then again once it is the text
that shows: cleaned of control sequences (`core/text.clean`), the arguments decoded. What a
command prints of what it read from disk (a run's goal, a memory item) is shown so too, in a
table or as JSON, where a `print` of a string would join a key as a terminal does.

Characters a terminal draws as nothing (zero-width spaces and joiners, a soft hyphen, a byte
order mark: Unicode's format characters) hide a key the same way, but they also hold emoji
sequences and some scripts together: they are taken out of a text only when that shows a
secret (`_seen`).
"""

from __future__ import annotations

import json
import unicodedata
from typing import TypeVar

from pydantic import BaseModel

from agent_cli.core import strictjson
from agent_cli.core.events import ToolCalled
from agent_cli.core.redact import MASK, MAX_JSON_DEPTH, redact, redact_json_text, redact_model
from agent_cli.core.text import clean, each_string

Secrets = tuple[str, ...] | list[str]
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def shown_text(text: str, secrets: Secrets = ()) -> str:
    """`text` as the console shows it: redacted, cleaned, and redacted again."""
    return redact(_seen(redact(text, secrets), secrets), secrets)


def shown_values(value: T, secrets: Secrets = ()) -> T:
    """`value` with every string it holds (`each_string`: in lists, dicts, models) as
    `shown_text` has it: what a command prints, as a table or as JSON, of what it read."""
    return each_string(value, lambda text: shown_text(text, secrets))


def shown_event(ev: M, secrets: Secrets = ()) -> M:
    """`ev` as the console shows it: each string as `shown_text` has it (at any depth), and a
    tool call's arguments, when they are JSON, with each string in them decoded first."""
    ev = redact_model(ev, secrets)
    shown = each_string(ev, lambda text: _seen(text, secrets))
    if isinstance(ev, ToolCalled):  # from the arguments as they came, not as cleaned
        shown = shown.model_copy(update={"arguments": _shown_arguments(ev.arguments, secrets)})
    return redact_model(shown, secrets)


def kept_event(ev: M, secrets: Secrets = ()) -> M:
    """`ev` as a JSON line carries it: each string as it came, redacted, unless a terminal
    would show a secret in it (`shown_event`); that one as it shows, masked, so that a program
    printing the line's text cannot join a key either."""
    came = redact_model(ev, secrets)
    kept = each_string(came, lambda text: _masked_more(text, shown_text(text, secrets)))
    if isinstance(came, ToolCalled):
        shown = _shown_arguments(came.arguments, secrets)
        kept = kept.model_copy(update={"arguments": _masked_more(came.arguments, shown)})
    return kept


def _masked_more(came: str, shown: str) -> str:
    """`shown` when it masks more than `came` (a secret hidden until shown), else `came`."""
    return shown if shown.count(MASK) > came.count(MASK) else came


def _shown_arguments(arguments: str, secrets: Secrets) -> str:
    """JSON arguments with each string decoded, cleaned and redacted (written without \\u
    escapes, as they show); text that is no JSON, cleaned."""
    try:
        data = strictjson.loads(arguments, MAX_JSON_DEPTH)
    except ValueError:
        return _seen(arguments, secrets)
    seen = each_string(data, lambda text: _seen(text, secrets))
    return redact_json_text(json.dumps(seen, ensure_ascii=False), secrets)


def _seen(text: str, secrets: Secrets) -> str:
    """`text` cleaned (`core/text.clean`), and without the characters that show as nothing
    when taking them out shows a secret (one split by a zero-width space)."""
    shown = clean(text)
    if shown.isascii():
        return shown
    bare = "".join(ch for ch in shown if unicodedata.category(ch) != "Cf")
    return bare if bare != shown and redact(bare, secrets) != bare else shown
