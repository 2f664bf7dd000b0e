"""Model endpoint addresses, as the settings and a saved run accept them."""

from __future__ import annotations

from urllib.parse import urlsplit

EXAMPLE = "http://127.0.0.1:8080/v1"


def endpoint(url: str) -> str:
    """`url` when it is an http(s) address with a host and no credentials in it; else a
    ValueError that says what is expected (`localhost:8080/v1` has no scheme, say)."""
    parts = urlsplit(url)
    try:
        _ = parts.port  # reading it validates it
    except ValueError:
        raise ValueError("the port is not a number between 0 and 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an endpoint address like {EXAMPLE}")
    if parts.username or parts.password:
        raise ValueError("put the key in OPENAI_API_KEY, not in the endpoint's address")
    return url
