"""A shell script read into a tree, the way a POSIX shell reads it, without running it.

Words keep what expansion would need (`$NAME`, `$?`, quotes removed); what only running the
script shows (`$(...)`, `$1`, a glob) is marked as such. Lists, `&&`/`||`, pipelines, `!`,
subshells `( ... )`, groups `{ ...; }`, `if`, `while`/`until`, `for`, `case` and functions
are read; what is not (a here-document, bash's `[[`, `select`, `function NAME`) raises
Unknown, as does a syntax error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPERATORS = sorted(
    [
        *("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|", "(", ")", "\n"),
        *("<<<", "<<-", "<<", "<>", "<&", ">&", ">>", ">|", "&>>", "&>", "<", ">"),
    ],
    key=len,
    reverse=True,
)
_OPERATOR_CHARS = set(";&|()<>\n")
REDIRECTS = {"<<<", "<<-", "<<", "<>", "<&", ">&", ">>", ">|", "&>>", "&>", "<", ">"}
_STOPS = {"then", "elif", "else", "fi", "do", "done", "esac", "}"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")


class Unknown(Exception):
    """The script holds what this reading does not follow."""


# -- words -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """A word as written (`raw`, quotes and all) and its parts: ("lit", text), ("var", name)
    for `$NAME`, `${NAME}` or `$?`, ("dyn", text) for what only running it shows (`$(...)`,
    `$1`, a glob, `~`)."""

    raw: str
    parts: tuple[tuple[str, str], ...]

    def value(self, env: dict[str, str | None], status: int | None) -> str | None:
        """The word's text once expanded, None when it depends on what the script runs."""
        out = []
        for kind, text in self.parts:
            if kind == "lit":
                out.append(text)
            elif kind == "var" and text == "?":
                if status is None:
                    return None
                out.append(str(status))
            elif kind == "var" and env.get(text) is not None:
                out.append(str(env[text]))
            else:
                return None
        return "".join(out)

    def substitutes(self) -> bool:
        """Whether it runs a command (`$(...)`, backquotes) as it is expanded."""
        return any(kind == "dyn" and text[:2] in ("$(", "`") for kind, text in self.parts)


Token = Word | str  # a str is an operator


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.out: list[Token] = []
        self.parts: list[tuple[str, str]] = []
        self.start: int | None = None

    def run(self) -> list[Token]:
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if text.startswith("\\\n", self.i):
                self.i += 2
            elif char in " \t\r":
                self.flush()
                self.i += 1
            elif char == "#" and self.start is None:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif char in _OPERATOR_CHARS and (
                op := next(o for o in _OPERATORS if text.startswith(o, self.i))
            ):
                number = self.start is not None and all(k == "lit" for k, _ in self.parts)
                digits = "".join(t for _, t in self.parts)
                if op in REDIRECTS and number and digits.isdigit():
                    self.parts, self.start = [], None  # `2>`: the number names the fd
                self.flush()
                self.out.append(op)
                self.i += len(op)
            else:
                self.word_part()
        self.flush()
        return self.out

    def flush(self) -> None:
        if self.start is not None:
            merged: list[tuple[str, str]] = []
            for kind, text in self.parts:
                if merged and kind == "lit" and merged[-1][0] == "lit":
                    merged[-1] = ("lit", merged[-1][1] + text)
                else:
                    merged.append((kind, text))
            self.out.append(Word(self.text[self.start : self.i], tuple(merged)))
        self.parts, self.start = [], None

    def word_part(self) -> None:
        text, i = self.text, self.i
        if self.start is None:
            self.start = i
        char = text[i]
        if char == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise Unknown("an unclosed quote")
            self.parts.append(("lit", text[i + 1 : end]))
            self.i = end + 1
        elif char == '"':
            self.i = self.double_quoted(i + 1)
        elif char == "\\":
            self.parts.append(("lit", text[i + 1 : i + 2]))
            self.i = i + 2
        elif char == "$":
            self.i = self.dollar(i)
        elif char == "`":
            end = _closing_backquote(text, i + 1)
            self.parts.append(("dyn", text[i : end + 1]))
            self.i = end + 1
        elif (
            char in "*?" or (char == "[" and _closes(text, i)) or (char == "~" and i == self.start)
        ):
            self.parts.append(("dyn", char))  # a glob or a home directory
            self.i = i + 1
        else:
            self.parts.append(("lit", char))
            self.i = i + 1

    def double_quoted(self, i: int) -> int:
        text = self.text
        while i < len(text) and text[i] != '"':
            if text[i] == "\\" and i + 1 < len(text):
                escaped = text[i + 1] in '$`"\\\n'
                self.parts.append(("lit", text[i + 1] if escaped else text[i : i + 2]))
                i += 2
            elif text[i] == "$":
                i = self.dollar(i, quoted=True)
            elif text[i] == "`":
                end = _closing_backquote(text, i + 1)
                self.parts.append(("dyn", text[i : end + 1]))
                i = end + 1
            else:
                self.parts.append(("lit", text[i]))
                i += 1
        if i >= len(text):
            raise Unknown("an unclosed quote")
        return i + 1

    def dollar(self, i: int, quoted: bool = False) -> int:
        text = self.text
        rest = text[i + 1 :]
        if rest.startswith("(("):
            end = _closing(text, i + 3, "(", ")", depth=2)
            inner = text[i + 3 : end - 1].strip()
            if re.fullmatch(r"[+-]?\d+", inner):
                self.parts.append(("lit", str(int(inner))))
            else:
                self.parts.append(("dyn", text[i : end + 1]))
            return end + 1
        if rest.startswith("("):
            end = _closing(text, i + 2, "(", ")")
            self.parts.append(("dyn", text[i : end + 1]))
            return end + 1
        if rest.startswith("{"):
            end = _closing(text, i + 2, "{", "}")
            inner = text[i + 2 : end]
            self.parts.append(("var", inner) if _NAME.fullmatch(inner) else ("dyn", inner))
            return end + 1
        name = _NAME.match(rest)
        if name:
            self.parts.append(("var", name.group()))
            return i + 1 + name.end()
        if rest[:1] == "?":
            self.parts.append(("var", "?"))
            return i + 2
        quotes = "" if quoted else "'\""
        if rest[:1] and (rest[0].isdigit() or rest[0] in "@*#$!-" + quotes):
            if rest[0] in "'\"":  # bash's $'...' and $"...": read as quotes, value unknown
                end = rest.find(rest[0], 1)
                if end < 0:
                    raise Unknown("an unclosed quote")
                self.parts.append(("dyn", text[i : i + end + 2]))
                return i + end + 2
            self.parts.append(("dyn", text[i : i + 2]))
            return i + 2
        self.parts.append(("lit", "$"))
        return i + 1


