"""Which acceptance commands a plan may carry: runnable, allowed by the policy, able to fail.

The harness runs a plan's `acceptance_cmd` itself (split with shlex, no shell), so each one
is checked when the plan arrives: its program exists (on PATH or in the repository), the
command policy does not refuse it, it holds no shell operator (which, without a shell, would
reach the program as an argument) nor a line break outside quotes (a shell's next command,
which would reach the program as its arguments and never run), it runs tests when it is
pytest (`--collect-only`, `--collectonly`, `-V`, `--cache-show` run none, whatever options the
interpreter is given first, and so does a `sh -c` script whose status is such a command's),
every test rather than those pytest's cache names (`--lf`, `--sw`: a task can write
`.pytest_cache`; in the repository's pytest settings they find an empty cache,
`workspace/shell/checkpytest.py`), with pytest's output capture on (`-s`, `--capture=no` or
`tee-sys` would let code under test print a summary line of its own), its asserts when it is
Python's own code (`python -O check.py` drops them), and it can fail at
all. What cannot fail: `true`, `:`, `echo ...`, `ls`, `python -c pass` (code of nothing but
constants, `pass` and `print`), and shell scripts whose status is one of those whatever comes
before: `... || true`, `...; exit 0` (or 256), `...; true; exit`, `true && true`, `... &`, a
group `{ ...; true; }`, and a pipeline into a filter (`pytest | tail -3`: the status is
tail's, unless the script sets `pipefail`; `grep` with a pattern that every line matches, such
as `pytest | grep -c .`, is one). `python -c 'import sys'` cannot fail either: a module built
into the interpreter (or `os`, loaded before the code runs) is found before any file of the
repository could shadow it (`import json` can fail, so it is allowed); nor can code that only
asserts a constant or exits 0 (`assert True`, `sys.exit(0)`, `os._exit(0)`, `raise
SystemExit`), `python --version`, `python -m this`, or `test`/`[` comparing words written in the command (`[ 1 -eq 1 ]`; one with a `$`, a glob or a
file test can fail). `make -n` runs no test, like `pytest --collect-only`. A check runs with
/dev/null for its input, so an interpreter given no script (`python`, `python -`, `bash`, `sh
-s`) and a filter given no file (`cat`) cannot fail either; nor can `PROGRAM --version` or
`--help`, or a report on the machine (`whoami`, `uname -a`). The interpreter's own options are
read past (`python -W ignore -c pass` is `python -c pass`), and an operator is found written
against a word as well (`pytest -q; true`, `python - <<< 'code'`). A plan with a bad command
goes back to the model with the reason.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from agent_cli.workspace.shell.cmdline import SHELLS, is_python, shell_words, unwrap

Refusal = Callable[[str], "str | None"]
_ALWAYS_SUCCEED = {"true", ":", "echo", "printf", "yes", "sleep", "pwd", "date"}
_ENDINGS = {";", "||", "&", "\n"}  # `X ; true` and `X || true` end in success whatever X does
# programs that read their input and exit 0 whatever it holds: a pipeline's status when last
_FILTERS = {"tail", "head", "tee", "cat", "sort", "uniq", "wc", "cut", "tr", "less", "more", "nl"}
# grep patterns every line of a test run's output matches (`.`: every line but an empty one)
_MATCH_ANY = {"", ".", ".*", "^", "$", "^.*", ".*$", "^.*$"}
# modules a `python -c` finds before any file of the repository: built into the interpreter,
# or `os`, which the interpreter has loaded (frozen) before it runs the code
_UNSHADOWED = {*sys.builtin_module_names, "os"}
# what a shell reads as an operator, unquoted; not parentheses: without a shell a word such as
# `print(1)` reaches the program whole, as it should
_PUNCTUATION = ";<>|&"
# line breaks: to a shell an unquoted one ends a command as `;` does; shlex reads it (and a
# lone CR, which the console does not show) as a space between arguments
_LINE_BREAKS = "\n\r"
# pytest options under which it runs no test
_NO_TESTS = {
    "--co",
    "--collect-only",
    "--collectonly",
    "--cache-show",
    "--setup-plan",
    "--setup-only",
    "--fixtures",
    "--fixtures-per-test",
    "--markers",
    "--version",
    "-V",
}
# pytest options that run only the tests its cache (.pytest_cache) names: the last failures,
# or those from the last failing one on
_FROM_CACHE = {"--lf", "--last-failed", "--sw", "--stepwise", "--sw-skip", "--stepwise-skip"}
# pytest's short options that take a value: letters after one in a cluster are that value
PYTEST_VALUED = set("kmpcoWnr")
# make's long options that print the commands instead of running them
_MAKE_DRY = {"--dry-run", "--just-print", "--recon"}
# what any program answers with a report of itself, exiting 0
_VERSION = {"--version", "--help"}
# programs that report on the machine and exit 0, given options only
_REPORTS = {"id", "whoami", "uname", "nproc", "hostname", "arch", "printenv", "groups", "users"}
# arguments with which python only reports itself and exits 0
_PYTHON_INFO = {"--version", "-V", "-VV", "--help", "-h", "-?", "--help-env", "--help-xoptions"}
# `test A OP B` on words: the comparisons that read neither a file nor the environment
_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "=": str.__eq__,
    "==": str.__eq__,
    "!=": str.__ne__,
}
_NUMBER_TESTS: dict[str, Callable[[int, int], bool]] = {
    "-eq": int.__eq__,
    "-ne": int.__ne__,
    "-lt": int.__lt__,
    "-le": int.__le__,
    "-gt": int.__gt__,
    "-ge": int.__ge__,
}
# options that make `git diff` report through its status (`git status` has none)
_GIT_STATUS_OPTIONS = {"--exit-code", "--quiet", "--check", "-s"}


def problem(cmd: str, root: Path, refusal: Refusal | None = None) -> str | None:
    """Why `cmd` cannot be a task's acceptance command, or None when it can."""
    if "\0" in cmd:  # no program can be given one: starting it would fail
        shown = cmd.replace("\0", "\\0")
        return f"`{shown}` holds a NUL character, which no command line can"
    if _line_break(cmd):
        shown = cmd.replace("\n", "\\n").replace("\r", "\\r")
        return (
            f"`{shown}` holds a line break outside quotes, which reads as the start of another "
            "command, but acceptance commands run without a shell, so what follows it would "
            "reach the program as arguments and never run: write one command on one line, or "
            "wrap several in sh -c '... && ...'"
        )
    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        return f"`{cmd}` cannot be parsed ({e})"
    if not argv:
        return "the acceptance command is empty"
    reason = refusal(cmd) if refusal else None
    if reason:
        return f"`{cmd}` is refused by the command policy: {reason}"
    operators = _operators(cmd)
    if operators:
        return (
            f"`{cmd}` holds the shell operator {operators[0]!r}, but acceptance commands run "
            f"without a shell, so the program would get it as an argument; wrap the command "
            f"in sh -c '...' if it needs a shell"
        )
    idle = _runs_no_test(argv) or _script_runs_no_test(argv)
    if idle:
        return f"`{cmd}` runs no test ({idle}); drop the option so that the tests run"
    picked = _from_cache(pytest_args(argv) or [])
    if picked:
        return (
            f"`{cmd}` runs only the tests pytest's cache names ({picked}), and .pytest_cache "
            "is the work tree's to write; drop the option so that every test runs"
        )
    through = _uncaptured(pytest_args(argv) or [])
    if through:
        return (
            f"`{cmd}` lets what the code under test prints past pytest's capture ({through}), "
            "where a summary line it prints (`5 passed in 0.01s`) reads as pytest's own; drop "
            "the option"
        )
    if cannot_fail(argv):
        return (
            f"`{cmd}` always succeeds, so it proves nothing; use a command that fails when "
            "the task is not done (a test, a script that checks the result)"
        )
    for program in {argv[0], *unwrap(argv)[:1]}:
        if not _exists(program, root):
            return (
                f"`{cmd}`: the program {program!r} is not on PATH nor in the repository, so "
                "the command could only fail with exit 127"
            )
    return None


