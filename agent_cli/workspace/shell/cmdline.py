"""Reading a shell command line the way bash would: words, pipelines, redirections, wrappers.

One parser serves the command policy (what a command really runs) and the test detector
(whether a command runs a test suite), so both see through the same wrappers.
"""

from __future__ import annotations

import os
import re
import shlex

_OPERATORS = {";", "&&", "||", "|", "|&", "&", "\n", "(", ")", "{", "}"}
# shells, which run the script given after `-c`: the policy reads that script, and the
# acceptance gate whether its status can be anything but 0
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash"})
PIPE, BREAK, REDIRECT = "pipe", "break", "redirect"
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# Words that run the rest of the line as a command, and their options that take a value.
WRAPPERS: dict[tuple[str, ...], set[str]] = {
    ("env",): {"-u", "--unset", "-C", "--chdir"},
    ("nohup",): set(),
    ("time",): {"-f", "-o"},
    ("nice",): {"-n", "--adjustment"},
    ("ionice",): {"-c", "-n", "-p"},
    ("stdbuf",): {"-i", "-o", "-e"},
    ("setsid",): set(),
    ("command",): set(),
    ("builtin",): set(),
    ("exec",): {"-a"},
    ("chronic",): set(),
    ("timeout",): {"-s", "-k", "--signal", "--kill-after"},
    ("unbuffer",): set(),
    ("watch",): {"-n"},
    ("xargs",): {
        "-I",
        "-n",
        "-P",
        "-L",
        "-d",
        "-a",
        "-E",
        "-s",
        "--max-args",
        "--max-procs",
        "--delimiter",
    },
    ("flock",): {"-w", "-E"},
    ("then",): set(),
    ("do",): set(),
    ("else",): set(),
    ("elif",): set(),
    ("if",): set(),
    ("while",): set(),
    ("until",): set(),
    ("!",): set(),
    ("uv", "run"): {"--with", "--python", "-p", "--directory", "--project", "--package"},
    ("poetry", "run"): set(),
    ("pipenv", "run"): set(),
    ("pdm", "run"): set(),
    ("hatch", "run"): set(),
    ("bundle", "exec"): set(),
    ("npx",): set(),
    ("pnpx",): set(),
    ("bunx",): set(),
}
_SKIPS_POSITIONAL = {("timeout",), ("flock",)}  # `timeout 10 cmd`, `flock FILE cmd`
_TEST_PROGRAMS = {
    "pytest",
    "py.test",
    "tox",
    "nox",
    "nosetests",
    "nose2",
    "jest",
    "vitest",
    "mocha",
    "rspec",
    "phpunit",
    "ctest",
    "trial",
    "ava",
    "karma",
    "prove",
}
_TEST_MODULES = {"pytest", "unittest", "tox", "nox", "nose", "nose2"}
_SCRIPT_RUNNERS = {"npm", "yarn", "pnpm", "bun"}  # `npm run test` is `npm test`
_TEST_SUBCOMMANDS = {
    "npm": {"test", "t"},
    "yarn": {"test"},
    "pnpm": {"test"},
    "bun": {"test"},
    "deno": {"test"},
    "go": {"test"},
    "cargo": {"test", "nextest"},
    "make": {"test", "tests", "check"},
    "gmake": {"test", "tests", "check"},
    "mvn": {"test", "verify"},
    "gradle": {"test", "check"},
    "gradlew": {"test", "check"},
    "dotnet": {"test"},
    "mix": {"test"},
    "swift": {"test"},
    "stack": {"test"},
    "cabal": {"test"},
    "rake": {"test", "spec"},
}