def _closing(text: str, i: int, opening: str, closing: str, depth: int = 1) -> int:
    """Where the bracket that closes the one(s) before `i` is, past quotes inside."""
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "'":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise Unknown(f"an unclosed {opening}")


def _closes(text: str, i: int) -> bool:
    """Whether the `[` at `i` has a `]` after it in its word: only then is it a glob (`[ 1 ]`
    is a command named `[`)."""
    end = i + 1
    while end < len(text) and text[end] not in " \t\r\n;&|()<>":
        if text[end] == "]":
            return True
        end += 1
    return False


def _closing_backquote(text: str, i: int) -> int:
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            return i
        else:
            i += 1
    raise Unknown("an unclosed backquote")


# -- the tree --------------------------------------------------------------------------------


@dataclass
class Simple:
    assigns: list[tuple[str, Word | None]]  # None: a value only known when run (`X+=1`)
    words: list[Word]
    redirects: list[tuple[str, Word]]


@dataclass
class Seq:
    items: list[tuple[AndOr, bool]] = field(default_factory=list)  # (list, run with `&`)


@dataclass
class Pipeline:
    negated: bool
    stages: list[Command]


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]]


@dataclass
class Compound:
    kind: str  # "subshell", "group", "if", "while", "until", "for", "case", "function"
    parts: list[Seq]  # subshell/group: [body]; if: cond, body, cond, body..., [else]
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    name: str = ""  # a loop's variable, a function's name
    body: Command | None = None  # a function's body


