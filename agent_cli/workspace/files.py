"""File tools for the model, confined to the repository: read, write, edit, search, list."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
from pathlib import Path
from typing import Iterable, Iterator

from agent_cli.errors import ToolError
from agent_cli.workspace.atomic import write_atomic

_BINARY_SNIFF_BYTES = 8192
_MAX_LINE_CHARS = 2000
_MAX_DIFF_LINES = 300
_MAX_SEARCH_HITS = 100
_MAX_SEARCH_FILE_BYTES = 5_000_000
_MAX_LIST_ENTRIES = 500


class Files:
    """Path-safe file operations on one repository; refusals raise ToolError and change nothing."""

    def __init__(self, root: Path, deny_write: Iterable[Path] = (), protected: Iterable[str] = frozenset(),
                 max_read_lines: int = 400) -> None:
        self.root = Path(os.path.realpath(root))
        self.deny_write = [Path(os.path.realpath(p)) for p in deny_write]
        self.protected = {p.rstrip("/") for p in protected}
        self.max_read_lines = max_read_lines

    def resolve(self, path: str | Path, write: bool = False) -> Path:
        """The real path of `path` (relative to the root), refused when outside or not writable."""
        text = str(path)
        if not text.strip():
            raise ToolError("the path is empty; give a path relative to the repository root")
        if "\0" in text:
            raise ToolError("the path contains a NUL character")
        given = Path(text) if os.path.isabs(text) else self.root / text
        real = Path(os.path.realpath(given))
        if not _within(real, self.root):
            raise ToolError(self._outside_message(text, given, real))
        if write:
            self._check_writable(text, real)
        return real

    def rel(self, real: Path) -> str:
        """`real` as a repository-relative path for messages ("." for the root)."""
        return real.relative_to(self.root).as_posix() or "."

    def read(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Numbered lines of a text file, at most max_read_lines per call, with a note when paged."""
        real = self._existing_file(path)
        if _looks_binary(real):
            return f"{self.rel(real)}: binary file, {real.stat().st_size} bytes; not shown"
        start = _line_number(start_line, "start_line", default=1)
        end = _line_number(end_line, "end_line", default=start + self.max_read_lines - 1)
        if end < start:
            raise ToolError(f"end_line {end} is before start_line {start}")
        end = min(end, start + self.max_read_lines - 1)
        try:
            shown, total = _read_range(real, start, end)
        except UnicodeDecodeError:
            return f"{self.rel(real)}: binary file, {real.stat().st_size} bytes; not shown"
        if total == 0:
            return f"{self.rel(real)}: empty file"
        if start > total:
            raise ToolError(f"start_line {start} is past the end of {self.rel(real)} ({total} lines)")
        last = start + len(shown) - 1
        width = len(str(last))
        body = "\n".join(f"{n:>{width}}  {line}" for n, line in enumerate(shown, start))
        if start == 1 and last == total:
            return body
        note = f"[lines {start}-{last} of {total} shown"
        if last < total:
            note += f"; read again with start_line={last + 1} (and end_line) to see more"
        return f"{body}\n{note}]"

    def write(self, path: str, content: str) -> str:
        """Create or replace a file with `content`; returns the unified diff of the change."""
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        real = self.resolve(path, write=True)
        if real.is_dir():
            raise ToolError(f"{self.rel(real)} is a directory")
        existed = real.exists()
        old = self._old_text(real) if existed else ""
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(real, content)
        except OSError as exc:
            raise ToolError(f"cannot write {self.rel(real)}: {exc.strerror or exc}") from exc
        rel, lines = self.rel(real), len(content.splitlines())
        if old is None:
            return f"replaced binary file {rel} with text ({lines} lines)"
        diff = _diff(old, content, rel)
        if not existed:
            return f"created file {rel} ({lines} lines)\n{diff}".rstrip("\n")
        return diff or f"{rel} already had this content; nothing changed"

    def edit(self, path: str, old: str, new: str) -> str:
        """Replace the one exact occurrence of `old` with `new`; returns the unified diff."""
        if not old:
            raise ToolError("old must not be empty; use write_file to create or replace a whole file")
        real = self._existing_file(path, write=True)
        text = self._old_text(real)
        if text is None:
            raise ToolError(f"{self.rel(real)} is a binary file; it cannot be edited as text")
        if "\r\n" in text and "\r\n" not in old and _count(text, old) == 0:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # the file uses CRLF
        self._check_single_match(real, text, old)
        if old == new:
            return f"old and new are the same; {self.rel(real)} was not changed"
        updated = text.replace(old, new, 1)
        try:
            write_atomic(real, updated)
        except OSError as exc:
            raise ToolError(f"cannot write {self.rel(real)}: {exc.strerror or exc}") from exc
        return _diff(text, updated, self.rel(real))

    def search(self, pattern: str, path: str | None = None) -> str:
        """Lines matching the regex `pattern` in text files under `path`, as `path:line: text`."""
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc
        base = self.resolve(path or ".")
        if not base.exists():
            raise ToolError(f"{path} does not exist")
        hits: list[str] = []
        total = 0
        for file in self._searchable_files(base):
            for number, line in _matching_lines(file, regex):
                total += 1
                if len(hits) < _MAX_SEARCH_HITS:
                    hits.append(f"{self.rel(file)}:{number}: {_clip(line.strip(), 300)}")
        if not hits:
            return f"no matches for {pattern!r} in {self.rel(base)}"
        if total > len(hits):
            hits.append(f"[... {total - len(hits)} more matches not shown; narrow the pattern or the path]")
        return "\n".join(hits)

    def list_dir(self, path: str = ".") -> str:
        """The entries of a directory, one a line, directories ending in '/'; .git is left out."""
        real = self.resolve(path)
        if not real.is_dir():
            raise ToolError(f"{path} is not a directory")
        names = sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(real) if e.name != ".git")
        if len(names) > _MAX_LIST_ENTRIES:
            names = names[:_MAX_LIST_ENTRIES] + [f"[... {len(names) - _MAX_LIST_ENTRIES} more entries]"]
        return "\n".join(names) or f"{self.rel(real)} is empty"

    def _outside_message(self, text: str, given: Path, real: Path) -> str:
        if _within(Path(os.path.normpath(given)), self.root):
            return f"{text} resolves through a symlink to {real}, outside the repository; it cannot be used"
        return f"{text} is outside the repository {self.root}; only paths inside it can be used"

    def _check_writable(self, text: str, real: Path) -> None:
        rel_parts = real.relative_to(self.root).parts
        if ".git" in rel_parts:
            raise ToolError(f"{text} is inside .git; git's own files are never written by the agent")
        for denied in self.deny_write:
            if _within(real, denied):
                raise ToolError(f"{text} is inside the agent's state directory {denied}; it cannot be written")
        rel = "/".join(rel_parts)
        for held in self.protected:
            if rel == held or rel.startswith(held + "/"):
                raise ToolError(f"{text} holds the user's uncommitted work; the agent leaves it untouched, "
                                "so change other files or ask the user")

    def _existing_file(self, path: str, write: bool = False) -> Path:
        real = self.resolve(path, write=write)
        if not real.exists():
            raise ToolError(f"{path} does not exist")
        if real.is_dir():
            raise ToolError(f"{path} is a directory; use list_dir or search")
        return real

    def _old_text(self, real: Path) -> str | None:
        """The file's text, or None when it is binary."""
        if _looks_binary(real):
            return None
        try:
            return real.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _check_single_match(self, real: Path, text: str, old: str) -> None:
        count = _count(text, old)
        if count == 1:
            return
        rel = self.rel(real)
        if count == 0:
            raise ToolError(f"old text not found in {rel} (0 matches); read the file and copy the exact "
                            "text, including whitespace and indentation")
        starts = [text.count("\n", 0, i) + 1 for i in _positions(text, old)][:10]
        raise ToolError(f"old text matches {count} times in {rel} (at lines {', '.join(map(str, starts))}); "
                        "include more surrounding lines so that it matches exactly once")

    def _searchable_files(self, base: Path) -> Iterator[Path]:
        candidates = [base] if base.is_file() else (self._git_files(base) or self._walk(base))
        for file in candidates:
            real = Path(os.path.realpath(file))
            if not _within(real, self.root) or ".git" in real.relative_to(self.root).parts:
                continue
            if any(_within(real, d) for d in self.deny_write) or not real.is_file():
                continue
            if real.stat().st_size <= _MAX_SEARCH_FILE_BYTES and not _looks_binary(real):
                yield real

    def _git_files(self, base: Path) -> list[Path] | None:
        """Tracked and untracked files under `base` that git does not ignore; None outside git."""
        try:
            out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
                                 cwd=base, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        names = sorted(set(out.stdout.decode("utf-8", "surrogateescape").split("\0")) - {""})
        return [base / name for name in names]

    def _walk(self, base: Path) -> Iterator[Path]:
        for directory, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for name in sorted(files):
                yield Path(directory) / name


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _looks_binary(real: Path) -> bool:
    with open(real, "rb") as f:
        return b"\0" in f.read(_BINARY_SNIFF_BYTES)


