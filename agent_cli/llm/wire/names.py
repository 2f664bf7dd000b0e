"""The offered tool a call's name means, when a server sends it dressed.

Servers that render a model's own tool-call format into `tool_calls` sometimes leave parts
of it in the name: gpt-oss's harmony recipient (`functions.read_file`), its channel marker
(`read_file<|channel|>commentary`), or whitespace around it. Such a name is read as the
offered tool it holds; a name that holds none is left as it is, for the caller to refuse.
Plain string operations, no regular expressions: the name comes from the model.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIXES = ("functions.", "function.", "tools.")
MARKER = "<|"  # where a harmony control token begins


def offered_name(name: str, offered: Iterable[str]) -> str:
    """`name`, or the offered tool it holds once what servers leave around it is taken off."""
    names = set(offered)
    if name in names:
        return name
    bare = name.split(MARKER, 1)[0].strip()
    for prefix in PREFIXES:
        bare = bare.removeprefix(prefix)
    bare = bare.split(None, 1)[0] if bare.strip() else bare
    return bare if bare in names else name
