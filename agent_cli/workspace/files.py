"""File tools for the model, confined to the repository: read, write, edit, search, list."""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import regex

from agent_cli.core.atomic import write_atomic
from agent_cli.core.errors import GitError, ToolError
from agent_cli.workspace import edits, repeats, textread
from agent_cli.workspace.git import traps
from agent_cli.workspace.git.safe import run_git

Unmask = Callable[[str, str, str], str]  # (text sent, the file's text, which argument) -> text
_MAX_SEARCH_HITS = 100
_MAX_PATTERN_CHARS = 1000
_MAX_LIST_ENTRIES = 500
SEARCH_TIME_LIMIT_S = 3.0  # processor time: the regex engine's clock
_NOT_EDITED = "edit_file changes UTF-8 text only"
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
        self._submodules: set[str] | None = None  # the index's gitlinks, read on first write

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
        wide = textread.utf16_text(real)
        if wide is None and textread.looks_binary(real):
            return f"{rel}: binary file, {real.stat().st_size} bytes; not shown"
        start = _line_number(start_line, "start_line", default=1)
        end = _line_number(end_line, "end_line", default=start + self.max_read_lines - 1)
        if end < start:
            raise ToolError(f"end_line {end} is before start_line {start}")
        end = min(end, start + self.max_read_lines - 1)
        head = ""  # what the model must know of a file that is not UTF-8 before its lines
        if wide is not None:
            shown, total = textread.lines_of(wide, start, end)
            head = f"[{rel} is UTF-16 text, shown decoded; {_NOT_EDITED}]\n"
        else:
            try:
                shown, total = textread.read_range(real, start, end)
            except UnicodeDecodeError:  # Latin-1, say: text, but not UTF-8
                shown, total = textread.read_range(real, start, end, errors="backslashreplace")
                head = f"[{rel} is not UTF-8 text: bytes that are not UTF-8 are shown as \\xNN; {_NOT_EDITED}]\n"
        if total == 0:
            return f"{rel}: empty file"
        if start == 1 and shown and shown[0].startswith(textread.BOM):
            shown[0] = shown[0][1:]  # a byte order mark is no text; write_file keeps it
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

    def write(self, path: str, content: str, unmask: Unmask | None = None) -> str:
        """Create or replace a file with `content`, its line ends those of the file it replaces
        (edits.fit); returns the unified diff of the change.
        `unmask(text, original, what)`, when given, turns the text the model sent into the
        text to write, given the file's text ("" for a new file), or raises ToolError."""
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
        if unmask is not None:
            content = unmask(content, old or "", "content")
        was = "" if old is not None else textread.not_text(real)
        if old and old.startswith(textread.BOM) and not content.startswith(textread.BOM):
            content = textread.BOM + content  # read_file does not show it: it stays
        if old:  # read_file shows no line end: the model's LF is the file's (edits.fit)
            content = edits.fit_whole(content, old)
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
        diff = edits.diff(old, content, rel)
        if not existed:
            return f"created file {rel} ({lines} lines)\n{diff}".rstrip("\n")
        if old == content:
            return f"{rel} already had this content; nothing changed"
        return diff or edits.unseen_change(old, content, rel)

    def edit(self, path: str, old: str, new: str, unmask: Unmask | None = None) -> str:
        """Replace the one occurrence of `old`, as read_file shows the file, with `new`, its
        line ends the file's (edits.fit); returns the unified diff.
        `unmask`, when given, turns `old` and `new` as `write` turns its content."""
        if not old:
            raise ToolError(
                "old must not be empty; use write_file to create or replace a whole file"
            )
        real = self._existing_file(path, write=True)
        text = self._old_text(real)
        if text is None:
            what = textread.not_text(real)
            if what == textread.BINARY:
                raise ToolError(f"{self.rel(real)} is {what}; it cannot be edited as text")
            raise ToolError(
                f"{self.rel(real)} is {what}; {_NOT_EDITED} (write_file would store it as "
                "UTF-8: convert it with a command, such as iconv, if that is what is wanted)"
            )
        if unmask is not None:
            old, new = unmask(old, text, "old"), unmask(new, text, "new")
        begin, end = self._match(real, text, old)
        new = edits.fit(new, old, edits.ends_within(text, begin, end, old), text)
        if text[begin:end] == new:
            return f"old and new are the same; {self.rel(real)} was not changed"
        updated = text[:begin] + new + text[end:]
        try:
            write_atomic(real, updated)
        except OSError as exc:
            raise ToolError(f"cannot write {self.rel(real)}: {exc.strerror or exc}") from exc
        return edits.diff(text, updated, self.rel(real)) or edits.unseen_change(
            text, updated, self.rel(real)
        )

    def search(self, pattern: str, path: str | None = None) -> str:
        """Lines matching the regex `pattern` in text files under `path`, as `path:line: text`."""
        if len(pattern) > _MAX_PATTERN_CHARS:
            # the regex engine prepares a long literal in time that grows with its cube and
            # checks no timeout meanwhile: 3,000 characters take 10 s, 6,000 a minute and a half
            raise ToolError(
                f"the pattern is {len(pattern):,} characters; search for a distinctive part of "
                f"it, at most {_MAX_PATTERN_CHARS:,}"
            )
        size = repeats.expanded(pattern)
        if size > repeats.MAX_EXPANDED:
            # the engine builds each counted repeat's copies when it compiles, before any
            # timeout: ((a{1000}){1000}){1000} would take all the memory there is
            raise ToolError(
                f"the pattern's counted repeats make {size:,} copies of what they repeat "
                f"(at most {repeats.MAX_EXPANDED:,}); use smaller counts, or + and *"
            )
        try:
            compiled = regex.compile(pattern, flags=regex.VERSION0)
        except (regex.error, ValueError, OverflowError, MemoryError) as exc:
            raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc
        base = self.resolve(path or ".")
        if not base.exists():
            raise ToolError(f"{path} does not exist")
        hits: list[str] = []
        total = searched = 0
        stopped = ""
        too_large: list[Path] = []
        deadline = time.monotonic() + SEARCH_TIME_LIMIT_S
        try:
            for file, wide in self._searchable_files(base, too_large):
                for number, line in _matching_lines(file, wide, compiled, deadline):
                    total += 1
                    if len(hits) < _MAX_SEARCH_HITS:
                        hits.append(
                            f"{self.rel(file)}:{number}: {textread.clip(line.strip(), 300)}"
                        )
                searched += 1
        except _OutOfTime:  # a pattern that backtracks, or a tree this large: what was found stays
            stopped = (
                f"[the search for {pattern!r} took more than {SEARCH_TIME_LIMIT_S:.0f}s of "
                f"processor time and was stopped in {self.rel(file)}, after {searched} "
                f"file{'' if searched == 1 else 's'}"
                f"{'; the matches shown are from those' if hits else ', none of which matched'}; "
                "use a simpler pattern or a narrower path to search the rest]"
            )
        notes = [stopped] if stopped else []
        if too_large:
            names = ", ".join(self.rel(f) for f in too_large[:5])
            more = f" and {len(too_large) - 5} more" if len(too_large) > 5 else ""
            notes.append(
                f"[not searched, over {textread.MAX_WHOLE_BYTES // 1_000_000} MB: {names}{more}; "
                "read_file reads them a page at a time]"
            )
        if not hits:
            if stopped:
                return "\n".join(notes)
            if base.is_file() and too_large:
                return "\n".join(notes)  # the one file named was not searched
            return "\n".join([f"no matches for {pattern!r} in {self.rel(base)}", *notes])
        if total > len(hits):
            hits.append(
                f"[... {total - len(hits)} more matches not shown; narrow the pattern or the path]"
            )
        return "\n".join(hits + notes)

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
            rel_parts[:1] == (_SETTINGS_FILE,)  # the file, or a path that would make it a folder
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
        nested = self._nested_repository(rel_parts)
        if nested is not None:
            raise ToolError(
                f"{text} is inside {nested}, a repository of its own (a submodule or a clone "
                "inside this one): a run commits this repository's files only, so a change "
                "there would be lost; change it in that repository, or ask the user"
            )

    def _nested_repository(self, parts: tuple[str, ...]) -> str | None:
        """The folder above a path (its parts from the root) that is a repository of its own:
        it holds a `.git`, or this repository's index has it as a submodule (a gitlink, which
        a worktree leaves empty)."""
        for n in range(1, len(parts)):
            folder = "/".join(parts[:n])
            if os.path.lexists(self.root / folder / ".git") or folder in self._gitlinks():
                return folder
        return None

    def _gitlinks(self) -> set[str]:
        """The submodules this repository's index names (read once; none outside git)."""
        if self._submodules is None:
            self._submodules = set()
            try:
                code, out, _ = run_git(["ls-files", "-z", "--stage"], self.root)
            except (OSError, GitError):
                return self._submodules
            if code == 0:
                for entry in out.split(b"\0"):
                    mode, _, rest = entry.partition(b" ")
                    if mode == b"160000":
                        self._submodules.add(os.fsdecode(rest.partition(b"\t")[2]))
        return self._submodules

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
        if textread.looks_binary(real):
            return None
        try:
            with textread.open_regular(real) as f:
                data: bytes = f.read()
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _match(self, real: Path, text: str, old: str) -> tuple[int, int]:
        """Where (start, end) `old` is in `text`, matched once as read_file shows the text: an
        LF of the model's stands for the line end there, whatever CRs it has, and for the end of
        a last line that has no newline; ToolError when it matches nowhere or more than once."""
        if "\r" not in old and "\n" in old and ("\r" in text or not text.endswith("\n")):
            found = edits.with_line_ends(text, old)
            if len(found) > 1:
                self._refuse_many(real, text, [at for at, _ in found], len(found))
            if found:
                return found[0]
        self._check_single_match(real, text, old)
        at = text.index(old)
        return at, at + len(old)

    def _check_single_match(self, real: Path, text: str, old: str) -> None:
        count = edits.count(text, old)
        if count == 1:
            return
        rel = self.rel(real)
        if count == 0:
            loose = edits.loose_lines(text, old)
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
        self._refuse_many(
            real, text, list(itertools.islice(edits.positions(text, old), count)), count
        )

    def _refuse_many(self, real: Path, text: str, positions: list[int], count: int) -> NoReturn:
        """The refusal of old text that matches `count` times, at `positions` (ascending)."""
        rel = self.rel(real)
        numbers = edits.line_numbers(text, sorted(positions))
        lines = [(n, str(len(list(same)))) for n, same in itertools.groupby(numbers)]
        if count > edits.MAX_MATCHES_COUNTED:  # the last line's count stopped at the bound
            lines[-1] = (lines[-1][0], f"{int(lines[-1][1]) - 1}+")
        where = ", ".join(f"{n} ({k} times)" if k != "1" else str(n) for n, k in lines[:10])
        many = (
            f"more than {edits.MAX_MATCHES_COUNTED}"
            if count > edits.MAX_MATCHES_COUNTED
            else str(count)
        )
        raise ToolError(
            f"old text matches {many} times in {rel} (at line{'s' if len(lines) > 1 else ''} "
            f"{where}{', ...' if len(lines) > 10 else ''}); include more surrounding text so "
            "that it matches exactly once"
        )

    def _searchable_files(
        self, base: Path, too_large: list[Path]
    ) -> Iterator[tuple[Path, str | None]]:
        """The files search reads under `base`, each with its text when it is UTF-16 (decoded
        once, here, for both the choice and the lines); a file too large to search is added to
        `too_large` instead."""
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
            if real.stat().st_size > textread.MAX_WHOLE_BYTES:
                too_large.append(real)
                continue
            searched, wide = _searched_text(real)
            if searched:
                yield real, wide

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