def shell_words(cmd: str) -> list[str]:
    """Words and operator tokens of a shell command (quotes removed); ValueError if unbalanced."""
    lexer = shlex.shlex(cmd, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def kind(word: str) -> str | None:
    """What an operator token does: pipe, break (; && || & newline brackets), redirect; None for a word."""
    if word in ("{", "}"):
        return BREAK
    if not word or any(c not in ";&|()<>\n" for c in word):
        return None
    if "(" in word or ")" in word:
        return BREAK
    if "<" in word or ">" in word:
        return REDIRECT
    return PIPE if "|" in word and "||" not in word else BREAK


def pipelines(words: list[str]) -> list[list[list[str]]]:
    """Words grouped into pipelines of stages; redirect operators stay inside their stage."""
    found: list[list[list[str]]] = [[[]]]
    for word in words:
        what = kind(word)
        if what == BREAK:
            found.append([[]])
        elif what == PIPE:
            found[-1].append([])
        else:
            found[-1][-1].append(word)
    return [[stage for stage in p if stage] for p in found if any(p)]


def simple_commands(words: list[str]) -> list[list[str]]:
    """Every stage of every pipeline, redirections removed: the commands the line runs."""
    return [split_redirects(stage)[0] for p in pipelines(words) for stage in p]


def split_redirects(stage: list[str]) -> tuple[list[str], list[str]]:
    """The stage's words without redirections, and the files it redirects output into."""
    argv, targets = [], []
    words = iter(stage)
    for word in words:
        if kind(word) == REDIRECT:
            target = next(words, "")
            if ">" in word:
                targets.append(target)
        else:
            argv.append(word)
    return argv, targets


def unwrap(argv: list[str]) -> list[str]:
    """`argv` without leading VAR=value words and wrappers such as env, nohup, timeout, uv run."""
    while argv:
        if ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
            continue
        prefix = _wrapper(argv)
        if prefix is None:
            return argv
        argv = skip_options(argv[len(prefix) :], WRAPPERS[prefix])
        if prefix in _SKIPS_POSITIONAL and argv:
            argv = argv[1:]
    return argv


def _wrapper(argv: list[str]) -> tuple[str, ...] | None:
    first = os.path.basename(argv[0])
    if first == "env" and argv[1:2] in (["-S"], ["--split-string"]):
        return None  # `env -S "cmd args"` runs a string: the policy parses it as a script
    for prefix in WRAPPERS:
        if (first, *argv[1 : len(prefix)]) == prefix:
            return prefix
    return None


def skip_options(args: list[str], takes_value: set[str]) -> list[str]:
    """`args` without leading options (and the values of those in `takes_value`)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return args[i + 1 :]
        i += 2 if args[i] in takes_value else 1
    return args[i:]


def operands(args: list[str]) -> list[str]:
    """The arguments that are not options (everything after `--` counts)."""
    if "--" in args:
        cut = args.index("--")
        return [a for a in args[:cut] if not a.startswith("-")] + args[cut + 1 :]
    return [a for a in args if not a.startswith("-")]


def command_argvs(cmd: str | list[str]) -> list[list[str]]:
    """The unwrapped argv of every simple command in `cmd` (a list is one argv, no shell)."""
    if not isinstance(cmd, str):
        return [unwrap(list(cmd))]
    try:
        words = shell_words(cmd)
    except ValueError:
        words = cmd.split()
    return [argv for argv in map(unwrap, simple_commands(words)) if argv]


def is_python(program: str) -> bool:
    """Whether `program` (a base name) is a Python interpreter: python, python3, python3.12."""
    return re.fullmatch(r"python[\d.]*", program) is not None


def is_test_command(cmd: str | list[str]) -> bool:
    """Whether `cmd` runs a test suite (pytest, python -m unittest, npm test, go test, make test...)."""
    return any(_runs_tests(argv) for argv in command_argvs(cmd))


def _runs_tests(argv: list[str]) -> bool:
    if not argv:
        return False
    program = os.path.basename(argv[0])
    if program in _TEST_PROGRAMS:
        return True
    if is_python(program) or program == "py":
        if "-m" in argv[1:-1] and argv[argv.index("-m") + 1] in _TEST_MODULES:
            return True
        return len(argv) > 2 and argv[1].endswith("manage.py") and argv[2] == "test"
    rest = [w for w in argv[1:] if not w.startswith("-")]
    if program in _SCRIPT_RUNNERS and rest[:1] == ["run"]:
        rest = rest[1:]
    if not rest:
        return False
    return rest[0] in _TEST_SUBCOMMANDS.get(program, ()) or (
        program in _SCRIPT_RUNNERS and rest[0].startswith("test:")
    )
