"""What the repository's own code says a goal is about: the items tied to the code it names.

A goal names the work ("the number formatting tests", "KiB and kB style units"); an item
names the code (`intcomma`, `tests/test_bench_x.py`, the `suffixes` dict). The repository
connects the two: src/humanize/number.py defines `intcomma`, and the `suffixes` of
filesize.py hold the strings "KiB" and "kB". The map reads the repository's Python files
with `ast` (at most MAX_FILES of them and MAX_BYTES in all, regular files only and never
through a symbolic link, hidden and virtualenv folders left out; read again only when a
file changed) into units, each function, class, method
and module-level name, scored on its path and name (twice) and the start of its docstring
and short strings; and files, each scored on its path (twice), the names it defines and the
names it uses from other files with their files' paths (what a test file tests). BM25
(lexical.py) scores the goal against both at once (one scale); an item's score is the best
of the units it names (in its text, command or task) and the files it names or is attached
to (`files`). A procedure with a file is scored by its files alone:
what it runs, not the task it was checked after.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_cli.agent.learn import lexical
from agent_cli.core import atomic
from agent_cli.core.protocols import Recalled

MAX_FILES = 400
MAX_BYTES = 3_000_000
MAX_FILE_BYTES = 400_000
DESCRIPTION_CHARS = 300  # of a unit's docstring and strings, scored
STRING_CHARS = 60  # a string constant longer than this is prose, not a name or a unit
SKIP_DIRS = frozenset(
    {"node_modules", "venv", "site-packages", "__pycache__", "build", "dist", "env"}
)
_PATH = re.compile(r"[\w./-]+\.py\b")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_READ: dict[str, tuple[tuple[list[str], tuple[tuple[int, int], ...]], CodeMap]] = {}


@dataclass
class CodeMap:
    """The repository's units and its Python files, each with the words it is scored on."""

    names: list[str] = field(default_factory=list)  # unit -> its name
    texts: list[str] = field(default_factory=list)  # unit -> the words it is scored on
    by_name: dict[str, list[int]] = field(default_factory=dict)  # name -> its units
    files: dict[str, str] = field(default_factory=dict)  # file -> the words it is scored on

    def ranking(self, goal: str, items: Sequence[Recalled]) -> list[tuple[float, Recalled]]:
        """The `items` tied to a unit or a file the goal's words score, best first, with
        their score (the best of its units' and files')."""
        paths = list(self.files)
        both = lexical.scores(goal, [*self.texts, *self.files.values()])  # one scale for both
        unit_score = both[: len(self.texts)]
        file_score = dict(zip(paths, both[len(self.texts) :], strict=True))
        scored = []
        for item in items:
            said = f"{item.text} {item.metadata.get('command', '')} {item.metadata.get('task', '')}"
            files = [
                file_score.get(path.split("::")[0], 0.0)
                for path in {*_PATH.findall(said), *_attached(item)}
            ]
            if item.kind == "procedure" and files:  # what it runs, not what its task said
                best = max(files)
            else:
                named = {u for name in set(_NAME.findall(said)) for u in self.by_name.get(name, ())}
                best = max([*files, *(unit_score[u] for u in named)], default=0.0)
            if best > 0:
                scored.append((best, item))
        scored.sort(key=lambda pair: -pair[0])
        return scored


def _attached(item: Recalled) -> list[str]:
    raw = item.metadata.get("files")
    try:
        files = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return []
    return [str(p) for p in files] if isinstance(files, dict) else []


def read(root: Path) -> CodeMap:
    """The map of the Python files under `root`, within the bounds above (read again only
    when a file was added, removed or changed since the last read of `root`)."""
    files = _python_files(root)
    stamp = tuple(_stamp(root / rel) for rel in files)
    key = str(root.resolve())
    cached = _READ.get(key)
    if cached is not None and cached[0] == (files, stamp):
        return cached[1]
    got = _read(root, files)
    _READ.clear()  # one repository at a time: a run works in one
    _READ[key] = ((files, stamp), got)
    return got


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _read(root: Path, files: list[str]) -> CodeMap:
    out = CodeMap()
    defined_in: dict[str, set[str]] = {}
    used: dict[str, set[str]] = {}
    total = 0
    for rel in files:
        try:  # a repository's file: a regular one, never through a link, bounded
            data = atomic.read_bytes(root / rel, min(MAX_FILE_BYTES, MAX_BYTES - total))
            total += len(data)
            source = data.decode("utf-8", errors="replace")
            tree = ast.parse(source)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # UnsafeFile is a ValueError; too deep a nesting, a RecursionError
        mine = defined_in.setdefault(rel, set())
        for name, text in _units(tree):
            out.by_name.setdefault(name, []).append(len(out.names))
            out.names.append(name)
            # the path and the name say what a unit is about; its words only add to them
            out.texts.append(f"{rel} {name} {rel} {name} {text[:DESCRIPTION_CHARS]}")
            mine.add(name)
        used[rel] = set(_NAME.findall(source))  # every name it says: a walk costs far more
    definer = {name: out.texts[units[0]].split(" ", 1)[0] for name, units in out.by_name.items()}
    for rel, names in used.items():  # a file by its path, what it defines and whose code it uses
        others = sorted(n for n in names - defined_in[rel] if n in definer)
        out.files[rel] = " ".join(
            [rel, rel, *sorted(defined_in[rel]), *(f"{n} {definer[n]}" for n in others)]
        )
    return out


def _python_files(root: Path) -> list[str]:
    """Up to MAX_FILES Python files under `root`, by path, hidden folders left out."""
    found: list[str] = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        base = Path(here).relative_to(root)
        for name in sorted(files):
            if name.endswith(".py"):
                found.append((base / name).as_posix())
                if len(found) >= MAX_FILES:
                    return found
    return found


def _units(tree: ast.Module) -> list[tuple[str, str]]:
    """(name, docstring and short strings) of each definition and module-level name."""
    out: list[tuple[str, str]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            strings = " ".join(_strings(node))
            out += [(t.id, strings) for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append(_described(node))
            if isinstance(node, ast.ClassDef):
                out += [
                    _described(sub)
                    for sub in node.body
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
    return out


def _described(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> tuple[str, str]:
    return node.name, f"{ast.get_docstring(node) or ''} {' '.join(_strings(node))}"


def _strings(node: ast.AST) -> list[str]:
    """The short string constants in `node`, the first DESCRIPTION_CHARS of them: the rest
    would not be scored."""
    out: list[str] = []
    size = 0
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and len(n.value) <= STRING_CHARS
        ):
            out.append(n.value)
            size += len(n.value) + 1
            if size >= DESCRIPTION_CHARS:
                break
    return out