def missing(cmd: str, root: Path) -> bool:
    """Whether a program `cmd` runs (its first word, or the one a wrapper such as `env` runs)
    is on neither PATH nor in the repository: what its exit 127 means then. A program that
    exists and exits 127 itself (code under test calling `os._exit(127)`) failed its check."""
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return False
    return any(not _exists(program, root) for program in {*argv[:1], *unwrap(argv)[:1]})


def _operators(cmd: str) -> list[str]:
    """The unquoted shell operators in `cmd`, written apart or not (`pytest -q; true`,
    `python - <<< 'pass'`); `';'`, quoted, is an argument."""
    lexer = shlex.shlex(cmd, posix=False, punctuation_chars=_PUNCTUATION)
    lexer.whitespace_split = True
    try:
        words = list(lexer)  # posix=False keeps the quotes, so a quoted word is not one
    except ValueError:
        return []
    return [word for word in words if word and all(c in _PUNCTUATION for c in word)]


def _line_break(cmd: str) -> bool:
    """Whether `cmd` holds a line break (LF or CR) that no quotes hold, escaped or not; a
    quoted one is part of an argument (a `sh -c` script of two lines), to a shell as well."""
    quote = ""
    escaped = False
    for char in cmd:
        if char in _LINE_BREAKS and not quote:
            return True
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
    return False