def _line_number(value: object, name: str, default: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name} must be a whole number, got {value!r}") from None
    if number < 1:
        raise ToolError(f"{name} must be 1 or more (lines are numbered from 1), got {number}")
    return number


def _read_range(real: Path, start: int, end: int) -> tuple[list[str], int]:
    """Lines start..end (1-based, inclusive) of a UTF-8 file and its total line count."""
    shown: list[str] = []
    total = 0
    with open(real, encoding="utf-8", newline="\n") as f:
        for total, line in enumerate(f, 1):
            if start <= total <= end:
                shown.append(_clip(line.rstrip("\r\n"), _MAX_LINE_CHARS))
    return shown, total


def _matching_lines(file: Path, regex: re.Pattern) -> Iterator[tuple[int, str]]:
    try:
        with open(file, encoding="utf-8", newline="\n") as f:
            for number, line in enumerate(f, 1):
                if regex.search(line):
                    yield number, line
    except (UnicodeDecodeError, OSError):
        return


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"


def _positions(text: str, sub: str) -> Iterator[int]:
    """Start of every occurrence of `sub`, overlapping ones included."""
    i = text.find(sub)
    while i != -1:
        yield i
        i = text.find(sub, i + 1)


def _count(text: str, sub: str) -> int:
    return sum(1 for _ in _positions(text, sub))


def _diff(old: str, new: str, rel: str) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{rel}", f"b/{rel}", lineterm=""))
    if len(lines) > _MAX_DIFF_LINES:
        lines = lines[:_MAX_DIFF_LINES] + [f"[... {len(lines) - _MAX_DIFF_LINES} more diff lines not shown]"]
    return "\n".join(lines)