Command = Simple | Compound


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def op(self, *ops: str) -> bool:
        token = self.peek()
        return isinstance(token, str) and token in ops

    def word(self, *words: str) -> bool:
        token = self.peek()
        return isinstance(token, Word) and token.raw in words

    def peek_word(self) -> str:
        token = self.peek()
        return token.raw if isinstance(token, Word) else ""

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise Unknown("the script ends early")
        self.i += 1
        return token

    def expect(self, word: str) -> None:
        if not self.word(word):
            raise Unknown(f"{word} expected")
        self.i += 1

    def newlines(self) -> None:
        while self.op("\n"):
            self.i += 1

    def script(self) -> Seq:
        seq = self.seq()
        if self.peek() is not None:
            raise Unknown(f"unexpected {self.peek()!r}")
        return seq

    def seq(self) -> Seq:
        seq = Seq()
        while True:
            while self.op("\n", ";"):
                self.i += 1
            token = self.peek()
            if token is None or self.op(")", ";;", ";&", ";;&") or self.word(*_STOPS):
                return seq
            and_or = self.and_or()
            background = self.op("&")
            seq.items.append((and_or, background))
            if self.op("&", ";", "\n"):
                self.i += 1
            elif not (self.peek() is None or self.op(")", ";;", ";&", ";;&") or self.word(*_STOPS)):
                raise Unknown(f"unexpected {self.peek()!r}")

    def and_or(self) -> AndOr:
        node = AndOr(self.pipeline(), [])
        while self.op("&&", "||"):
            joiner = str(self.take())
            self.newlines()
            node.rest.append((joiner, self.pipeline()))
        return node

    def pipeline(self) -> Pipeline:
        negated = False
        while self.word("!"):
            self.i += 1
            negated = not negated
        stages = [self.command()]
        while self.op("|", "|&"):
            self.i += 1
            self.newlines()
            stages.append(self.command())
        return Pipeline(negated, stages)

    def command(self) -> Command:
        if self.op("("):
            self.i += 1
            body = self.seq()
            if not self.op(")"):
                raise Unknown(") expected")
            self.i += 1
            return Compound("subshell", [body], self.redirects())
        if self.word("{"):
            self.i += 1
            body = self.seq()
            self.expect("}")
            return Compound("group", [body], self.redirects())
        if self.word("if"):
            return self.if_clause()
        if self.word("while", "until"):
            kind = self.peek_word()
            self.i += 1
            cond = self.seq()
            self.expect("do")
            body = self.seq()
            self.expect("done")
            return Compound(kind, [cond, body], self.redirects())
        if self.word("for"):
            return self.for_clause()
        if self.word("case"):
            return self.case_clause()
        if self.word("function", "select", "coproc", "[[", "then", "elif", "else", "fi", "do"):
            raise Unknown(f"{self.peek()!r} is not followed")
        return self.simple()

    def if_clause(self) -> Compound:
        parts: list[Seq] = []
        self.expect("if")
        while True:
            parts.append(self.seq())
            self.expect("then")
            parts.append(self.seq())
            if self.word("elif"):
                self.i += 1
                continue
            if self.word("else"):
                self.i += 1
                parts.append(self.seq())
            self.expect("fi")
            return Compound("if", parts, self.redirects())

    def for_clause(self) -> Compound:
        self.expect("for")
        name = self.take()
        if not isinstance(name, Word) or not _NAME.fullmatch(name.raw):
            raise Unknown("a for loop without a name")
        self.newlines()
        if self.word("in"):
            self.i += 1
            while isinstance(self.peek(), Word):
                self.i += 1
        while self.op(";", "\n"):
            self.i += 1
        self.expect("do")
        body = self.seq()
        self.expect("done")
        return Compound("for", [body], self.redirects(), name=name.raw)

    def case_clause(self) -> Compound:
        self.expect("case")
        if not isinstance(self.take(), Word):
            raise Unknown("case without a word")
        self.newlines()
        self.expect("in")
        arms: list[Seq] = []
        while True:
            self.newlines()
            if self.word("esac"):
                self.i += 1
                return Compound("case", arms, self.redirects())
            if self.op("("):
                self.i += 1
            while not self.op(")"):
                if not isinstance(self.take(), Word) and self.tokens[self.i - 1] != "|":
                    raise Unknown("a case pattern")
            self.i += 1
            arms.append(self.seq())
            if self.op(";;"):
                self.i += 1
            elif not self.word("esac"):
                raise Unknown("a case arm that falls through")

    def simple(self) -> Command:
        node = Simple([], [], [])
        while True:
            token = self.peek()
            if isinstance(token, str) and token in REDIRECTS:
                node.redirects.append(self.redirect())
            elif isinstance(token, Word):
                assignment = _ASSIGNMENT.match(token.raw)
                if assignment and not node.words:
                    value = _after(token, assignment.end())
                    appends = assignment.group().endswith("+=")
                    node.assigns.append((assignment.group(1), None if appends else value))
                else:
                    node.words.append(token)
                self.i += 1
            else:
                break
        if node.words and len(node.words) == 1 and not node.assigns and self.op("("):
            self.i += 1  # `name() body`: a function
            if not self.op(")"):
                raise Unknown(") expected")
            self.i += 1
            self.newlines()
            body = self.command()
            return Compound("function", [], name=node.words[0].raw, body=body)
        if not (node.words or node.assigns or node.redirects):
            raise Unknown(f"unexpected {self.peek()!r}")
        return node

    def redirects(self) -> list[tuple[str, Word]]:
        found = []
        while self.op(*REDIRECTS):
            found.append(self.redirect())
        return found

    def redirect(self) -> tuple[str, Word]:
        op = str(self.take())
        if op in ("<<", "<<-"):
            raise Unknown("a here-document")
        target = self.take()
        if not isinstance(target, Word):
            raise Unknown("a redirection without a target")
        return op, target


def _after(word: Word, cut: int) -> Word:
    """The value part of an assignment word `NAME=value` (`cut` characters of literal text)."""
    parts = list(word.parts)
    kind, text = parts[0]
    parts[0] = (kind, text[cut:])
    return Word(word.raw[cut:], tuple(p for p in parts if p != ("lit", "")))


def parse(script: str) -> Seq:
    """The script's tree; Unknown when it holds what is not followed here."""
    return _Parser(_Lexer(script).run()).script()