def _exists(program: str, root: Path) -> bool:
    if "/" in program:
        path = Path(program) if os.path.isabs(program) else root / program
        return _is_file(path) and os.access(path, os.X_OK)
    return shutil.which(program) is not None or _is_file(root / program)


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; False for a name the file system refuses (too long)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def cannot_fail(argv: list[str], stdin_empty: bool = True) -> bool:
    """Whether the command (an argv run without a shell) exits 0 whatever the repository holds.

    `stdin_empty`: its input is empty (/dev/null, as the harness runs a check; not so for a
    pipeline's later stage), so an interpreter given no script (`python`, `python -`, `sh`,
    `bash -s`) runs nothing, and a filter given no file (`cat`) copies nothing."""
    argv = unwrap(argv)
    if not argv:
        return True
    program = os.path.basename(argv[0])
    if program in _ALWAYS_SUCCEED:
        return True
    args = argv[1:]
    if args and all(arg in _VERSION for arg in args) and not is_python(program):
        return True  # `git --version`: a program that exists reports itself
    if program in _REPORTS or (stdin_empty and program in _FILTERS):
        return all(arg.startswith("-") and arg != "-" for arg in args)
    if program == "ls":  # only a path it is given can be missing
        return all(arg.startswith("-") for arg in argv[1:])
    if program in ("test", "["):
        args = argv[1:-1] if program == "[" and argv[-1:] == ["]"] else argv[1:]
        return _constant_test(args) is True
    if program == "git":  # `git status`: a report, whatever the tree holds
        args = argv[1:]
        return args[:1] in (["status"], ["diff"]) and not _GIT_STATUS_OPTIONS & set(args)
    if is_python(program):
        kind, rest = python_run(args)
        if kind == "info":
            return True  # `python --version`: the interpreter reports itself
        if kind == "stdin":
            return stdin_empty
        if kind == "m":  # `-m this` prints a text; `-m pip --version` reports pip
            return rest[:1] in (["this"], ["__hello__"], ["__phello__"]) or (
                len(rest) > 1 and all(arg in _VERSION for arg in rest[1:])
            )
        return kind == "c" and bool(rest) and _code_cannot_fail(rest[0])
    if program in SHELLS:
        kind, script = _shell_run(args)
        if kind == "stdin":
            return stdin_empty
        return script is not None and _script_cannot_fail(script, "pipefail" in args)
    return False


