"""Names an item defines and mentions; the ranking of symbol hits."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_cli.memory.working.names import symbols
from agent_cli.memory.working.names.mentions import Mentions
from agent_cli.memory.working.names.symbols import definitions, identifiers, rank_hits

MODULE = '''"""Docs that say def not_a_function(): and class NotAClass."""
RETRY_LIMIT = 5
first, second = 1, 2

def count_attempts(obj):
    local_name = 3
    def inner_helper():
        pass
    return local_name

class Retrier:
    backoff_s = 0.5
    def run(self):
        self.attempts = 0

if True:
    FLAG = True
'''


def test_python_definitions_come_from_the_ast():
    assert definitions(MODULE) == (
        "RETRY_LIMIT",
        "first",
        "second",
        "count_attempts",
        "inner_helper",
        "Retrier",
        "backoff_s",
        "run",
        "FLAG",
    )


def test_text_that_does_not_parse_falls_back_to_the_regex():
    diff = (
        "--- a/retry.py\n+++ b/retry.py\n+def count_attempts(obj):\n+    return 0\n-def old(x):\n"
    )
    assert definitions(diff) == ("count_attempts",)
    js = "export async function parseHeader(raw) {}\nconst MAX_SIZE = 10\nlet total = 0\n"
    assert definitions(js) == ("parseHeader", "MAX_SIZE", "total")
    assert definitions("pub fn read_all(path: &str) {}\nstruct Config {}\n") == (
        "read_all",
        "Config",
    )


def test_logs_define_nothing():
    log = "2025-03-01 12:00:01 INFO worker job=12 status=ok took 35ms\nretries=0\n"
    assert definitions(log) == ()
    assert definitions("") == ()


def test_identifiers_are_words_of_two_or_more_characters():
    assert identifiers("x = count_attempts(job_1) + 3ms") == {"count_attempts", "job_1", "ms"}


def test_mentioned_names_are_the_known_ones_the_text_uses_once_each():
    known = {"count_attempts": 0, "job_1": 3, "unused": 1}
    assert Mentions(known).found_in("count_attempts(job_1); count_attempts(x) 3ms") == {
        "count_attempts",
        "job_1",
    }


def test_rank_hits_puts_ids_then_exact_then_folded_names_first():
    ranked = rank_hits(
        ["m3"],
        [("m5", "a_name"), ("m9", "a_name"), ("m5", "b_name")],
        [("m5", "a_name"), ("m7", "a_name")],
    )
    assert ranked == ["m3", "m5", "m9", "m7"]


# definitions() skips the parse where a skeleton of the text shows what the parse would find.
# These compare it with the rule it must keep: the parse when the text has `def`/`class` and
# parses, the line regex otherwise.


def parsed_names(text: str) -> list[str] | None:
    """The names _collect() finds in `text`, None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names: list[str] = []
    symbols._collect(tree.body, names, in_function=False)
    return names


def by_parse(text: str) -> tuple[str, ...]:
    """definitions() as it was before the skeleton: parse whenever there is a def or class."""
    regex = re.compile("^" + symbols._DEF_LINE.pattern[2:], re.MULTILINE)  # `^` for the `\n`
    found = symbols._unique([a or b for a, b in regex.findall(text)])
    if "def " not in text and "class " not in text:
        return found if symbols._OTHER_HINTS.search(text) else ()
    names = parsed_names(text)
    return found if names is None else symbols._unique(names)


