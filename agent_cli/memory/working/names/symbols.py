"""Names an item defines (Python's ast when the text parses, a regex otherwise), the identifiers
it has, and the ranking of name hits; the names it mentions are counted in mentions.py."""

from __future__ import annotations

import ast
import functools
import keyword
import re
import sys

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")

# Definitions in other languages and in text that does not parse (diffs, snippets, tracebacks):
# a keyword and a name, or `name = value` at the start of a line (`key=value`, without spaces,
# is left alone: logs are full of it). One pass, two groups. Each match starts with the newline
# before the line (findall gets "\n" + text) rather than `^`: the engine then jumps from newline
# to newline instead of trying every character. The lookahead drops a line that starts with
# neither a blank, a `+` nor a letter (a log's date) before the alternatives are tried. Every
# repeat is possessive, which spares the engine the state it keeps to give characters back
# (a tenth of the scan on a grep's output): giving back could never make a match. What follows a
# name never starts with a word character; no modifier is a keyword; and an annotation (`: T`)
# taken up to the `=` matches when it ends with a blank, which the lookbehind asks of the blanks
# alternative too, so `name: T = v` and `name = v` match and `name:T=v` does not, as before.
_DEF_LINE = re.compile(
    r"\n(?=[ \t+A-Za-z_])(?:[ \t+]*+(?:(?:export|p(?:ub(?:lic)?|rivate)|static|async)[ \t]++)*+"
    r"(?:def|c(?:lass|onst)|f(?:unc(?:tion)?|n)|struct|interface|t(?:rait|ype)|enum|let|var)"
    r"[ \t]++\*?([A-Za-z_][A-Za-z0-9_]*+)"
    r"|\+?([A-Za-z_][A-Za-z0-9_]*+)(?:[ \t]*+:[^=\n]*+|[ \t]++)(?<=[ \t])=(?!=))",
)
_OTHER_HINTS = re.compile(
    r"function |func |fn |struct |interface |trait |enum |type |const |"
    r"let |var | = "
)

_NOT_NAMES = frozenset(keyword.kwlist) | {"self", "cls"}


def identifiers(text: str) -> frozenset[str]:
    """Every identifier-like word of two or more characters in `text`."""
    return frozenset(_IDENT.findall(text))


def definitions(text: str) -> tuple[str, ...]:
    """Names `text` defines: functions, classes, module- and class-level variables.

    Python's ast when the text has a `def` or `class` and parses; the line regex otherwise.
    The parse is skipped when its answer is known without it (see _shape()).
    """
    found = _regex_definitions(text)
    if "def " not in text and "class " not in text:
        return found if found and _OTHER_HINTS.search(text) else ()
    try:
        shape = _shape(text)
    except SyntaxError:
        return found  # it cannot parse
    if shape is not None and _unique(shape) == found:
        return found  # the parse would find these names too
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found
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
    return _unique(
        [keyword_name or assigned for keyword_name, assigned in _DEF_LINE.findall("\n" + text)]
    )


def _unique(names: list[str]) -> tuple[str, ...]:
    """Names in first-seen order, without duplicates, keywords or one-letter names."""
    seen: dict[str, None] = {}
    for name in names:
        if len(name) > 1 and name not in _NOT_NAMES:
            seen.setdefault(name, None)
    return tuple(seen)


# Reading Python's shape without a parse. ast.parse costs ~120 µs for a page of code, most of it
# spent building expression nodes _collect() never looks at. _shape() reads the statements from a
# skeleton of the text instead: strings blanked, comments dropped, bracketed groups collapsed
# (which joins continuation lines), so each line left is one logical line. For text that parses
# it gives the names _collect() would find, or None where it is not sure; it raises SyntaxError
# only for text that cannot parse. definitions() parses only when those names and the regex's
# differ: where they agree, the regex's answer is right whether or not the text parses. A
# function body with no nested `def` or `class`, and a block _collect() does not enter, are
# passed over with two regex searches instead of being read line by line (_passed_over()).

