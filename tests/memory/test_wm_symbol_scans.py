"""The fast scans of symbols.py give what the plain regexes give: comments and strings found with
str.find, words cut with bytes.translate."""

import random
import re

from agent_cli.memory.working.names import symbols
from agent_cli.memory.working.names.mentions import Mentions

PIECES = [
    "a",
    "b_",
    "1",
    " ",
    "\t",
    "\n",
    "=",
    "#",
    "'",
    '"',
    '"""',
    "'''",
    "\\",
    "def ",
    "x",
    "(",
    ")",
    "é",
    "\x7f",
    "-",
    ".",
]
TRICKY = [
    'x = "# not a comment"\ny = 2  # it\'s a comment\n',
    "it's = 3\nname = 'unterminated\n# after\n",
    'doc = """a "quoted" word\n# still inside\n"""  # outside\n',
    "s = 'a\\'b' + \"c\\\"d\" # tail\n",
    "'''\"\"\"''' \"\"\"'''\"\"\" ''''\n",
    "no strings and no comments here\n",
    "",
]


def _random_texts(count: int) -> list[str]:
    rng = random.Random(5)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randrange(40))) for _ in range(count)]


def _by_regex(text: str) -> str:
    return symbols._TEXT.sub(lambda m: "" if m.group().startswith("#") else symbols._HOLE, text)


def test_comments_and_strings_are_blanked_as_the_regex_substitution_does():
    for text in TRICKY + _random_texts(3000):
        assert symbols._blank(text) == _by_regex(text), repr(text)


def test_mentioned_words_are_the_regex_words():
    texts = TRICKY + _random_texts(3000) + ["call parse_x(1), 456ms, b_.x-a\x7fb"]
    names = {word: 0 for text in texts for word in re.findall(r"[A-Za-z0-9_]+", text)[:3]}
    found = Mentions(names)
    for text in texts:
        words = re.findall(r"[A-Za-z0-9_]+", text)
        assert found.found_in(text) == names.keys() & words, repr(text)


def test_a_line_that_starts_with_a_digit_defines_nothing():
    assert symbols._regex_definitions("2025-03-01 x = 1\n1st = 2\n") == ()
    assert symbols._regex_definitions(
        "pub fn parse_x() {\npublic static function render() {\n"
    ) == (
        "parse_x",
        "render",
    )


# _DEF_LINE written with plain (backtracking) repeats: what its possessive form must find.
_BACKTRACKING_DEF_LINE = re.compile(
    r"\n(?=[ \t+A-Za-z_])(?:[ \t+]*(?:(?:export|p(?:ub(?:lic)?|rivate)|static|async)[ \t]+)*"
    r"(?:def|c(?:lass|onst)|f(?:unc(?:tion)?|n)|struct|interface|t(?:rait|ype)|enum|let|var)"
    r"[ \t]+\*?([A-Za-z_][A-Za-z0-9_]*)"
    r"|\+?([A-Za-z_][A-Za-z0-9_]*)(?:[ \t]*:[^=\n]*)?[ \t]+=(?!=))",
)
DEF_PIECES = [
    "x",
    "ab",
    "_1",
    " ",
    "\t",
    ":",
    "=",
    "==",
    "+",
    "*",
    "\n",
    "def",
    "class",
    "const",
    "fn",
    "let",
    "pub",
    "public",
    "private",
    "static",
    "export",
    "async",
    "int",
    "[",
    "]",
]


def test_definition_lines_are_those_the_backtracking_regex_finds():
    rng = random.Random(11)
    texts = [
        "x: int = 1\ny:int=2\nz : dict[str, int]  = {}\nw: T == v\npub static fn run_it() {\n",
        "+name = 1\n+ other = 2\n\tindented = 3\nexport async function load() {\n",
    ]
    texts += [
        "".join(rng.choice(DEF_PIECES) for _ in range(rng.randrange(20))) for _ in range(40000)
    ]
    for text in texts:
        expected = _BACKTRACKING_DEF_LINE.findall("\n" + text)
        assert symbols._DEF_LINE.findall("\n" + text) == expected, repr(text)