TRICKY = [
    MODULE,
    "def f():\n    '''doc\n    def not_this(): pass\n    x = 1\n    '''\n    return 1\nY = 2\n",
    "try:\n    import fast\nexcept ImportError:\n    def fast(): pass\nelse:\n    def slow(): pass\n",
    "if TYPE_CHECKING:\n    from x import y\n    ALIAS = int\nelse:\n    ALIAS = str\n",
    "def outer():\n    if flag:\n        def hidden(): pass\n    def inner(): pass\n",
    "class A: x = 1; y = 2\nclass B(Exception): pass\ndef one(): return 1\n",
    "first = second = third = 0\nfour, five = 4, 5\n(six, seven) = 6, 7\n*rest, last = []\n",
    "value: int = 3\nbare: str\nobj.attr = 1\nitems[0] = 2\ntotal += 1\nflag == 3\n",
    "handler = lambda event=None: event\nname = 'def fake(): pass'  # def fake2(): pass\n",
    "call(\nkeyword = 1)\ndef real():\n    pass\n",
    "data = {\n    'a':\n        1,\n}\ndef after(): pass\n",
    "async def fetch():\n    async for row in rows:\n        def nested(): pass\n",
    "match command:\n    case 'go':\n        def moved(): pass\ndef outside(): pass\n",
    "for i in range(3):\n    def made(): pass\nelse:\n    DONE = True\n",
    "while True:\n    x = 1\n    break\nwith open(p) as fh:\n    content = fh.read()\n",
    "try:\n    pass\nexcept* ValueError:\n    def grouped(): pass\n",
    "x = 1 \\\n    + 2\ndef cont(): pass\n",
    "s = f'{value!r:>10}'\nt = rb'\\d+' \nu = '''\nclass NotAClass: pass\n'''\n",
    "\tdef tabbed(): pass\n",
    "    def method(self):\n        return 1\n",
    "+def added(x):\n+    return x\n-def removed(x):\n",
    "src/app.py:12:def found_by_grep():\nsrc/app.py:40:class AlsoFound:\n",
    'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n    def broken(:\n',
    "```python\ndef in_markdown():\n    pass\n```\n",
    "The class Foo is used by bar, and def baz is gone.\n",
    "名前 = 1\ndef unicode_ok(): pass\n",
    "def f(a, b=1, *args, c: 'x:y' = 2, **kw) -> 'r':\n    return a\nZ: 'T:' = 3\n",
    "if x: LOCAL = 1\nelif y: OTHER = 2\nelse: LAST = 3\n",
    "x = 1\r\ndef crlf(): pass\r\n",
    "def f():\n    return (\n" + "(" * 40 + "1" + ")" * 40 + "\n    )\n",
    # function bodies and blocks passed over without reading their lines
    "def f():\n    x = 1\n\n    y = 2\nZ = 3\n",
    "def f():\n\n\ndef g():\n    pass\n",
    "class K:\n    def m(self):\n        a = 1\n    ATTR = 2\n",
    "def f():\n    with x:\n        y = 1\n    def inner():\n        z = 1\nW = 1\n",
    "if x:\n    def f():\n        q = 1\nelse:\n    R = 2\n",
    "def f():\n    x = 1\n  y = 2\nV = 1\n",
    "def f():\n    x = 1\n        y = 2\nV = 1\n",
    "def f():\n    if a:\n        b = 1\n    else:\n        c = 2\n",
    "def f():\n    match x:\n        case 1:\n            def g(): pass\nU = 1\n",
    "def f():\n    pass",
    "def f():\n    " + "x = 1\n    " * 50 + "return x\nclass After:\n    B = 1\n",
]


# One statement after a function: where the skeleton misreads it, its names and the regex's
# may still agree, so only the parse catches the difference.
ONE_LINERS = [
    "(six, seven) = 6, 7",
    "[aa, bb] = cc",
    "*aa, bb = cc",
    "aa, *bb = cc",
    "aa, = cc",
    "(xx): int = 1",
    "ff = lambda aa, bb=1: aa",
    "xx = lambda: 0",
    "xx = yy = 1",
    "xx=1",
    "xx:int=1",
    "xx: int",
    "match = 1",
    "type = 1",
    "class AA: xx = 1",
    "class AA: pass",
    "if xx: yy = 1",
    "if lambda: 0: yy = 1",
    "for ii in rr: zz = 1",
    "aa.bb = 1",
    "aa[0] = 1",
    "xx += 1",
    "xx == 1",
    "xx = 1; yy = 2",
    "xx = 'aa = bb'",
    "xx = (\n1)",
    "print(aa=1)",
    "None",
    "async with aa: bb = 1",
    "del xx",
    "global xx",
    "xx = not_lambda",
    "_x = 1",
    "@dec",
]


@pytest.mark.parametrize("text", TRICKY + [f"def head(): pass\n{line}\n" for line in ONE_LINERS])
def test_definitions_agree_with_the_parse_on_tricky_text(text):
    assert definitions(text) == by_parse(text)


