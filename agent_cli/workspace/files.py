"""File tools for the model, confined to the repository: read, write, edit, search, list."""

from __future__ import annotations

import codecs
import difflib
import itertools
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

import regex

from agent_cli.core.atomic import write_atomic
from agent_cli.core.errors import GitError, ToolError
from agent_cli.workspace.git import traps
from agent_cli.workspace.git.safe import run_git

_BINARY_SNIFF_BYTES = 8192
_MAX_LINE_CHARS = 2000
_KEPT_LINE_BYTES = 4 * _MAX_LINE_CHARS + 4  # UTF-8 enough for _MAX_LINE_CHARS characters, and more
_READ_CHUNK_BYTES = 1 << 20
_CONTINUATION = bytes(range(0x80, 0xC0))  # the bytes inside a UTF-8 character, not its first
_MAX_DIFF_LINES = 300
_MAX_SEARCH_HITS = 100
_MAX_PATTERN_CHARS = 1000
_MAX_SEARCH_FILE_BYTES = 5_000_000
_MAX_LIST_ENTRIES = 500
_MAX_DIFF_INPUT_CHARS = 2_000_000  # past this, a diff costs more than it tells
# Line pairs in the changed region (between the common head and tail) that difflib may
# compare: its matching grows with their product (4M pairs is about a second).
_MAX_DIFF_PAIRS = 4_000_000
_MAX_MATCHES_COUNTED = 1000
_BARE_LF = regex.compile(r"(?<!\r)\n")
SEARCH_TIME_LIMIT_S = 3.0  # processor time: the regex engine's clock
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
_NOT_EDITED = "edit_file changes UTF-8 text only"
_BINARY = "a binary file"
# Names the model's tools never write: git's own directories (any case: `.GIT/config` is git's
# config on a case-insensitive file system and breaks every later commit here) and the
# repository's settings file, which could turn off the sandbox for the next run.
_SETTINGS_FILE = ".agentrc"
_HIDDEN_NAMES = {".git", ".agent"}  # what list_dir never shows


