"""Remove API keys and tokens from text before it is stored, shown or sent.

A secret is a configured value (the API keys and the memory token, masked wherever they
occur) or a known key shape (OpenAI, GitHub and AWS keys, an `Authorization:` value, a value
after `api_key=`, `secret:`, `password=`, `token:`). Masking is idempotent, and cheap enough to
run on every request: each shape is looked for at the places its literal start occurs (a
plain substring search), never by trying a pattern at every character. Where settings are
shown, `mask_url_credentials` also masks what an address carries (`user:password@`, query
values), and `redact_argv` what a command line names as a credential (`--token VALUE`,
`--password=VALUE`, `API_KEY=VALUE`), which has no shape of its own.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel

from agent_cli.core import strictjson

MASK = "[REDACTED]"
MIN_SECRET = 6  # a shorter configured value would mask ordinary words
MAX_JSON_DEPTH = 64

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class _Shape:
    """One key shape: the literal starts it is looked for at, and its pattern from there.

    `fold`: the starts and the pattern ignore case; `word`: a start must begin a word. The
    pattern's group "keep" (when present) is left in place; the rest of the match is masked.
    """

    def __init__(
        self, starts: tuple[str, ...], pattern: str, fold: bool = False, word: bool = True
    ):
        flags = re.IGNORECASE if fold else 0
        self.starts, self.fold, self.word = starts, fold, word
        self.pattern = re.compile(pattern, flags)
        # the same shape searched everywhere, for a text whose lower case shifts positions
        self.anywhere = re.compile((r"\b" if word else "") + pattern, flags)


_SHAPES = (
    _Shape(("sk-",), r"sk-[A-Za-z0-9_\-]{16,}"),  # OpenAI (sk-..., sk-proj-...)
    _Shape(("gh",), r"gh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    _Shape(("github_pat_",), r"github_pat_[A-Za-z0-9_]{20,}"),
    _Shape(("AKIA", "ASIA"), r"(?:AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key ids
    _Shape(
        ("authorization",),
        r"(?P<keep>authorization\s*[:=]\s*(?:bearer\s+|basic\s+|token\s+)?)[^\s\"']+",
        fold=True,
        word=False,
    ),
    _Shape(
        ("api", "secret", "password", "token"),
        r"(?P<keep>(?:api[_-]?key|secret|password|token)\s*[:=]\s*[\"']?)[A-Za-z0-9_\-./+]{12,}",
        fold=True,
    ),
)


def _mask(m: re.Match[str]) -> str:
    return (m.groupdict().get("keep") or "") + MASK


def _in_word(text: str, at: int) -> bool:
    """Whether the character before `at` is part of a word (so no word starts at `at`)."""
    return at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")


def _starts(shape: _Shape, text: str, hay: str) -> list[int]:
    """Every position in `text` where one of the shape's literal starts occurs, in order."""
    found: set[int] = set()
    for start in shape.starts:
        at = hay.find(start)
        while at != -1:
            if not (shape.word and _in_word(text, at)):
                found.add(at)
            at = hay.find(start, at + 1)
    return sorted(found)


def _masked_shape(shape: _Shape, text: str) -> str:
    """`text` with every match of `shape` masked (itself when there is none)."""
    hay = text.lower() if shape.fold else text
    if len(hay) != len(text):  # a character whose lower case is longer: positions shift
        masked = shape.anywhere.sub(_mask, text)
        return text if masked == text else masked
    out: list[str] = []
    last = 0
    for at in _starts(shape, text, hay):
        if at < last:
            continue  # inside the previous match
        m = shape.pattern.match(text, at)
        if m:
            out += (text[last:at], _mask(m))
            last = m.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """`text` with known key shapes and each exact secret in `secrets` replaced by a mask."""
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET and secret in text:
            text = text.replace(secret, MASK)
    for shape in _SHAPES:
        text = _masked_shape(shape, text)
    return text


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_USERINFO = re.compile(r"(://)[^/@?#]*@")
_QUERY_VALUE = re.compile(r"([?&;][^=&;#]*=)[^&;#]+")


