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
`workspace/shell/checkpytest.py`), with pytest's output capture at the file descriptors
(`-s`, `--capture=no`, `--capture=sys`, `tee-sys` or `-p no:capture` would let code under
test write a summary line of its own where pytest's goes), its asserts when it is Python's
own code (`python -O check.py` drops them), and it can fail at all (`inert.programs` says
which commands cannot: `true`, `ls`, `python -c 'x = 1'`, `sh -c 'pytest || (true)'`,
`sh -c 'pytest | sed -n p'`...). The pytest options are read wherever pytest runs: in the
command, in a `sh -c` script, and in what `PYTEST_ADDOPTS=...` or `-o addopts=...` adds. `make
-n` runs no test, like `pytest --collect-only`. The interpreter's own options are read past
(`python -W ignore -c pass` is `python -c pass`), and an operator is found written against a
word as well (`pytest -q; true`, `python - <<< 'code'`). A plan with a bad command goes back
to the model with the reason.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from agent_cli.agent.judge.inert.programs import cannot_fail, shell_run
from agent_cli.agent.judge.inert.programs import python_run as python_run
from agent_cli.workspace.shell.cmdline import (
    SHELLS,
    is_python,
    shell_words,
    simple_commands,
    unwrap,
)

Refusal = Callable[[str], "str | None"]
_ENDINGS = {";", "||", "&", "\n"}  # `X ; true` and `X || true` end in success whatever X does
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
# pytest's capture methods other than `fd` (its default): under `no` and `tee-sys` what the
# code under test prints reaches the output, under `sys` what it writes to fd 1 (`os.write`)
_LEAKY_CAPTURE = {"no", "sys", "tee-sys"}
# make's long options that print the commands instead of running them
_MAKE_DRY = {"--dry-run", "--just-print", "--recon"}
_NESTING = 4  # `sh -c` scripts within scripts read for pytest's options


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
    for args, added in _pytest_runs(argv):
        if lists_only(added):
            return (
                f"`{cmd}` runs no test (pytest only collects or lists them, told so by "
                "PYTEST_ADDOPTS or -o addopts); drop the option so that the tests run"
            )
        picked = _from_cache(added + args)
        if picked:
            return (
                f"`{cmd}` runs only the tests pytest's cache names ({picked}), and "
                ".pytest_cache is the work tree's to write; drop the option so that every "
                "test runs"
            )
        through = _uncaptured(args) or _uncaptured(added)
        if through:
            return (
                f"`{cmd}` lets what the code under test prints past pytest's capture "
                f"({through}), where a summary line it writes (`5 passed in 0.01s`) reads as "
                "pytest's own; drop the option"
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
    """The option with which pytest lets what the code it runs prints reach the output (`-s`,
    alone or in a cluster such as `-vs`; `--capture=no`, `--capture sys`, `tee-sys`, `-p
    no:capture`), or None."""
    for arg, after in zip(args, [*args[1:], ""], strict=False):
        if arg == "--":
            return None
        name, equals, value = arg.partition("=")
        if name == "--capture" and (value if equals else after) in _LEAKY_CAPTURE:
            return arg if equals else f"{arg} {after}"
        if arg[:1] == "-" and arg[1:2] not in ("-", ""):
            for at, letter in enumerate(arg[1:], 2):
                if letter == "s":
                    return arg
                if letter == "p" and (arg[at:] or after) == "no:capture":
                    return arg if arg[at:] else f"{arg} {after}"
                if letter in PYTEST_VALUED:
                    break  # the rest of the cluster is this option's value (`-rs`, `-ks`)
    return None


def _pytest_runs(argv: list[str], depth: int = 0) -> list[tuple[list[str], list[str]]]:
    """Each pytest run of `argv`, itself or a command of its `sh -c` script (one within it
    too): (its arguments, the ones PYTEST_ADDOPTS and `-o addopts=...` add to them)."""
    words = unwrap(argv)
    added = [w.split("=", 1)[1] for w in argv[: len(argv) - len(words)] if _addopts_env(w)]
    args = pytest_args(argv)
    if args is not None:
        return [(args, _split([*added, *_ini_addopts(args)]))]
    if not words or os.path.basename(words[0]) not in SHELLS or depth >= _NESTING:
        return []
    kind, script = shell_run(words[1:])
    try:
        script_words = shell_words(script or "") if kind == "c" else []
    except ValueError:
        return []
    exported = [w.split("=", 1)[1] for w in script_words if _addopts_env(w)]
    return [
        (args, _split(exported) + more)
        for command in simple_commands(script_words)
        for args, more in _pytest_runs(command, depth + 1)
    ]


def _addopts_env(word: str) -> bool:
    return word.startswith("PYTEST_ADDOPTS=")


def _ini_addopts(args: list[str]) -> list[str]:
    """What `-o addopts=...` (`-oaddopts=`, `--override-ini addopts=...`) sets."""
    found = []
    for arg, after in zip(args, [*args[1:], ""], strict=False):
        if arg == "--":
            break
        value = None
        if arg in ("-o", "--override-ini"):
            value = after
        elif arg.startswith("--override-ini="):
            value = arg.split("=", 1)[1]
        elif arg[:1] == "-" and arg[1:2] not in ("-", ""):
            for at, letter in enumerate(arg[1:], 2):
                if letter in PYTEST_VALUED:
                    value = (arg[at:] or after) if letter == "o" else None
                    break
        if value is not None and value.startswith("addopts="):
            found.append(value.split("=", 1)[1])
    return found


def _split(texts: list[str]) -> list[str]:
    words = []
    for text in texts:
        try:
            words += shlex.split(text)
        except ValueError:
            continue  # pytest refuses it and runs nothing
    return words


def lists_only(args: list[str]) -> bool:
    """Whether pytest given `args` runs no test: it only collects, lists or reports."""
    return any(arg.split("=", 1)[0] in _NO_TESTS or arg in ("-h", "--help") for arg in args)


def _script_runs_no_test(argv: list[str]) -> str | None:
    """_runs_no_test() of the command whose status a shell's `-c` script exits with
    (`sh -c 'pytest; pytest --co'`, `sh -c 'make -n test'`)."""
    argv = unwrap(argv)
    if not argv or os.path.basename(argv[0]) not in SHELLS:
        return None
    kind, script = shell_run(argv[1:])
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