class Files:
    """Path-safe file operations on one repository; refusals raise ToolError and change nothing."""

    def __init__(
        self,
        root: Path,
        deny_write: Iterable[Path] = (),
        protected: Iterable[str] = frozenset(),
        max_read_lines: int = 400,
        users_ignored: Iterable[str] = (),
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.deny_write = [Path(os.path.realpath(p)) for p in deny_write]
        self.protected = {p.rstrip("/") for p in protected}
        self.max_read_lines = max_read_lines
        # what git ignored in the work tree before the run (a folder ignored whole is one
        # entry): the user's own (.env, a virtualenv), never written by the model's tools
        self.users_ignored = {p.rstrip("/") for p in users_ignored}

    def resolve(self, path: str | Path, write: bool = False) -> Path:
        """The real path of `path` (relative to the root), refused when outside or not writable."""
        text = str(path)
        if not text.strip():
            raise ToolError("the path is empty; give a path relative to the repository root")
        if "\0" in text:
            raise ToolError("the path contains a NUL character")
        if text == "~" or text.startswith("~/"):  # no shell expands it: a folder named `~` here
            raise ToolError(
                f"{text} names the home directory, which is outside the repository; paths are "
                "relative to the repository root (./~ for a folder named ~ in it)"
            )
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
        rel = self.rel(real)
        wide = _utf16_text(real)
        if wide is None and _looks_binary(real):
            return f"{rel}: binary file, {real.stat().st_size} bytes; not shown"
        start = _line_number(start_line, "start_line", default=1)
        end = _line_number(end_line, "end_line", default=start + self.max_read_lines - 1)
        if end < start:
            raise ToolError(f"end_line {end} is before start_line {start}")
        end = min(end, start + self.max_read_lines - 1)
        head = ""  # what the model must know of a file that is not UTF-8 before its lines
        if wide is not None:
            shown, total = _lines_of(wide, start, end)
            head = f"[{rel} is UTF-16 text, shown decoded; {_NOT_EDITED}]\n"
        else:
            try:
                shown, total = _read_range(real, start, end)
            except UnicodeDecodeError:  # Latin-1, say: text, but not UTF-8
                shown, total = _read_range(real, start, end, errors="backslashreplace")
                head = f"[{rel} is not UTF-8 text: bytes that are not UTF-8 are shown as \\xNN; {_NOT_EDITED}]\n"
        if total == 0:
            return f"{rel}: empty file"
        if start > total:
            raise ToolError(f"start_line {start} is past the end of {rel} ({total} lines)")
        last = start + len(shown) - 1
        width = len(str(last))
        body = "\n".join(f"{n:>{width}}  {line}" for n, line in enumerate(shown, start))
        if start == 1 and last == total:
            return head + body
        note = f"[lines {start}-{last} of {total} shown"
        if last < total:
            note += f"; read again with start_line={last + 1} (and end_line) to see more"
        return f"{head}{body}\n{note}]"

    def write(self, path: str, content: str) -> str:
        """Create or replace a file with `content`; returns the unified diff of the change."""
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        real = self.resolve(path, write=True)
        if real.is_dir():
            raise ToolError(f"{self.rel(real)} is a directory")
        if str(path).endswith(("/", os.sep)):  # the path resolves without it: `new/` is `new`
            raise ToolError(f"{path} ends with '/', which names a directory; give a file's path")
        if real.exists() and not real.is_file():
            raise ToolError(f"{self.rel(real)} is not a regular file (a FIFO, socket or device)")
        existed = real.exists()
        old = self._old_text(real) if existed else ""
        was = "" if old is not None else _not_text(real)
        if old and _crlf(old) and "\r\n" not in content:
            content = _as_crlf(content)  # the file ends its lines with CRLF: they stay so
        blocking = next((d for d in real.parents if _within(d, self.root) and d.is_file()), None)
        if blocking is not None:  # mkdir would say only "File exists"
            raise ToolError(
                f"cannot write {self.rel(real)}: {self.rel(blocking)} is a file, not a directory"
            )
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(real, content)
        except OSError as exc:
            raise ToolError(f"cannot write {self.rel(real)}: {exc.strerror or exc}") from exc
        rel, lines = self.rel(real), len(content.splitlines())
        if old is None:
            return f"replaced {rel} ({was}) with UTF-8 text ({lines} lines)"
        diff = _diff(old, content, rel)
        if not existed:
            return f"created file {rel} ({lines} lines)\n{diff}".rstrip("\n")
        if old == content:
            return f"{rel} already had this content; nothing changed"
        return diff or _unseen_change(old, content, rel)

    def edit(self, path: str, old: str, new: str) -> str:
        """Replace the one exact occurrence of `old` with `new`; returns the unified diff."""
        if not old:
            raise ToolError(
                "old must not be empty; use write_file to create or replace a whole file"
            )
        real = self._existing_file(path, write=True)
        text = self._old_text(real)
        if text is None:
            what = _not_text(real)
            if what == _BINARY:
                raise ToolError(f"{self.rel(real)} is {what}; it cannot be edited as text")
            raise ToolError(
                f"{self.rel(real)} is {what}; {_NOT_EDITED} (write_file would store it as "
                "UTF-8: convert it with a command, such as iconv, if that is what is wanted)"
            )
        if "\r\n" in text and "\n" in old and "\r" not in old:
            # read_file shows lines without their CR: the model's LF stands for the file's
            # line end, CRLF or LF, wherever the two differ (a file edited on both systems),
            # so old text that matches as written may match where the ends differ too
            found = _with_line_ends(text, old)
            if len({f for _, f in found}) > 1:
                self._refuse_many(real, text, [at for at, _ in found], len(found))
            if found:
                old = found[0][1]
                new = _as_crlf(new) if _crlf(old) else new
        elif _crlf(text):
            new = _as_crlf(new)  # lines the new text adds end as the file's others do
        self._check_single_match(real, text, old)
        if old == new:
            return f"old and new are the same; {self.rel(real)} was not changed"
        updated = text.replace(old, new, 1)
        try:
            write_atomic(real, updated)
        except OSError as exc:
            raise ToolError(f"cannot write {self.rel(real)}: {exc.strerror or exc}") from exc
        return _diff(text, updated, self.rel(real)) or _unseen_change(text, updated, self.rel(real))

    def search(self, pattern: str, path: str | None = None) -> str:
        """Lines matching the regex `pattern` in text files under `path`, as `path:line: text`."""
        if len(pattern) > _MAX_PATTERN_CHARS:
            # the regex engine prepares a long literal in time that grows with its cube and
            # checks no timeout meanwhile: 3,000 characters take 10 s, 6,000 a minute and a half
            raise ToolError(
                f"the pattern is {len(pattern):,} characters; search for a distinctive part of "
                f"it, at most {_MAX_PATTERN_CHARS:,}"
            )
        try:
            compiled = regex.compile(pattern, flags=regex.VERSION0)
        except (regex.error, ValueError, OverflowError) as exc:
            raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc
        base = self.resolve(path or ".")
        if not base.exists():
            raise ToolError(f"{path} does not exist")
        hits: list[str] = []
        total = searched = 0
        stopped = ""
        deadline = time.monotonic() + SEARCH_TIME_LIMIT_S
        try:
            for file in self._searchable_files(base):
                for number, line in _matching_lines(file, compiled, deadline):
                    total += 1
                    if len(hits) < _MAX_SEARCH_HITS:
                        hits.append(f"{self.rel(file)}:{number}: {_clip(line.strip(), 300)}")
                searched += 1
        except _OutOfTime:  # a pattern that backtracks, or a tree this large: what was found stays
            stopped = (
                f"[the search for {pattern!r} took more than {SEARCH_TIME_LIMIT_S:.0f}s of "
                f"processor time and was stopped in {self.rel(file)}, after {searched} "
                f"file{'' if searched == 1 else 's'}"
                f"{'; the matches shown are from those' if hits else ', none of which matched'}; "
                "use a simpler pattern or a narrower path to search the rest]"
            )
        if not hits:
            return stopped or f"no matches for {pattern!r} in {self.rel(base)}"
        if total > len(hits):
            hits.append(
                f"[... {total - len(hits)} more matches not shown; narrow the pattern or the path]"
            )
        return "\n".join(hits + ([stopped] if stopped else []))

    def list_dir(self, path: str = ".") -> str:
        """One level of a directory, one entry a line: `dir/`, `file  N bytes`, `link@`.

        git's directories and the agent's state are left out; past _MAX_LIST_ENTRIES the
        rest is counted, not shown.
        """
        real = self.resolve(path or ".")
        if not real.is_dir():
            raise ToolError(f"{path} is not a directory")
        parts = [part.lower() for part in real.relative_to(self.root).parts]
        if _HIDDEN_NAMES & set(parts) or any(_within(real, d) for d in self.deny_write):
            raise ToolError(
                f"{path} is inside .git or the agent's state; list_dir does not show it"
            )
        with os.scandir(real) as it:
            entries = sorted(
                (e for e in it if not self._hidden(Path(e.path))), key=lambda e: e.name
            )
        lines = [_entry_line(e) for e in entries[:_MAX_LIST_ENTRIES]]
        if len(entries) > _MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - _MAX_LIST_ENTRIES} more entries not shown]")
        return "\n".join(lines) or f"{self.rel(real)} is empty"

    def _hidden(self, entry: Path) -> bool:
        """Whether list_dir leaves `entry` out: .git, .agent, or the agent's state directory."""
        if entry.name.lower() in _HIDDEN_NAMES:
            return True
        real = Path(os.path.realpath(entry)) if entry.is_symlink() else entry
        return any(real == d for d in self.deny_write)

    def _outside_message(self, text: str, given: Path, real: Path) -> str:
        if _within(Path(os.path.normpath(given)), self.root):
            return f"{text} resolves through a symlink to {real}, outside the repository; it cannot be used"
        return f"{text} is outside the repository {self.root}; only paths inside it can be used"

    def _check_writable(self, text: str, real: Path) -> None:
        rel_parts = real.relative_to(self.root).parts
        if any(part.lower() == ".git" for part in rel_parts):
            raise ToolError(
                f"{text} is inside .git; git's own files are never written by the agent"
            )
        if (
            rel_parts == (_SETTINGS_FILE,)
            or real.name == _SETTINGS_FILE
            and real.parent == Path.home()
        ):
            raise ToolError(f"{text} holds the agent's settings; only the user edits it")
        for denied in self.deny_write:
            if _within(real, denied):
                raise ToolError(
                    f"{text} is inside the agent's state directory {denied}; it cannot be written"
                )
        rel = "/".join(rel_parts)
        for held in self.protected:
            if rel == held or rel.startswith(held + "/"):
                raise ToolError(
                    f"{text} holds the user's uncommitted work; the agent leaves it untouched, "
                    "so change other files or ask the user"
                )
        for held in self.users_ignored:
            if rel == held or rel.startswith(held + "/"):
                raise ToolError(
                    f"{text} is ignored by git and was in the work tree before the run: the "
                    "user's own (no commit holds it), which the agent leaves untouched; change "
                    "other files, or ask the user"
                )

    def _existing_file(self, path: str, write: bool = False) -> Path:
        real = self.resolve(path, write=write)
        if not real.exists():
            given = path if os.path.isabs(path) else os.path.join(self.root, path)
            if os.path.islink(given):
                raise ToolError(
                    f"{path} is a symbolic link that leads nowhere (a loop of links, or a "
                    "target that does not exist)"
                )
            raise ToolError(f"{path} does not exist")
        if real.is_dir():
            raise ToolError(f"{path} is a directory; use list_dir or search")
        if not real.is_file():
            raise ToolError(
                f"{path} is not a regular file (a FIFO, socket or device); it is not opened"
            )
        return real

    def _old_text(self, real: Path) -> str | None:
        """The file's text, or None when it is binary."""
        if _looks_binary(real):
            return None
        try:
            with _open_regular(real) as f:
                data: bytes = f.read()
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _check_single_match(self, real: Path, text: str, old: str) -> None:
        count = _count(text, old)
        if count == 1:
            return
        rel = self.rel(real)
        if count == 0:
            loose = _loose_lines(text, old)
            if loose:
                raise ToolError(
                    f"old text not found in {rel} (0 matches) as given, but it matches at "
                    f"line{'s' if len(loose) > 1 else ''} {', '.join(map(str, loose))} when "
                    "whitespace is ignored: read those lines and copy the exact text, its "
                    "indentation (tabs or spaces) and line breaks included"
                )
            raise ToolError(
                f"old text not found in {rel} (0 matches); read the file and copy the exact "
                "text, including whitespace and indentation"
            )
        self._refuse_many(real, text, list(itertools.islice(_positions(text, old), count)), count)

    def _refuse_many(self, real: Path, text: str, positions: list[int], count: int) -> NoReturn:
        """The refusal of old text that matches `count` times, at `positions` (ascending)."""
        rel = self.rel(real)
        numbers = _line_numbers(text, sorted(positions))
        lines = [(n, str(len(list(same)))) for n, same in itertools.groupby(numbers)]
        if count > _MAX_MATCHES_COUNTED:  # the last line's count stopped at the bound
            lines[-1] = (lines[-1][0], f"{int(lines[-1][1]) - 1}+")
        where = ", ".join(f"{n} ({k} times)" if k != "1" else str(n) for n, k in lines[:10])
        many = f"more than {_MAX_MATCHES_COUNTED}" if count > _MAX_MATCHES_COUNTED else str(count)
        raise ToolError(
            f"old text matches {many} times in {rel} (at line{'s' if len(lines) > 1 else ''} "
            f"{where}{', ...' if len(lines) > 10 else ''}); include more surrounding text so "
            "that it matches exactly once"
        )

    def _searchable_files(self, base: Path) -> Iterator[Path]:
        candidates = [base] if base.is_file() else (self._git_files(base) or self._walk(base))
        seen: set[Path] = set()  # a link to a file searched already (under its own name)
        for file in candidates:
            real = Path(os.path.realpath(file))
            if real in seen:
                continue
            seen.add(real)
            if not _within(real, self.root) or ".git" in real.relative_to(self.root).parts:
                continue
            if any(_within(real, d) for d in self.deny_write) or not real.is_file():
                continue
            if real.stat().st_size <= _MAX_SEARCH_FILE_BYTES and not _looks_binary(real):
                yield real

    def _git_files(self, base: Path) -> list[Path] | None:
        """Tracked and untracked files under `base` that git does not ignore, a submodule's
        among them; None outside git, or when git would wait on a FIFO it reads (the walk then
        skips what is not a file)."""
        try:
            traps.tree(base)
            code, out, _ = run_git(
                ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."], base
            )
        except (OSError, GitError):
            return None
        if code != 0:
            return None
        names = sorted(set(out.decode("utf-8", "surrogateescape").split("\0")) - {""})
        found: list[Path] = []
        for name in names:
            path = base / name
            if path.is_dir() and not path.is_symlink():  # a submodule: its own repository's
                found += self._git_files(path) or []
            else:
                found.append(path)
        return found

    def _walk(self, base: Path) -> Iterator[Path]:
        for directory, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for name in sorted(files):
                yield Path(directory) / name