def mask_url_credentials(text: str) -> str:
    """`text` with the credentials of every address in it masked: a `user:password@` and the
    value of each query parameter (`?api_key=***`), which a server's address may carry."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: _QUERY_VALUE.sub(r"\1***", _USERINFO.sub(r"\1***@", m[0])), text)


def url_secrets(url: str) -> list[str]:
    """The credentials an address carries, as values to redact wherever they occur: the
    password of its `user:password@` (the user when there is no password: a token given as
    the user, `https://TOKEN@host`), and the values of its query parameters whose names say
    they are credentials (`?api_key=...`, `&access_token=...`)."""
    parts = urlsplit(url)
    found = [parts.password or parts.username or ""]
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=False) if names_a_secret(k)]
    return [v for v in found if v]


def argv_secrets(argv: list[str]) -> list[str]:
    """The values a command line names as credentials (those `redact_argv` masks): the
    argument after an option that names one (`--api-key VALUE`), and the value of
    `--token=VALUE` or `SLACK_TOKEN=VALUE`."""
    return [argv[at][len(head) :] for at, head in _credential_args(argv)]


SECRET_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PAT", "APIKEY", "CREDENTIALS"})


def names_a_secret(name: str) -> bool:
    """Whether a name (an environment variable's, an option's without its dashes) says it holds
    a credential: a word of it is one (`PATH` is no `PAT`), or it ends in `KEY` (`PRIVATE_KEY`,
    `api-key`; not `KEYMAP`)."""
    words = name.upper().replace("-", "_").split("_")
    return bool(SECRET_WORDS & set(words)) or words[-1] == "KEY"


def redact_argv(argv: list[str], secrets: tuple[str, ...] | list[str] = ()) -> list[str]:
    """A command line to show, each argument redacted, and the values its own words call
    credentials masked: the argument after an option that names one (`--token VALUE`), and the
    value of `--token=VALUE` or `SLACK_TOKEN=VALUE`. The program (argv[0]) is left as it is."""
    out = [redact(arg, secrets) for arg in argv]
    for at, head in _credential_args(out):
        out[at] = head + MASK
    return out


def _credential_args(argv: list[str]) -> list[tuple[int, str]]:
    """Where a command line holds a credential its own words name: (the argument's index, what
    of it comes before the value: `--token=` of `--token=VALUE`, "" for the `VALUE` after
    `--api-key`). The program (argv[0]) is never one."""
    found = []
    for at in range(1, len(argv)):
        name, equals, value = argv[at].partition("=")
        if equals and value and _secret_name(name):
            found.append((at, f"{name}="))
        elif at > 1 and argv[at - 1].startswith("-") and _secret_name(argv[at - 1]):
            found.append((at, ""))
    return found


def _secret_name(word: str) -> bool:
    """Whether `word` is an option's or a variable's name (`--api-key`, `GITHUB_TOKEN`: no
    blank, no path, no `=`) that says it holds a credential."""
    name = word.lstrip("-")
    return bool(name) and all(c.isalnum() or c in "_-" for c in name) and names_a_secret(name)


def redact_all(value: T, secrets: tuple[str, ...] | list[str] = ()) -> T:
    """`value` with every string it holds (in lists, tuples, dict values and pydantic models'
    fields, at any depth) redacted; the very same object when nothing in it needed a mask."""
    if isinstance(value, BaseModel):
        return cast(T, redact_model(value, secrets))
    if isinstance(value, str):
        return cast(T, redact(value, secrets))  # the same string when nothing was masked
    if isinstance(value, (list, tuple)):
        items = [redact_all(v, secrets) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return cast(T, items if isinstance(value, list) else tuple(items))
    if isinstance(value, dict):
        masked = {k: redact_all(v, secrets) for k, v in value.items()}
        if all(masked[k] is v for k, v in value.items()):
            return value
        return cast(T, masked)
    return value


def redact_model(model: M, secrets: tuple[str, ...] | list[str] = ()) -> M:
    """`model` with every string field (nested ones too) redacted; itself when none needed it.

    A copy, not validated again: a mask longer than what it replaced never fails a length
    limit on the way out."""
    update = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        masked = redact_all(value, secrets)
        if masked is not value:
            update[name] = masked
    return model.model_copy(update=update) if update else model


def redact_json_text(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """JSON text with every string value in it redacted, still valid JSON; the same text when
    nothing needed a mask. Text that is no JSON is redacted as text."""
    try:
        data = strictjson.loads(text, MAX_JSON_DEPTH)
    except ValueError:
        return redact(text, secrets)
    masked = redact_all(data, secrets)
    if masked is not data:
        text = json.dumps(masked, ensure_ascii=False)
    for secret in secrets:  # a key of an object, which redact_all leaves
        if secret and len(secret) >= MIN_SECRET and secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_messages(
    messages: list[dict[str, Any]], secrets: tuple[str, ...] | list[str] = ()
) -> list[dict[str, Any]]:
    """Chat messages with every content and every echoed tool call's arguments redacted (the
    arguments stay valid JSON); the very same list when nothing needed a mask."""
    out = [_redacted_message(m, secrets) for m in messages]
    return messages if all(a is b for a, b in zip(out, messages, strict=True)) else out


def _redacted_message(
    message: dict[str, Any], secrets: tuple[str, ...] | list[str]
) -> dict[str, Any]:
    calls = message.get("tool_calls")
    rest = {k: v for k, v in message.items() if k != "tool_calls"} if calls else message
    masked = redact_all(rest, secrets)
    if not calls:
        return masked
    new_calls = [_redacted_call(c, secrets) for c in calls]
    if masked is rest and all(a is b for a, b in zip(new_calls, calls, strict=True)):
        return message
    return {**masked, "tool_calls": new_calls}


def _redacted_call(call: Any, secrets: tuple[str, ...] | list[str]) -> Any:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return redact_all(call, secrets)
    args = fn.get("arguments")
    masked_args = redact_json_text(args, secrets) if isinstance(args, str) else args
    rest = {k: v for k, v in call.items() if k != "function"}
    masked_rest = redact_all(rest, secrets)
    name = redact_all(fn.get("name"), secrets)
    if masked_args is args and masked_rest is rest and name is fn.get("name"):
        return call
    return {**masked_rest, "function": {**fn, "name": name, "arguments": masked_args}}