_HOLE = "\x01"  # stands for a string or a bracketed group in the skeleton
# Comments and strings in one left-to-right pass, as the tokenizer reads them: a quote inside a
# comment, or a `#` inside a string, is never taken for what it is not.
# Each string's body is written unrolled (a run of plain characters, then an escape or a lone
# quote and another run), which matches what `(?:plain|escape|quote)*` does, without trying the
# alternatives at every character.
_TEXT = re.compile(
    r"#[^\n]*"
    r'|"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""'
    r"|'''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''"
    r'|"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*'"
)
_GROUP = re.compile(r"\([^()\[\]{}]*\)|\[[^()\[\]{}]*\]|\{[^()\[\]{}]*\}")
_MAX_DEPTH = 32
# From Python 3.12 an f-string may hold its own kind of quote (PEP 701): _TEXT would misread it.
_NESTED_QUOTES = (
    re.compile(r"[fF][rR]?['\"]|[rR][fF]['\"]") if sys.version_info >= (3, 12) else None
)
# Looked for with `in`, one character at a time: faster than a regex's character class.
_NOT_SURE = "\t\f\v\\\x00"  # tabs and form feeds in indents, continuations
_NOT_PYTHON = "\"'()[]{}`$?"  # left outside strings and comments: no parse
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEF = re.compile(r"(?:async +)?(def|class) +([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGN = re.compile(r"(?<![=!<>:+\-*/%@&|^~])=(?!=)")
_LAMBDA = re.compile(r"\blambda\b")
_DEFS = ("def ", "class ", "async ")
_NESTED = re.compile(r"\n *(?:def|class|async) ")  # a line of a body that starts with one of _DEFS
_FILLED = re.compile(r"[^ \n]")
_BLOCKS = frozenset(("if", "elif", "else", "for", "while", "try", "finally", "with"))
_HEADERS = _BLOCKS | {"except", "def", "class", "async", "match", "case"}
_KEYWORDS = frozenset(keyword.kwlist)
# What _collect() does with the statements of a block: module or class level (and the blocks of
# if/for/while/try/with there), a function body, an except handler, a block it does not enter.
_COLLECT, _FUNCTION, _EXCEPT, _OPAQUE = range(4)


class _Unsure(Exception):
    """The skeleton cannot tell what the parse would find."""


def _skeleton(text: str) -> str | None:
    """The text as logical lines of code; None when that cannot be done faithfully."""
    if _HOLE in text or "\r" in text or (_NESTED_QUOTES and _NESTED_QUOTES.search(text)):
        return None  # a lone carriage return ends a line, which _TEXT does not know
    code = _blank(text)
    for _ in range(_MAX_DEPTH):  # one pass per level of brackets, innermost first
        if "(" not in code and "[" not in code and "{" not in code:
            return code  # the pass would find no group
        code, groups = _GROUP.subn(_HOLE, code)
        if not groups:
            return code
    return None  # nested deeper than code usually is: leave it to the parse


def _blank(text: str) -> str:
    """`text` with its comments dropped and each string a hole: `_TEXT.sub()` with "" for a
    comment and _HOLE for a string, but str.find() jumps to where a match can start (a `#` or a
    quote), which a regex scan reaches one character at a time."""
    out: list[str] = []
    done = at = 0  # text[:done] is in `out`; no match starts before `at`
    comment, double, single = text.find("#"), text.find('"'), text.find("'")
    while True:
        if 0 <= comment < at:
            comment = text.find("#", at)
        if 0 <= double < at:
            double = text.find('"', at)
        if 0 <= single < at:
            single = text.find("'", at)
        start = comment
        if double >= 0 and (start < 0 or double < start):
            start = double
        if single >= 0 and (start < 0 or single < start):
            start = single
        if start < 0:
            break
        match = _TEXT.match(text, start)
        if match is None:
            at = start + 1
            continue
        out.append(text[done:start])
        out.append("" if start == comment else _HOLE)
        done = at = match.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _shape(text: str) -> list[str] | None:
    """The names _collect() finds if `text` parses; None if not sure; SyntaxError if it cannot."""
    code = _skeleton(text)
    if code is None:
        return None
    if any(char in code for char in _NOT_PYTHON):
        raise SyntaxError("a quote, bracket or character that code cannot have")
    if not code.isascii() or any(char in code for char in _NOT_SURE):
        return None
    try:
        return _read(code)
    except _Unsure:
        return None


def _read(code: str) -> list[str]:
    """The names defined by logical lines, block by block as _collect() walks them."""
    names: list[str] = []
    blocks = [(-1, _COLLECT)]  # (indent of the header, what its block is)
    where, last_indent, opened = _COLLECT, 0, None
    lines = code.split("\n")
    at = offset = 0  # the next line to read, and where it starts in `code`
    while at < len(lines):
        line = lines[at]
        at += 1
        offset += len(line) + 1
        statement = line.lstrip(" ")
        if not statement:
            continue
        indent = len(line) - len(statement)
        if (indent > last_indent) != (opened is not None):
            raise SyntaxError("unexpected indent, or an indented block expected")
        last_indent = indent
        if indent <= blocks[-1][0]:
            while blocks[-1][0] >= indent:
                blocks.pop()
            where = blocks[-1][1]
        statement = statement.rstrip(" ")
        if (
            where == _OPAQUE or (where == _FUNCTION and not statement.startswith(_DEFS))
        ) and not statement.endswith(":"):
            opened = None  # most lines of code: nothing defined, no block opened
            continue
        opened = _statement(statement, where, names)
        if opened is not None:
            blocks.append((indent, opened))
            where = opened
            end = _passed_over(code, offset, indent, opened)
            if end is not None:
                at += code.count("\n", offset - 1, end)
                offset, last_indent, opened = end + 1, indent + 1, None
    if opened is not None:
        raise SyntaxError("an indented block expected at the end")
    return names


def _passed_over(code: str, start: int, indent: int, block: int) -> int | None:
    """Where the body that starts at `start`, of a header indented by `indent`, ends (the
    newline before the next line indented no deeper, or the end of `code`), when nothing in it
    can define a name _collect() keeps: a block it does not enter, or a function body with no
    `def`, `class` or `async` line. None when the body must be read line by line, or is empty.

    Skipping such a body leaves its lines' syntax unchecked; that only costs a parse, which
    definitions() runs whenever the names read here differ from the regex's."""
    if block != _FUNCTION and block != _OPAQUE:
        return None
    found = _block_end(indent).search(code, start - 1)
    end = len(code) if found is None else found.start()
    if _FILLED.search(code, start, end) is None:
        return None  # an empty body: read on, which finds the missing block
    if block == _FUNCTION and _NESTED.search(code, start - 1, end) is not None:
        return None
    return end


@functools.lru_cache(maxsize=64)
def _block_end(indent: int) -> re.Pattern[str]:
    """A newline followed by a line indented by at most `indent` (a blank line is not one)."""
    return re.compile(rf"\n {{0,{indent}}}+[^ \n]")


def _statement(statement: str, where: int, names: list[str]) -> int | None:
    """Add what one logical line defines to `names`; what block it opens if it is a header."""
    header = statement.endswith(":")
    if where == _OPAQUE:
        return _OPAQUE if header else None
    word = _WORD.match(statement)
    first = word.group() if word else ""
    if header and first not in _HEADERS:
        raise SyntaxError("only a compound statement ends with a colon")
    before = len(names)
    found = _DEF.match(statement)
    if found:
        names.append(found.group(2))
        if not header and found.group(1) == "class":
            _simple(_after_colon(statement), names)
        opened = None if not header else _FUNCTION if found.group(1) == "def" else _COLLECT
    elif where == _FUNCTION:
        opened = _OPAQUE if header else None  # _collect() skips all else in a function
    elif first in _BLOCKS or first == "except":
        if first == "except" and statement[6:].lstrip(" ").startswith("*"):
            raise _Unsure  # try/except* is a TryStar, which _collect() does not enter
        if not header:
            _simple(_after_colon(statement), names)
        opened = _EXCEPT if first == "except" or where == _EXCEPT else _COLLECT
        opened = opened if header else None
    elif first == "async":
        raise _Unsure  # `async for` is not entered, but an `else:` after it looks like a for's
    else:
        opened = _OPAQUE if header else None  # match: not entered
        if not header:
            _simple(statement, names)
    if (where == _EXCEPT or first == "except") and len(names) > before:
        raise _Unsure  # the parse lists a handler's names after the else and finally blocks
    return opened


def _after_colon(statement: str) -> str:
    """The body of a one-line compound statement."""
    if _LAMBDA.search(statement):
        raise _Unsure  # its colon could be the first one
    colon = statement.find(":")
    if colon < 0:
        raise SyntaxError("a compound statement without its colon")
    return statement[colon + 1 :]


def _simple(statements: str, names: list[str]) -> None:
    """Add the names that simple statements at a level _collect() enters bind."""
    for statement in statements.split(";"):
        statement = statement.strip(" ")
        word = _WORD.match(statement)
        if not statement or (word is not None and word.group() in _KEYWORDS):
            continue  # import, return, pass, del, global, an expression: nothing is kept
        equals = [m.start() for m in _ASSIGN.finditer(statement)]
        colon = statement.find(":")
        if colon >= 0 and (not equals or colon < equals[0]):
            names.extend(_targets(statement[:colon]))  # an annotated assignment
        elif equals:
            if _LAMBDA.search(statement):
                raise _Unsure  # `lambda x=1:` has an `=` that binds nothing here
            starts = [0] + [at + 1 for at in equals[:-1]]
            for start, end in zip(starts, equals, strict=False):
                names.extend(_targets(statement[start:end]))


def _targets(target: str) -> list[str]:
    """Plain names an assignment target binds: `a`, `a, b`; none for `a.b` or `a[i]`."""
    found = []
    for part in target.split(","):  # `a, = ...` leaves an empty part, which binds nothing
        part = part.strip(" ")
        if _WORD.fullmatch(part):
            found.append(part)
        elif part.startswith((_HOLE, "*")):
            raise _Unsure  # `(a, b) =`, `[a] =`, `*rest =`
    return found


def rank_hits(
    by_id: list[str], exact: list[tuple[str, str]], folded: list[tuple[str, str]]
) -> list[str]:
    """Ids best first: named by id, then defining exact names (more first), then any-case names.

    `exact` and `folded` are (id, name) pairs from a store's by_symbol(); among equals the
    newer id (larger number) comes first.
    """
    rank: dict[str, tuple[int, int]] = dict.fromkeys(by_id, (0, 0))
    for tier, pairs in ((1, exact), (2, folded)):
        for item_id, _name in pairs:
            old_tier, matches = rank.get(item_id, (tier, 0))
            if old_tier == tier:
                rank[item_id] = (tier, matches - 1)
    return sorted(rank, key=lambda i: (*rank[i], -_number(i)))


def _number(item_id: str) -> int:
    """N of an id "mN", 0 otherwise."""
    return int(item_id[1:]) if item_id[1:].isdigit() else 0