def test_definitions_agree_with_the_parse_on_this_repository():
    root = Path(__file__).resolve().parents[2]
    checked = 0
    for path in sorted(root.glob("agent_cli/**/*.py")) + sorted(root.glob("tests/**/*.py")):
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        windows = ["\n".join(lines)] + [
            "\n".join(lines[i : i + 30]) for i in range(0, len(lines), 23)
        ]
        for text in windows:
            assert definitions(text) == by_parse(text), (path, text[:200])
            checked += 1
    assert checked > 100


def test_definitions_agree_with_the_parse_on_generated_python():
    simple = [
        "x = 1",
        "a, b = 1, 2",
        "(a, b) = c",
        "y: int",
        "z.w = 1",
        "q = r = 2",
        "f = lambda v=1: v",
        "x += 1",
        "print(x)",
        "import os",
        "m = 1; n = 2",
        "s = '''a\nb = 2'''",
        "t = 'a#b'  # c = 4",
        "d = {'k':\n  1}",
        "return x",
        "pass",
    ]
    headers = [
        "if x:",
        "else:",
        "for i in r:",
        "while c:",
        "try:",
        "except E:",
        "finally:",
        "with a as b:",
        "def f{n}(a, b=1):",
        "async def g{n}():",
        "class C{n}(B):",
        "async for z in q:",
        "match v:",
        "if y: yv = 1",
        "class D{n}: pass",
        "@dec",
    ]
    rng = random.Random(11)

    def block(depth: int, indent: str) -> list[str]:
        out = []
        for _ in range(rng.randrange(1, 4)):
            if depth < 3 and rng.random() < 0.4:
                header = rng.choice(headers).format(n=rng.randrange(99))
                out.append(indent + header)
                if header.endswith(":"):
                    out += block(depth + 1, indent + "    ")
            else:
                out.append(indent + rng.choice(simple).replace("\n", "\n" + indent))
        return out

    for _ in range(1500):
        text = "\n".join(block(0, "")) + "\n"
        if rng.random() < 0.3:  # broken on purpose
            at = rng.randrange(len(text))
            text = text[:at] + text[at + 1 :]
        assert definitions(text) == by_parse(text), text
        names = parsed_names(text)
        assert names is None or symbols._shape(text) in (None, names), text


def counting_parse(monkeypatch) -> list[str]:
    """The texts symbols.py parses from now on (pytest's own ast.parse is left alone)."""
    parsed: list[str] = []

    def parse(text, *args, **kwargs):
        parsed.append(text)
        return ast.parse(text, *args, **kwargs)

    monkeypatch.setattr(symbols, "ast", SimpleNamespace(**{**vars(ast), "parse": parse}))
    return parsed


def test_the_parse_is_skipped_where_its_answer_is_known(monkeypatch):
    parsed = counting_parse(monkeypatch)
    functions = (
        'def load_job(value, limit=3):\n    """Load a job."""\n    step_0 = int(value)\n'
        "    return step_0 if step_0 < limit else None\n\n\ndef save_job(job):\n    pass\n"
    )
    assert definitions(functions) == ("load_job", "save_job")
    assert definitions("--- a/jobs.py\n+++ b/jobs.py\n" + "+" + functions.replace("\n", "\n+")) == (
        "load_job",
        "save_job",
    )
    assert definitions("src/jobs.py:12:def load_job(value):\n") == ()  # not at a line start
    assert definitions("    def method(self):\n        return 1\n") == ("method",)
    assert parsed == []


def test_the_parse_still_decides_where_the_skeleton_cannot(monkeypatch):
    parsed = counting_parse(monkeypatch)
    assert definitions(MODULE)[-3:] == ("backoff_s", "run", "FLAG")  # class and if blocks
    assert parsed == [MODULE]


PARSED = [
    (text, names)
    for text in TRICKY + [f"def head(): pass\n{line}\n" for line in ONE_LINERS]
    if (names := parsed_names(text)) is not None
]


@pytest.mark.parametrize(("text", "names"), PARSED)
def test_the_skeleton_reads_what_the_parse_finds_or_says_it_is_unsure(text, names):
    # definitions() would still be right if _shape() were wrong (it parses whenever the two
    # differ), so _shape() is held to its own promise: the parse's names exactly, or None.
    assert symbols._shape(text) in (None, names)
