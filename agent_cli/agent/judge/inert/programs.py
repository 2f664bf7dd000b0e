"""Which commands exit 0 whatever the repository holds, so that a check made of one proves
nothing. The rule: a command cannot fail when its program's status depends on nothing a task
can change (a missing file it is given, code of the repository it runs, what it judges).

- Programs that always succeed: `true`, `:`, `echo`, `printf`, `yes`, `sleep`, `pwd`,
  `date`, `basename`, `dirname`, and `wait` or `exit 0` in a script.
- Reports on the machine or on a program, given options only: `whoami`, `uname -a`, `id`,
  `hostname`..., any `PROGRAM --version` or `--help`, `python --version`, `python -m pip
  --version`, and Python's own report modules run bare: `python -m site`, `-m platform`,
  `-m sysconfig` (and `-m this`).
- Reports on the work tree that exit 0 whatever it holds: `ls` and `du` given no path,
  `find .` with tests of names, types, sizes and times only, `git status`, `git diff` without
  an option that sets its status (`--exit-code`, `--quiet`, `--check`, `--no-index`), and
  `git log`, `show`, `shortlog`, `ls-files`, `branch`, `tag`, `remote` given options only
  (a revision or a path without `--` can be missing).
- Sums of words written in the command: `test`/`[` comparing them (`[ 1 -eq 1 ]`; a `$`, a
  glob or a file test can fail), `expr 1 + 1`, `seq 3`.
- A program that reads its input and exits 0 whatever the input holds, given no file to read
  (`cat`, `head`, `tail`, `tee`, `sort`, `uniq`, `wc`, `cut`, `tr`, `nl`, `fold`, `rev`,
  `sed` with no command that quits, writes, runs or loops, `awk` with no `exit`, `getline`,
  division or computed field...), on the check's input (/dev/null) or on a pipeline's
  output; so too `grep` with a pattern every line matches (`grep -c .`) on a pipeline's.
  `sort -c`, `sha256sum -c` and `base64 -d` judge what they read, and can fail.
- An interpreter given no script: it reads /dev/null (`python`, `python -`, `bash`, `sh -s`).
- Python code given with `-c` that cannot raise (python_code), a shell script given with `-c`
  every way of whose ending is 0 (shell_status).

A wrapper (`env`, `nice`, `timeout`, `nohup`...) is read past; `xargs` on a pipeline's output
adds arguments of its own, so only a program that succeeds whatever its arguments is judged
through it. A program named by a relative path (`./tail`, `bin/ls`) is the repository's own,
which can do anything; an interpreter is judged by what it runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from agent_cli.agent.judge.inert import python_code, shell_status
from agent_cli.workspace.shell.cmdline import SHELLS, is_python, unwrap

ZERO, ONE, BOTH = frozenset({0}), frozenset({1}), frozenset({0, 1})
_ALWAYS_SUCCEED = {"true", ":", "echo", "printf", "yes", "sleep", "pwd", "date"}
_ALWAYS_SUCCEED |= {"basename", "dirname"}
# what any program answers with a report of itself, exiting 0
_VERSION = {"--version", "--help"}
# programs that report on the machine and exit 0, given options only
_REPORTS = {"id", "whoami", "uname", "nproc", "hostname", "arch", "printenv", "groups", "users"}
_REPORTS |= {"uptime", "free", "lscpu", "locale", "ls", "du"}  # ls and du: of the work tree
# arguments with which python only reports itself and exits 0
_PYTHON_INFO = {"--version", "-V", "-VV", "--help", "-h", "-?", "--help-env", "--help-xoptions"}
# Python's modules that print a text or a report on the interpreter and exit 0, run bare
_PYTHON_TEXTS = {"this", "__hello__", "__phello__"}
_PYTHON_REPORTS = {"site", "platform", "sysconfig"}
# git's reports, and the options that give one of them a status of its own
_GIT_REPORTS = {"log", "show", "shortlog", "whatchanged", "ls-files", "branch", "tag", "remote"}
_GIT_STATUS_OPTIONS = {"--exit-code", "--quiet", "--check", "--no-index", "--error-unmatch"}
_GIT_FLAGS = {"--no-pager", "-P", "-p", "--paginate", "--no-optional-locks", "--bare"}
# find's tests and actions that cannot fail on what the tree holds (those after `=` take a value)
_FIND_VALUED = {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex"}
_FIND_VALUED |= {"-iregex", "-lname", "-ilname", "-type", "-xtype", "-maxdepth", "-mindepth"}
_FIND_VALUED |= {"-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-perm"}
_FIND_VALUED |= {"-links", "-inum", "-regextype", "-printf", "-uid", "-gid"}
_FIND_FLAGS = {"-print", "-print0", "-ls", "-prune", "-quit", "-depth", "-empty", "-true"}
_FIND_FLAGS |= {"-false", "-not", "-a", "-o", "-and", "-or", "!", "(", ")", ",", "-follow"}
_FIND_FLAGS |= {"-xdev", "-mount", "-noleaf", "-nouser", "-nogroup", "-readable", "-writable"}
_FIND_FLAGS |= {"-executable"}
# programs that read their input and exit 0 whatever it holds, with their options that take
# the next word as their value; any other word they are given is a file, which can be missing
_FILTERS: dict[str, set[str]] = {
    "cat": set(),
    "tac": {"-s", "--separator"},
    "head": {"-n", "-c", "--lines", "--bytes"},
    "tail": {"-n", "-c", "-s", "--pid", "--lines", "--bytes", "--sleep-interval"},
    "tee": set(),  # its words are files it writes
    "sort": {"-k", "-t", "-o", "-S", "-T", "--key", "--field-separator", "--output"},
    "uniq": {"-f", "-s", "-w"},
    "wc": set(),
    "cut": {"-d", "-f", "-b", "-c"},
    "tr": set(),  # its words are sets of characters
    "less": set(),
    "more": set(),
    "nl": {"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"},
    "fold": {"-w"},
    "fmt": {"-w", "-p", "-g"},
    "rev": set(),
    "paste": {"-d"},
    "expand": {"-t"},
    "unexpand": {"-t"},
    "od": {"-A", "-j", "-N", "-t", "-w", "-S"},
    "strings": {"-n", "-t", "-e"},
    "md5sum": set(),
    "sha1sum": set(),
    "sha256sum": set(),
    "sha512sum": set(),
    "b2sum": set(),
    "cksum": set(),
    "base64": {"-w"},
    "sed": {"-e", "-f", "-l", "--expression", "--file", "--line-length"},
    "awk": {"-F", "-v", "-f"},
    "gawk": {"-F", "-v", "-f"},
    "mawk": {"-F", "-v", "-f"},
}
_NOT_FILES = {"tee", "tr"}
# options with which a filter judges what it reads: `sort -c` fails on unsorted input
_JUDGING = {"-c", "-C", "--check", "-d", "--decode"}
_JUDGES_WITH = {"sort", "md5sum", "sha1sum", "sha256sum", "sha512sum", "b2sum", "base64"}
# grep patterns every line of a test run's output matches (`.`: every line but an empty one)
_MATCH_ANY = {"", ".", ".*", "^", "$", "^.*", ".*$", "^.*$"}
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
_UNKNOWN_CHARS = "$`*?["  # a variable, a command's output or a file name a shell may put there
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")


def cannot_fail(argv: list[str], stdin_empty: bool = True) -> bool:
    """Whether the command (an argv run without a shell) exits 0 whatever the repository holds.

    `stdin_empty`: its input is empty (/dev/null, as the harness runs a check; not so for a
    pipeline's later stage), so an interpreter given no script (`python`, `python -`, `sh`,
    `bash -s`) runs nothing, and a filter given no file (`cat`) copies nothing."""
    return statuses(argv, "empty" if stdin_empty else "pipe") == ZERO


def statuses(argv: list[str], stdin: str) -> frozenset[int]:
    """The statuses (0; 1 for any failure) the command can end with, reading `stdin`:
    "empty" (/dev/null), "pipe" (a pipeline's output), "text" or "file"."""
    words = unwrap(argv)
    if not words:
        return ZERO  # `env`, `nohup` alone
    program, args = os.path.basename(words[0]), words[1:]
    wrappers = argv[: len(argv) - len(words)]
    if stdin != "empty" and any(os.path.basename(w) == "xargs" for w in wrappers):
        return ZERO if program in _ALWAYS_SUCCEED else BOTH  # it adds words it reads
    if "/" in words[0] and not os.path.isabs(words[0]) and not _interpreter(program):
        return BOTH  # `./tail`, `bin/ls`: a program of the repository, which a task can write
    if program == "false":
        return ONE
    if program == "test" or (program == "[" and args[-1:] == ["]"]):
        answer = _constant_test(args[:-1] if program == "[" else args)
    elif program == "expr":
        answer = _expr(args)
    elif program in SHELLS:
        return _shell(args, stdin)
    else:
        answer = True if _succeeds(program, args, stdin) else None
    return BOTH if answer is None else ZERO if answer else ONE


def _interpreter(program: str) -> bool:
    return is_python(program) or program in SHELLS


def _succeeds(program: str, args: list[str], stdin: str) -> bool:
    if program in _ALWAYS_SUCCEED:
        return True
    if is_python(program):
        return _python(args, stdin)
    if args and all(arg in _VERSION for arg in args):
        return True  # `git --version`: a program that exists reports itself
    if program in _REPORTS:
        return all(arg.startswith("-") and arg != "-" for arg in args)
    if program == "git":
        return _git_report(args)
    if program == "find":
        return _find_report(args)
    if program == "seq":
        return _seq(args)
    if program in _FILTERS:
        return _blind(program, args)
    return stdin == "pipe" and _matches_every_line(program, args)


def _python(args: list[str], stdin: str) -> bool:
    kind, rest = python_run(args)
    if kind == "info":
        return True  # `python --version`: the interpreter reports itself
    if kind == "stdin":
        return stdin == "empty"
    if kind == "m":  # `-m this` prints a text; `-m pip --version` reports pip
        module, extra = (rest[0], rest[1:]) if rest else ("", [])
        return (
            module in _PYTHON_TEXTS
            or (module in _PYTHON_REPORTS and not extra)
            or (module == "platform" and all(a in ("--terse", "--nonaliased") for a in extra))
            or (bool(extra) and all(arg in _VERSION for arg in extra))
        )
    return kind == "c" and bool(rest) and python_code.cannot_fail(rest[0])


def _shell(args: list[str], stdin: str) -> frozenset[int]:
    kind, script = shell_run(args)
    if kind == "stdin":
        return ZERO if stdin == "empty" else BOTH
    if script is None:
        return BOTH
    errexit, pipefail = _shell_options(args)
    found = shell_status.statuses(script, statuses, errexit=errexit, pipefail=pipefail, stdin=stdin)
    return found or BOTH  # not read, or never ends (then it times out)


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


def shell_run(args: list[str]) -> tuple[str, str | None]:
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


def _shell_options(args: list[str]) -> tuple[bool, bool]:
    """Whether a shell's options before its script set errexit (`-e`, `-ec`, `-o errexit`)
    and pipefail (`-o pipefail`)."""
    errexit = pipefail = False
    for arg, following in zip(args, [*args[1:], ""], strict=False):
        if arg[:1] not in ("-", "+") or arg.startswith("--"):
            break
        on, letters = arg[0] == "-", arg[1:]
        errexit = on if "e" in letters else errexit
        if "o" in letters and following in ("errexit", "pipefail"):  # `-euo pipefail`
            errexit = on if following == "errexit" else errexit
            pipefail = on if following == "pipefail" else pipefail
        if "c" in letters:
            break
    return errexit, pipefail


def _constant_test(args: list[str]) -> bool | None:
    """What `test ARGS` answers when it compares only words written in the command (no `$`,
    no backquote, no file): True or False; None when it depends on anything else."""
    if any(char in arg for arg in args for char in _UNKNOWN_CHARS):
        return None
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


def _expr(args: list[str]) -> bool | None:
    """Whether `expr ARGS` of words written in the command succeeds (its result is neither
    empty nor 0); None when that depends on anything else or is not worked out here."""
    if any(char in arg for arg in args for char in _UNKNOWN_CHARS):
        return None
    if len(args) == 1 and re.fullmatch(r"[\w.,:@%+-]+", args[0]) and args[0] != "+":
        return not re.fullmatch(r"-?0+", args[0])
    if len(args) != 3:
        return None
    left, op, right = args
    if _INTEGER.fullmatch(left) and _INTEGER.fullmatch(right):
        a, b = int(left), int(right)
        if op in ("/", "%") and b == 0:
            return False  # division by zero: expr fails
        results = {"+": a + b, "-": a - b, "*": a * b, "/": int(a / b) if b else 0}
        results |= {"%": a - b * int(a / b) if b else 0, "<": a < b, "<=": a <= b}
        results |= {"=": a == b, "!=": a != b, ">=": a >= b, ">": a > b}
        return bool(results[op]) if op in results else None
    return {"=": left == right, "!=": left != right}.get(op)


def _seq(args: list[str]) -> bool:
    """`seq` of number literals (`seq 3`, `seq -w 1 10`): it only counts."""
    at = 0
    while at < len(args) and args[at].startswith("-") and not _NUMBER.fullmatch(args[at]):
        at += 2 if args[at] in ("-s", "-f", "--separator", "--format") else 1
    rest = args[at:]
    return 1 <= len(rest) <= 3 and all(_NUMBER.fullmatch(word) for word in rest)


def _git_report(args: list[str]) -> bool:
    at = 0
    while at < len(args) and args[at] in _GIT_FLAGS:
        at += 1
    command, rest = args[at : at + 1], args[at + 1 :]
    if not command or any(word.split("=", 1)[0] in _GIT_STATUS_OPTIONS for word in rest):
        return False
    if command[0] in ("status", "diff"):  # a report, whatever the tree holds
        return True
    before = rest[: rest.index("--")] if "--" in rest else rest  # paths after `--` are fine
    return command[0] in _GIT_REPORTS and all(word.startswith("-") for word in before)


def _find_report(args: list[str]) -> bool:
    """`find .` (or find alone) whose expression only tests names, types, sizes and times,
    and prints: it exits 0 whatever the tree holds (a start other than `.` can be missing,
    `-exec`, `-delete` or `-newer FILE` can fail)."""
    at = 0
    while at < len(args) and args[at] in ("-H", "-L", "-P"):
        at += 1
    while at < len(args) and not args[at].startswith("-") and args[at] not in ("!", "("):
        if args[at].rstrip("/") not in (".", ""):
            return False
        at += 1
    while at < len(args):
        word = args[at]
        if word in _FIND_VALUED:
            at += 1
        elif word not in _FIND_FLAGS:
            return False
        at += 1
    return True


def _blind(program: str, args: list[str]) -> bool:
    """Whether the filter exits 0 whatever it reads: no file to read (but its input), no
    option that judges the input, a `sed` or `awk` program that cannot fail on it."""
    valued = _FILTERS[program]
    words: list[str] = []
    script: list[str] = []
    at = 0
    while at < len(args):
        word = args[at]
        if word == "--":
            words += args[at + 1 :]
            break
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            if program in _JUDGES_WITH and (
                name in _JUDGING or (not word.startswith("--") and set(word[1:]) & set("cCd"))
            ):
                return False
            if name in ("-f", "--file"):
                return False  # a program read from a file
            value = args[at + 1] if word in valued and at + 1 < len(args) else None
            if name in ("-e", "--expression") and program == "sed":
                script.append(value if value is not None else word.partition("=")[2])
            at += 2 if word in valued else 1
            continue
        words.append(word)
        at += 1
    if program in ("sed", "awk", "gawk", "mawk"):
        if not script:
            if not words:
                return False
            script, words = [words[0]], words[1:]
        quiet = _sed_quiet if program == "sed" else _awk_quiet
        if not all(quiet(text) for text in script):
            return False
    return program in _NOT_FILES or all(word == "-" for word in words)


def _sed_quiet(script: str) -> bool:
    """Whether a sed script only prints, edits and deletes lines: no `q`/`Q` (its own exit
    status), `w`/`r`/`e` (files, commands), no branch (a loop)."""
    at = 0
    while at < len(script):
        char = script[at]
        if char in " \t\n;{}!,$" or char.isdigit() or char == "~":
            at += 1
        elif char in "/\\":
            delimiter = script[at + 1 : at + 2] if char == "\\" else "/"
            at = _past_field(script, at + (1 if char == "\\" else 0), delimiter)
            while at < len(script) and script[at] in "IM":
                at += 1
        elif char in "pPdDnNhHgGxz=lF":
            at += 1
        elif char in "aic#":  # text (or a comment) to the end of the line
            end = script.find("\n", at)
            at = len(script) if end < 0 else end
        elif char in "sy" and at + 1 < len(script):
            delimiter = script[at + 1]
            at = _past_field(script, _past_field(script, at + 1, delimiter) - 1, delimiter)
            flags = re.match(r"[gpiImM0-9]*", script[at:])
            at += flags.end() if flags else 0
            if at < len(script) and script[at] in "we":
                return False  # `s///w file`, `s///e`
        else:
            return False  # q Q w W r R e b t T : v, or what is not read here
    return True


def _past_field(text: str, at: int, delimiter: str) -> int:
    """Where the field that starts after the delimiter at `at` ends, past its delimiter."""
    at += 1
    while at < len(text) and text[at] != delimiter:
        at += 2 if text[at] == "\\" else 1
    return at + 1


def _awk_quiet(program: str) -> bool:
    """Whether an awk program cannot fail on what it reads: no `exit`, `getline`, `system`,
    `printf` (a format it reads can be short of values), loop, division (by 0), computed
    field (`$(NF-2)` can be negative), regular expression read from the input (`$0 ~ $1`)."""
    text = re.sub(r'"(\\.|[^"\\])*"', '""', program)
    text = re.sub(r"(^|[(,!~{};&|\n]\s*)/(\\.|[^/\\\n])*/", r"\1R", text)  # regex literals
    if re.search(
        r"\b(exit|getline|system|close|printf|sprintf|while|for|do|func|function)\b", text
    ):
        return False
    if re.search(r"\b(match|sub|gsub|gensub|split)\b|[/%|]|~\s*[^R\s]", text):
        return False
    return not re.search(r"\$(?!\d|NF\b)", text)


def _matches_every_line(program: str, args: list[str]) -> bool:
    """`grep` with a pattern every line of a pipeline's output matches (`grep -c .`,
    `grep ''`) and no `-v`: it exits 0 on any output a test run prints."""
    if program not in ("grep", "egrep", "fgrep"):
        return False
    options = [arg for arg in args if arg.startswith("-") and arg != "-"]
    if any(opt == "--invert-match" or (opt[1:2] != "-" and "v" in opt[1:]) for opt in options):
        return False
    given = [i + 1 for i, arg in enumerate(args[:-1]) if arg in ("-e", "--regexp")]
    rest = [a for i, a in enumerate(args) if i not in given and (a[:1] != "-" or a == "-")]
    patterns = [args[i] for i in given] or rest[:1]
    if len(rest) > (0 if given else 1) or any(a in ("-f", "--file") for a in args):
        return False  # a file it reads (or its patterns') can be missing
    return bool(patterns) and all(p in _MATCH_ANY for p in patterns)