class _OutOfTime(Exception):
    """The search passed its deadline."""


def _matching_lines(
    file: Path, wide: str | None, compiled: regex.Pattern[str], deadline: float
) -> Iterator[tuple[int, str]]:
    """Matching lines of `file` (`wide`: its UTF-16 text, already decoded); _OutOfTime when the
    whole search passes its deadline."""
    try:
        for number, line in enumerate(_lines(file, wide), 1):
            try:  # a backtracking pattern such as (a+)+$ must not spin for ever
                found = compiled.search(line, timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise _OutOfTime from None
            if found:
                yield number, line
    except (UnicodeDecodeError, OSError, ToolError):
        return


def _lines(file: Path, wide: str | None) -> Iterator[str]:
    """The lines of `file` as read_file numbers them: UTF-16 with its byte order mark decoded
    (`wide`), and a file that is not UTF-8 (Latin-1, say) too, its other bytes as \\xNN."""
    if wide is not None:
        yield from wide.split("\n")
        return
    with textread.open_regular(file, text=True, errors="backslashreplace") as f:
        yield from f


def _searched_text(real: Path) -> tuple[bool, str | None]:
    """Whether search reads `real`: text, UTF-8 or not, and UTF-16 with its byte order mark
    (whose NULs would tell it binary), as read_file does; and that UTF-16 text, decoded."""
    try:
        wide = textread.utf16_text(real)
        return wide is not None or not textread.looks_binary(real), wide
    except (OSError, ToolError):
        return False, None