def python_run(args: list[str]) -> tuple[str, list[str]]:
    """What the interpreter runs, past its own options (`-W ignore`, `-I`, a cluster such as
    `-Sc`): ("c", [code, args...]), ("m", [module, args...]), ("script", [file, args...]),
    ("stdin", args) for `-` or no script at all, ("info", []) for `--version` or `--help`,
    ("error", []) for an option missing its value."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-":
            return "stdin", args[i + 1 :]
        if arg == "--":
            return ("script", args[i + 1 :]) if args[i + 1 :] else ("stdin", [])
        if arg in _PYTHON_INFO:
            return "info", []
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1  # its value follows
            continue
        if not arg.startswith("-"):
            return "script", args[i:]
        for at, letter in enumerate(arg[1:], 2):
            if letter in "cm":
                attached = arg[at:]
                return letter, [attached, *args[i + 1 :]] if attached else args[i + 1 :]
            if letter in "WX":
                if not arg[at:] and i + 1 == len(args):
                    return "error", []  # `-W` without its value: python refuses to start
                i += 0 if arg[at:] else 1  # `-W ignore`: the value is the next word
                break
            if letter in "Vh?":
                return "info", []
        i += 1
    return "stdin", []


def _runs_no_test(argv: list[str]) -> str | None:
    """Why `argv` runs no test: pytest (or `python -m pytest`) with an option that only
    collects or lists, make with one that only prints the commands, Python under -O running
    code of its own (its asserts dropped); None otherwise."""
    before, argv = argv, unwrap(argv)
    if not argv:
        return None
    if _optimized(before[: len(before) - len(argv)], argv):
        return "Python under -O drops every assert statement, so a check of asserts cannot fail"
    program = os.path.basename(argv[0])
    if program in ("make", "gmake"):
        short = [arg[1:] for arg in argv[1:] if arg[:1] == "-" and arg[1:2] not in ("-", "")]
        dry = any(arg in _MAKE_DRY for arg in argv[1:])
        # `-n` alone or in a cluster (`-kn`); a cluster's letters after one taking a value
        # (`-C dir`, `-f file`, `-j 4`...) are that value, so the scan stops there
        for flags in short:
            for letter in flags:
                if letter == "n":
                    dry = True
                if letter in "CfIjloW":
                    break
        return "make only prints the commands" if dry else None
    args = pytest_args(argv)
    return "pytest only collects or lists them" if args and lists_only(args) else None


def _optimized(prefix: list[str], argv: list[str]) -> bool:
    """Whether Python `argv` runs code with its asserts dropped: `-O` (or `-OO`, in a cluster)
    among the interpreter's options or `PYTHONOPTIMIZE` set before it (`env PYTHONOPTIMIZE=1`),
    and the code is not pytest's, whose asserts pytest rewrites into ones -O keeps."""
    if not is_python(os.path.basename(argv[0])):
        return False
    kind, rest = python_run(argv[1:])
    if kind not in ("c", "m", "script") or (kind == "m" and rest[:1] == ["pytest"]):
        return False
    env = [w.split("=", 1)[1] for w in prefix if w.startswith("PYTHONOPTIMIZE=")]
    if any(value not in ("", "0") for value in env):
        return True
    for arg in argv[1:]:
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            return False
        for letter in arg[1:]:
            if letter == "O":
                return True
            if letter in "cmWX":
                break
    return False


def pytest_args(argv: list[str]) -> list[str] | None:
    """pytest's arguments when `argv` (wrappers aside) runs pytest itself: `pytest ARGS`,
    `python -m pytest ARGS` (`python -I -m pytest`, `python -mpytest`); None otherwise."""
    argv = unwrap(argv)
    program = os.path.basename(argv[0]) if argv else ""
    if program in ("pytest", "py.test"):
        return argv[1:]
    if is_python(program):
        kind, rest = python_run(argv[1:])
        if kind == "m" and rest[:1] == ["pytest"]:
            return rest[1:]
    return None


def _from_cache(args: list[str]) -> str | None:
    """The option with which pytest picks its tests from its cache, or None."""
    return next((arg for arg in args if arg.split("=", 1)[0] in _FROM_CACHE), None)


def _uncaptured(args: list[str]) -> str | None:
    """The option with which pytest shows what the code it runs prints as it prints it (`-s`,
    alone or in a cluster such as `-vs`; `--capture=no`, `--capture tee-sys`), or None."""
    for arg, after in zip(args, [*args[1:], ""], strict=False):
        if arg == "--":
            return None
        name, _, value = arg.partition("=")
        if name == "--capture" and (value or after) in ("no", "tee-sys"):
            return arg if value else f"{arg} {after}"
        if arg[:1] == "-" and arg[1:2] not in ("-", ""):
            for letter in arg[1:]:
                if letter == "s":
                    return arg
                if letter in PYTEST_VALUED:
                    break  # the rest of the cluster is this option's value (`-rs`, `-ks`)
    return None


def lists_only(args: list[str]) -> bool:
    """Whether pytest given `args` runs no test: it only collects, lists or reports."""
    return any(arg.split("=", 1)[0] in _NO_TESTS or arg in ("-h", "--help") for arg in args)


def _script_runs_no_test(argv: list[str]) -> str | None:
    """_runs_no_test() of the command whose status a shell's `-c` script exits with
    (`sh -c 'pytest; pytest --co'`, `sh -c 'make -n test'`)."""
    argv = unwrap(argv)
    if not argv or os.path.basename(argv[0]) not in SHELLS:
        return None
    kind, script = _shell_run(argv[1:])
    if kind != "c" or script is None:
        return None
    try:
        words = _bare(_without_comments(shell_words(script)))
    except ValueError:
        return None
    return _last_runs_no_test(words)


