"""A store's procedures as ways to check work: one per test file, the shared command once.

A repository that was worked in for a while holds a procedure for every test that was ever
checked, nearly all the same command on another file (`pytest -q ... tests/test_a.py`,
`... tests/test_b.py::test_c`). Those on the same file (another test of it, a `-k` selection)
say one thing: how to run that file's tests; the best ranked one stands for them. Past the
first procedure of a command, each other is shown as that command on its own target, a
short line, so that more of them fit a share.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Sequence

from agent_cli.core.protocols import Recalled


def shape(command: str) -> tuple[str, str, str]:
    """(the command with its test target as `{file}`, the file it runs, its target): the
    target is every Python file argument (`path.py`, `path.py::test`) and a `-k` selection."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    template: list[str] = []
    targets: list[str] = []
    skip = False
    for n, word in enumerate(words):
        if skip:
            skip = False
            targets.append(shlex.quote(word))
            continue
        if word == "-k" and n + 1 < len(words):
            skip = True
            targets.append(word)
            continue
        if ".py" in word:
            targets.append(word)
            if "{file}" not in template:
                template.append("{file}")
            continue
        template.append(word)
    files = [t.split("::")[0] for t in targets if ".py" in t]
    return " ".join(template), files[0] if files else "", " ".join(targets)


def one_per_file(ranked: Sequence[Recalled]) -> list[Recalled]:
    """The best ranked procedure of each (command, test file) of `ranked`, in its order; a
    procedure of no test file stands alone."""
    seen: set[tuple[str, str]] = set()
    out = []
    for item in ranked:
        template, file, _ = shape(_command(item))
        if file:
            if (template, file) in seen:
                continue
            seen.add((template, file))
        out.append(item)
    return out


def briefly(items: Sequence[Recalled]) -> list[Recalled]:
    """`items` in their order, each procedure after the first of its command shown as that
    command on its own target (the item is copied; its id and record are its own)."""
    first: dict[str, str] = {}
    out: list[Recalled] = []
    for item in items:
        if item.kind != "procedure":
            out.append(item)
            continue
        template, file, target = shape(_command(item))
        if not file or template not in first:
            if file:
                first[template] = item.id
            out.append(item)
            continue
        short = copy.copy(item)
        short.gist = f"the command of {first[template]} on {target}"
        out.append(short)
    return out


def _command(item: Recalled) -> str:
    command = item.metadata.get("command")
    if command:
        return str(command)
    text = item.text
    return text.split("`")[1] if text.count("`") >= 2 else text