def _entry_line(entry: os.DirEntry[str]) -> str:
    """One list_dir line: a directory ends in '/', a file shows its size, a symlink ends in '@'."""
    try:
        if entry.is_symlink():
            return f"{entry.name}@"
        if entry.is_dir():
            return f"{entry.name}/"
        info = entry.stat()
    except OSError:
        return f"{entry.name} (unreadable)"
    if stat.S_ISREG(info.st_mode):
        return f"{entry.name}  {info.st_size} bytes"
    return f"{entry.name} (not a regular file)"


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _open_regular(real: Path, text: bool = False, errors: str = "strict") -> IO[Any]:
    """`real` opened for reading without ever blocking; ToolError unless it is a regular file."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError(f"cannot open {real.name}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(
            f"{real.name} is not a regular file (a FIFO, socket or device); it is not opened"
        )
    if text:
        return open(fd, encoding="utf-8", errors=errors, newline="\n")
    return open(fd, "rb")


def _looks_binary(real: Path) -> bool:
    with _open_regular(real) as f:
        return b"\0" in f.read(_BINARY_SNIFF_BYTES)


def _line_number(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name} must be a whole number, got {value!r}") from None
    if number < 1:
        raise ToolError(f"{name} must be 1 or more (lines are numbered from 1), got {number}")
    return number


def _read_range(real: Path, start: int, end: int, errors: str = "strict") -> tuple[list[str], int]:
    """Lines start..end (1-based, inclusive) of a UTF-8 file, each clipped, and its total line
    count. Read in chunks, keeping at most _KEPT_LINE_BYTES of a line: a file of one huge line
    (a minified bundle, a data dump) or of millions of lines costs bounded memory."""
    shown: list[str] = []
    line = 1  # the number of the line the next byte belongs to
    kept, cut = bytearray(), 0  # the line's first bytes, and how many characters past them
    trailing = 0  # the CRs the line ends with so far
    ends_line = True  # whether the file so far ends with a newline
    with _open_regular(real) as f:
        while chunk := f.read(_READ_CHUNK_BYTES):
            ends_line, pos = chunk.endswith(b"\n"), 0
            while pos < len(chunk):
                if line > end:  # past the range: only counted
                    line += chunk.count(b"\n", pos)
                    break
                if line < start:  # before it: skipped a chunk at a time where it can be
                    skip = min(start - line, chunk.count(b"\n", pos))
                    for _ in range(skip):
                        pos = chunk.index(b"\n", pos) + 1
                    line += skip
                    if line < start:
                        break
                    continue
                newline = chunk.find(b"\n", pos)
                piece = chunk[pos : len(chunk) if newline == -1 else newline]
                room = max(0, _KEPT_LINE_BYTES - len(kept))
                kept += piece[:room]
                cut += len(piece[room:].translate(None, _CONTINUATION))  # characters, not bytes
                crs = len(piece) - len(piece.rstrip(b"\r"))  # a line's CRs at its end are not shown
                trailing = trailing + crs if crs == len(piece) else crs
                if newline == -1:
                    break
                shown.append(_line_text(kept, cut, trailing, errors))
                kept, cut, trailing, line, pos = bytearray(), 0, 0, line + 1, newline + 1
    if ends_line:  # an empty file, or one whose last line ended: `line` has not begun
        return shown, line - 1
    if start <= line <= end:
        shown.append(_line_text(kept, cut, trailing, errors))
    return shown, line


def _line_text(kept: bytearray, cut: int, trailing: int, errors: str) -> str:
    """A line read as its first bytes and the number of characters past them (the last
    `trailing` of the line's characters are CRs, not shown), clipped to _MAX_LINE_CHARS;
    UnicodeDecodeError when the bytes kept are not UTF-8."""
    if len(kept) < _KEPT_LINE_BYTES:  # the whole line
        return _clip(bytes(kept).rstrip(b"\r").decode("utf-8", errors), _MAX_LINE_CHARS)
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    text = decoder.decode(bytes(kept))  # kept may end inside a character: it counts as cut
    length = len(text) + (1 if decoder.getstate()[0] else 0) + cut - trailing
    if length <= _MAX_LINE_CHARS:
        return text[:length]
    return f"{text[:_MAX_LINE_CHARS]} [... {length - _MAX_LINE_CHARS} characters cut]"


def _lines_of(text: str, start: int, end: int) -> tuple[list[str], int]:
    """Lines start..end (1-based, inclusive) of `text`, each clipped, and its line count."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    shown = [_clip(line.rstrip("\r"), _MAX_LINE_CHARS) for line in lines[start - 1 : end]]
    return shown, len(lines)


def _utf16_text(real: Path) -> str | None:
    """The text of a file that starts with a UTF-16 byte order mark (Windows resource files,
    PowerShell scripts) and decodes as UTF-16; None for any other file, or one too large."""
    with _open_regular(real) as f:
        mark = f.read(4)
        if mark[:2] not in _UTF16_MARKS or mark == b"\xff\xfe\0\0":  # UTF-32 starts so
            return None
        if os.fstat(f.fileno()).st_size > _MAX_SEARCH_FILE_BYTES:
            return None
        data: bytes = mark + f.read()
    try:
        text = data.decode("utf-16")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def _not_text(real: Path) -> str:
    """What a file that is not UTF-8 text is, for a message."""
    if _utf16_text(real) is not None:
        return "a UTF-16 text file"
    return _BINARY if _looks_binary(real) else "a file that is not UTF-8 text"


class _OutOfTime(Exception):
    """The search passed its deadline."""


def _matching_lines(
    file: Path, compiled: regex.Pattern[str], deadline: float
) -> Iterator[tuple[int, str]]:
    """Matching lines of `file`; _OutOfTime when the whole search passes its deadline."""
    try:
        # a file that is not UTF-8 (Latin-1, say) is searched too, its other bytes as \xNN
        with _open_regular(file, text=True, errors="backslashreplace") as f:
            for number, line in enumerate(f, 1):
                try:  # a backtracking pattern such as (a+)+$ must not spin for ever
                    found = compiled.search(line, timeout=max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    raise _OutOfTime from None
                if found:
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
    """Occurrences of `sub`, counted up to one past _MAX_MATCHES_COUNTED."""
    return sum(1 for _ in itertools.islice(_positions(text, sub), _MAX_MATCHES_COUNTED + 1))


def _with_line_ends(text: str, old: str) -> list[tuple[int, str]]:
    """Where and as what `old` is in `text` (at most _MAX_MATCHES_COUNTED + 1 times) when each
    of its LFs may be a CRLF. Found with str.find in `text` with CRLF made LF, whose worst case
    is linear (a backtracking pattern is not, on repetitive text), then mapped back."""
    flat = text.replace("\r\n", "\n")
    starts = list(itertools.islice(_positions(flat, old), _MAX_MATCHES_COUNTED + 1))
    if not starts:
        return []
    breaks = [m.start() for m in re.finditer("\n", text)]  # line L starts after breaks[L - 1]
    lines = _line_numbers(flat, starts)  # 1-based, counted in one pass
    ends = _line_numbers(flat, [at + len(old) for at in starts])

    def original(at: int, line: int) -> int:
        column = at - (flat.rfind("\n", 0, at) + 1)
        return (breaks[line - 2] + 1 if line > 1 else 0) + column

    found = []
    for at, line, end_line in zip(starts, lines, ends, strict=True):
        begin, end = original(at, line), original(at + len(old), end_line)
        found.append((begin, text[begin:end]))
    return found


def _loose_lines(text: str, old: str) -> list[int]:
    """The lines (at most 5) where `old` starts when the whitespace around and inside each of
    its lines may differ (tabs for spaces, other indentation, CRLF): where an edit that missed
    was aimed. Each line's whitespace is made one space, then str.find (linear) looks."""
    flat_old = _squeezed(old).strip("\n")
    if not flat_old.strip() or max(len(text), len(old)) > _MAX_DIFF_INPUT_CHARS:
        return []
    flat = _squeezed(text)
    found = itertools.islice(_positions(flat, flat_old), 5)
    return sorted({flat.count("\n", 0, at) + 1 for at in found})


def _squeezed(text: str) -> str:
    """`text` line by line, each line's runs of whitespace one space and its ends stripped."""
    return "\n".join(" ".join(line.split()) for line in text.split("\n"))


def _line_numbers(text: str, positions: Iterable[int]) -> list[int]:
    """1-based line numbers of ascending `positions`, counted in one pass."""
    numbers, line, at = [], 1, 0
    for pos in positions:
        line += text.count("\n", at, pos)
        at = pos
        numbers.append(line)
    return numbers


def _diff(old: str, new: str, rel: str) -> str:
    """The unified diff, at most _MAX_DIFF_LINES lines of at most _MAX_LINE_CHARS characters;
    a summary instead when the files are too large or the rewrite too large to compare."""
    if max(len(old), len(new)) > _MAX_DIFF_INPUT_CHARS:
        return (
            f"{rel}: {len(old)} -> {len(new)} characters; the diff of a file this large is not "
            "shown (read a range of it to check the change)"
        )
    before, after = old.splitlines(), new.splitlines()
    head, tail = _common_ends(before, after)
    removed, added = len(before) - head - tail, len(after) - head - tail
    if removed * added > _MAX_DIFF_PAIRS:
        return (
            f"[diff omitted: {rel} lines {head + 1}-{len(before) - tail} ({removed:,} lines) "
            f"rewritten as {added:,} lines ({len(new):,} characters now), too many to compare "
            "line by line; read a range of the file to check the change]"
        )
    diff = difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}", lineterm="")
    lines = [_clip(line, _MAX_LINE_CHARS) for line in itertools.islice(diff, _MAX_DIFF_LINES)]
    more = sum(1 for _ in diff)
    if more:
        lines.append(f"[... {more} more diff lines not shown]")
    return "\n".join(lines)


def _crlf(text: str) -> bool:
    """Whether every line of `text` that ends, ends with CRLF (a file written on Windows)."""
    return "\r\n" in text and text.count("\n") == text.count("\r\n")


def _as_crlf(text: str) -> str:
    """`text` with each line end that is a bare LF made CRLF."""
    return str(_BARE_LF.sub("\r\n", text))


def _unseen_change(old: str, new: str, rel: str) -> str:
    """What changed when the lines did not (a diff compares lines, not how they end)."""
    changes = []
    if old.count("\r") != new.count("\r"):
        changes.append(f"its line endings ({_endings(old)} before, {_endings(new)} now)")
    if old.endswith(("\n", "\r")) != new.endswith(("\n", "\r")):
        changes.append(
            "the newline at its end " + ("added" if new.endswith(("\n", "\r")) else "removed")
        )
    what = " and ".join(changes) or "only how its lines end"
    return f"{rel}: the same lines; changed {what}"


def _endings(text: str) -> str:
    crlf = text.count("\r\n")
    lf, cr = text.count("\n") - crlf, text.count("\r") - crlf
    kinds = [name for name, n in (("CRLF", crlf), ("LF", lf), ("CR", cr)) if n]
    return " and ".join(kinds) or "none"


def _common_ends(before: list[str], after: list[str]) -> tuple[int, int]:
    """How many lines the two texts share at their start, and then at their end."""
    limit = min(len(before), len(after))
    head = 0
    while head < limit and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < limit - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    return head, tail
