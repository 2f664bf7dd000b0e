"""Names an item mentions and names it defines: Python's ast when the text parses, a regex otherwise."""

from __future__ import annotations

import ast
import keyword
import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")

# Definitions in other languages and in text that does not parse (diffs, snippets, tracebacks):
# a keyword and a name, or `name = value` at the start of a line (`key=value`, without spaces,
# is left alone: logs are full of it). One pass, two groups.
_DEF_LINE = re.compile(
    r"^(?:[ \t+]*(?:(?:export|pub|public|private|static|async)[ \t]+)*"
    r"(?:def|class|function|func|fn|struct|interface|trait|enum|type|const|let|var)"
    r"[ \t]+\*?([A-Za-z_][A-Za-z0-9_]*)"
    r"|\+?([A-Za-z_][A-Za-z0-9_]*)(?:[ \t]*:[^=\n]*)?[ \t]+=(?!=))",
    re.MULTILINE,
)
_OTHER_HINTS = re.compile(r"function |func |fn |struct |interface |trait |enum |type |const |"
                          r"let |var | = ")

_NOT_NAMES = frozenset(keyword.kwlist) | {"self", "cls"}


def identifiers(text: str) -> frozenset[str]:
    """Every identifier-like word of two or more characters in `text`."""
    return frozenset(_IDENT.findall(text))


def definitions(text: str) -> tuple[str, ...]:
    """Names `text` defines: functions, classes, module- and class-level variables.

    Python's ast when the text has a `def` or `class` and parses; the line regex otherwise.
    """
    # Substring tests cost far less than a parse; most items (logs, outputs) fail them all.
    if "def " not in text and "class " not in text:
        return _regex_definitions(text) if _OTHER_HINTS.search(text) else ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _regex_definitions(text)
    names: list[str] = []
    _collect(tree.body, names, in_function=False)
    return _unique(names)


def _collect(body: list[ast.stmt], names: list[str], in_function: bool) -> None:
    """Walk statements only (expressions cannot define the names we index)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
            _collect(node.body, names, in_function=True)
        elif isinstance(node, ast.ClassDef):
            names.append(node.name)
            _collect(node.body, names, in_function=False)
        elif in_function:
            continue  # local variables are too common to say anything about relevance
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.extend(_target_names(target))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody"):
                _collect(getattr(node, field, []), names, in_function=False)
            for handler in getattr(node, "handlers", []):
                _collect(handler.body, names, in_function=False)


def _target_names(target: ast.expr) -> list[str]:
    """Plain names bound by an assignment target, including tuple unpacking."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for elt in target.elts for name in _target_names(elt)]
    return []


def _regex_definitions(text: str) -> tuple[str, ...]:
    """Definitions found line by line, for text that is not valid Python."""
    return _unique([keyword_name or assigned for keyword_name, assigned in _DEF_LINE.findall(text)])


def _unique(names: list[str]) -> tuple[str, ...]:
    """Names in first-seen order, without duplicates, keywords or one-letter names."""
    seen: dict[str, None] = {}
    for name in names:
        if len(name) > 1 and name not in _NOT_NAMES:
            seen.setdefault(name, None)
    return tuple(seen)


def rank_hits(by_id: list[str], exact: list[tuple[str, str]],
              folded: list[tuple[str, str]]) -> list[str]:
    """Ids best first: named by id, then defining exact names (more first), then any-case names.

    `exact` and `folded` are (id, name) pairs from a store's by_symbol(); among equals the
    newer id (larger number) comes first.
    """
    rank: dict[str, tuple[int, int]] = {item_id: (0, 0) for item_id in by_id}
    for tier, pairs in ((1, exact), (2, folded)):
        for item_id, _name in pairs:
            old_tier, matches = rank.get(item_id, (tier, 0))
            if old_tier == tier:
                rank[item_id] = (tier, matches - 1)
    return sorted(rank, key=lambda i: (*rank[i], -_number(i)))


def _number(item_id: str) -> int:
    """N of an id "mN", 0 otherwise."""
    return int(item_id[1:]) if item_id[1:].isdigit() else 0