def _last_runs_no_test(words: list[str]) -> str | None:
    while words and words[-1] in (";", "\n"):
        words = words[:-1]
    cut = max((i for i, w in enumerate(words) if w in _ENDINGS | {"&&", "|"}), default=-1)
    idle = _runs_no_test(words[cut + 1 :])
    if idle and cut >= 0 and words[cut] == "&&":  # `pytest && pytest --co` fails with pytest
        return _last_runs_no_test(words[:cut])
    return idle


def _code_cannot_fail(code: str) -> bool:
    """Whether Python `code` is nothing but `pass`, constants, `print` of constants and imports
    of modules built into the interpreter."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False

    def inert(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return True
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and all(isinstance(arg, ast.Constant) for arg in node.args)
            and not node.keywords
        )

    def builtin(stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Import):
            return all(alias.name in _UNSHADOWED for alias in stmt.names)
        return (
            isinstance(stmt, ast.ImportFrom)
            and not stmt.level
            and stmt.module in _UNSHADOWED
            and all(alias.name != "*" for alias in stmt.names)
        )

    def success(node: ast.expr | None) -> bool:  # `sys.exit(0)`, `exit()`, `raise SystemExit`
        if isinstance(node, ast.Name):
            return node.id == "SystemExit"
        if not isinstance(node, ast.Call) or node.keywords or len(node.args) > 1:
            return False
        func = node.func
        named = isinstance(func, ast.Name) and func.id in ("exit", "quit", "SystemExit")
        dotted = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in (("sys", "exit"), ("os", "_exit"))
        )
        code = node.args[0] if node.args else None
        return (named or dotted) and (
            code is None or (isinstance(code, ast.Constant) and code.value in (0, None))
        )

    return all(
        isinstance(stmt, ast.Pass)
        or (isinstance(stmt, ast.Expr) and (inert(stmt.value) or success(stmt.value)))
        or (
            isinstance(stmt, ast.Assert)
            and isinstance(stmt.test, ast.Constant)
            and bool(stmt.test.value)
        )
        or (isinstance(stmt, ast.Raise) and stmt.cause is None and success(stmt.exc))
        or builtin(stmt)
        for stmt in tree.body
    )


def _constant_test(args: list[str]) -> bool | None:
    """What `test ARGS` answers when it compares only words written in the command (no `$`,
    no backquote, no file): True or False; None when it depends on anything else."""
    if any(char in arg for arg in args for char in "$`*?["):
        return None  # a variable, a command's output or a file name a shell may put there
    if args[:1] == ["!"]:
        inner = _constant_test(args[1:])
        return None if inner is None else not inner
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2 and args[0] in ("-n", "-z"):
        return (args[1] != "") == (args[0] == "-n")
    if len(args) == 3 and args[1] in _STRING_TESTS:
        return _STRING_TESTS[args[1]](args[0], args[2])
    if len(args) == 3 and args[1] in _NUMBER_TESTS:
        try:
            left, right = int(args[0]), int(args[2])
        except ValueError:
            return None  # test fails with "integer expression expected"
        return _NUMBER_TESTS[args[1]](left, right)
    return None  # a file test, `-a`/`-o`, or a form test reads otherwise


def _shell_run(args: list[str]) -> tuple[str, str | None]:
    """What a shell runs, past its options: ("c", SCRIPT) for `-c SCRIPT` (`-c` alone or in a
    cluster of short options, `--` skipped after it; None when no script follows), ("file",
    None) for a script file, ("stdin", None) for `-s` or no script at all."""
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-o", "+o", "-O", "+O"):  # `-o pipefail`: the option's name follows
            skip = True
            continue
        if arg == "--":
            return ("file", None) if args[i + 1 :] else ("stdin", None)
        if arg[:1] not in ("-", "+"):
            return "file", None
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            rest = args[i + 1 :]
            rest = rest[1:] if rest[:1] == ["--"] else rest
            return "c", rest[0] if rest else None
        if arg.startswith("-") and not arg.startswith("--") and "s" in arg[1:]:
            return "stdin", None  # `bash -s ARGS`: the words after it are the script's
    return "stdin", None


def _script_cannot_fail(script: str, pipefail: bool = False) -> bool:
    """Whether a shell script's exit status is 0 whatever its commands do (`pipefail`: the
    shell was started with `-o pipefail`)."""
    try:
        words = _bare(_without_comments(shell_words(script)))
    except ValueError:
        return False
    return _words_cannot_fail(words, pipefail=pipefail or "pipefail" in words)


def _words_cannot_fail(words: list[str], pipefail: bool) -> bool:
    """_script_cannot_fail() of a script's words; `pipefail`: the script sets it (then a
    pipeline fails when any of its stages does)."""
    ends: set[str] = set()
    while words and words[-1] in (";", "\n", "&"):
        ends.add(words[-1])
        words = words[:-1]
    if "&" in ends:
        return True  # the last command runs in the background: the script's status is 0
    if not words:
        return True
    cut = max((i for i, w in enumerate(words) if w in _ENDINGS | {"&&", "|"}), default=-1)
    last, joiner = words[cut + 1 :], words[cut] if cut >= 0 else None
    before = words[:cut] if cut >= 0 else []
    if last and os.path.basename(last[0]) == "exit":
        if not last[1:]:  # a bare `exit` repeats the last status
            return joiner is None or (
                joiner in (";", "\n") and _words_cannot_fail(before, pipefail)
            )
        trivial = _status(last[1]) == 0
    elif last and joiner == "|" and not pipefail:
        trivial = cannot_fail(last, stdin_empty=False) or _passes_anything(last)
    else:
        trivial = cannot_fail(last)
    if not trivial:
        return False
    if joiner in (";", "\n") and _stops_early(before):
        return False  # `set -e; X; echo ok`, `X || exit 1; echo ok`: X decides the status
    if joiner == "&&":  # `X && true` fails when X does
        return _words_cannot_fail(before, pipefail)
    return joiner != "|" or not pipefail


def _stops_early(words: list[str]) -> bool:
    """Whether a command of `words` can end the script before its last one, with a status of
    its own: an `exit` with a status that is not a literal 0 (or none: the last command's), or
    `set -e` (`-eu`, `-o errexit`), after which a failing command ends it."""
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else ""
        if os.path.basename(word) == "exit" and _status(following) != 0:
            return True
        if word == "set" and (
            (following.startswith("-") and "e" in following[1:] and not following.startswith("--"))
            or (following == "-o" and at + 2 < len(words) and words[at + 2] == "errexit")
        ):
            return True
    return False


def _passes_anything(argv: list[str]) -> bool:
    """Whether a pipeline's last stage exits 0 on any input a test run prints: a filter, or
    grep with a pattern every line matches (`grep -c .`, `grep ''`) and no `-v`."""
    program = os.path.basename(argv[0])
    if program in _FILTERS:
        return True
    if program not in ("grep", "egrep", "fgrep"):
        return False
    options = [arg for arg in argv[1:] if arg.startswith("-") and arg != "-"]
    if any(opt == "--invert-match" or (opt[1:2] != "-" and "v" in opt[1:]) for opt in options):
        return False
    patterns = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("-e", "--regexp")]
    if not patterns:
        rest = [arg for arg in argv[1:] if not arg.startswith("-") or arg == "-"]
        patterns = rest[:1]
    return bool(patterns) and all(p in _MATCH_ANY for p in patterns)


def _without_comments(words: list[str]) -> list[str]:
    """`words` without shell comments: from a word that starts with `#` to the line's end."""
    out: list[str] = []
    comment = False
    for word in words:
        if word == "\n":
            comment = False
        elif word.startswith("#"):
            comment = True
        if not comment:
            out.append(word)
    return out


def _bare(words: list[str]) -> list[str]:
    """`words` without the braces of a group (`{ pytest; true; }` is `pytest; true;`): a group
    exits with the status of its last command. Braces that do not pair (`{` alone, a syntax
    error) are left."""
    if words.count("{") != words.count("}"):
        return words
    return [word for word in words if word not in ("{", "}")]


def _status(word: str) -> int | None:
    """The exit status `exit WORD` gives (modulo 256), None when it is not a number."""
    return int(word) % 256 if word.isdigit() else None


def plan_problems(
    commands: list[str | None], root: Path, refusal: Refusal | None
) -> dict[int, str]:
    """The problem of each task's acceptance command, by task index (tasks without one skipped)."""
    found = {}
    for index, cmd in enumerate(commands):
        reason = problem(cmd, root, refusal) if cmd else None
        if reason:
            found[index] = reason
    return found
