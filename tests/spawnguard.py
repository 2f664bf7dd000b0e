"""A pytest plugin that fails a test not marked `slow` when it starts `agent`, `chroma` or a
Python that runs a module or a script: the inner loop (`-m "not slow"`) starts none of them.

It sees every real process start in this process, the code under test's included:
`subprocess.Popen` (and so `subprocess.run`, asyncio), `os.posix_spawn[p]` and `os.exec*`
(a forked child's too, as after `pty.fork`). A command run through `sh -c`/`bash -c` or a
wrapper (`timeout`, `env`, `bwrap ... --`) is looked into. A `python -c` one-liner is fine.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FORBIDDEN = {"agent", "chroma"}
SHELLS = {"sh", "bash", "dash", "zsh"}
# Programs that run the command given after their own options and arguments.
WRAPPERS = {"timeout", "env", "nice", "nohup", "setsid", "stdbuf", "exec", "command", "xargs"}
SHELL_WORDS = {"then", "do", "else", "elif", "if", "while", "until", "time", "!", "{", "}"}
PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?")
PY_FLAGS = "bBdEiIOPqsSuvR"  # interpreter options that take no argument
PY_HARMLESS = {"-V", "-VV", "--version", "-h", "--help"}


@dataclass(eq=False)  # told apart by identity: nested logs are removed from `_stack` one by one
class _Log:
    """Process starts seen while a test phase or a fixture's setup runs."""

    pid: int = field(default_factory=os.getpid)
    seen: list[str] = field(default_factory=list)

    @property
    def child_file(self) -> Path:
        """Where a forked child (which cannot append to `seen`) writes what it starts."""
        return Path(tempfile.gettempdir()) / f"spawnguard-{self.pid}-{id(self)}.log"

    def add(self, message: str) -> None:
        if os.getpid() == self.pid:
            self.seen.append(message)
        else:
            with open(self.child_file, "a") as out:
                out.write(message + "\n")

    def collect(self) -> list[str]:
        seen = list(self.seen)
        if self.child_file.exists():
            seen += self.child_file.read_text().splitlines()
            self.child_file.unlink()
        return list(dict.fromkeys(seen))


_stack: list[_Log] = []
# (baseid, name) of fixtures whose setup started such a process: a test using one needs `slow`
# even when the fixture was set up (module or session scope) for an earlier test.
_spawning_fixtures: dict[tuple[str, str], str] = {}


# -- what counts -----------------------------------------------------------------------------------


def _is_python(program: str) -> bool:
    name = os.path.basename(program)
    return bool(PYTHON_NAME.fullmatch(name)) or program == sys.executable


def _python_runs_code(argv: list[str]) -> bool:
    """Whether `python ARGS` runs a module, a script or stdin (anything but `-c` or --version)."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in PY_HARMLESS or re.fullmatch(f"-[{PY_FLAGS}]*c.*", arg):
            return False
        if arg in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
        elif re.fullmatch(f"-[{PY_FLAGS}]+|-[WX].+", arg):
            i += 1
        else:
            return True  # -m MODULE, a script path, or "-"
    return True  # no argument: the script comes from stdin


def _python_script(program: str, path_var: str | None) -> bool:
    """Whether `program` is a file whose `#!` line names a Python (a console script)."""
    found = program if "/" in program else shutil.which(program, path=path_var)
    if not found:
        return False
    try:
        with open(found, "rb") as script:
            first = script.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _shell_commands(script: str) -> Iterator[list[str]]:
    """The simple commands of a shell script, roughly: split at ; & | ( ) and new lines."""
    lexer = shlex.shlex(script.replace("\n", ";"), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = script.split()
    command: list[str] = []
    for token in tokens + [";"]:
        if token and set(token) <= set(";&|()"):
            if command:
                yield command
            command = []
        elif command or not (token in SHELL_WORDS or re.fullmatch(r"\w+=.*", token)):
            command.append(token)


def _programs(argv: list[str]) -> Iterator[list[str]]:
    """`argv` and every command it runs through a shell or a wrapper."""
    if not argv:
        return
    yield argv
    name = os.path.basename(argv[0])
    if name in SHELLS:
        for i, arg in enumerate(argv[1:-1], 1):
            if re.fullmatch(r"-\w*c\w*", arg):
                for command in _shell_commands(argv[i + 1]):
                    yield from _programs(command)
                break
    elif name == "bwrap" and "--" in argv:
        yield from _programs(argv[argv.index("--") + 1 :])
    elif name in WRAPPERS:
        for i, arg in enumerate(argv[1:], 1):
            if not arg.startswith("-") and not re.fullmatch(r"\w+=.*|[\d.]+[smhd]?", arg):
                yield from _programs(argv[i:])
                break


def offence(argv: list[str], path_var: str | None = None) -> str | None:
    """Why starting `argv` makes a test slow, or None when it does not."""
    for command in _programs(argv):
        program = command[0]
        if os.path.basename(program) in FORBIDDEN:
            return f"it starts `{os.path.basename(program)}`"
        if _is_python(program):
            if _python_runs_code(command):
                return "it starts a Python that runs a module or a script"
        elif _python_script(program, path_var):
            return f"it starts the Python script `{program}`"
    return None


def _note(argv: list[str], env: object = None) -> None:
    if not _stack:
        return
    path_var = env.get("PATH") if isinstance(env, dict) else None
    why = offence(argv, path_var or os.environ.get("PATH"))
    if why is not None:
        _stack[-1].add(f"{why}: {shlex.join(argv)[:300]}")


# -- seeing process starts -------------------------------------------------------------------------


def _argv(args: object, shell: bool, executable: object) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        parts = [os.fsdecode(args)]
    else:
        parts = [os.fsdecode(a) for a in args]  # type: ignore[union-attr]
    if shell:
        return [os.fsdecode(executable) if executable else "/bin/sh", "-c", *parts]
    if executable:
        parts[0] = os.fsdecode(executable)
    return parts


def _install() -> None:
    popen_init = subprocess.Popen.__init__

    def init(self, args, *rest, **kwargs):
        try:
            argv = _argv(args, bool(kwargs.get("shell")), kwargs.get("executable"))
        except TypeError:
            argv = []
        _note(argv, kwargs.get("env"))
        popen_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]

    def exec_wrapper(real):
        def run(path, args, *rest, **kwargs):
            _note([os.fsdecode(path), *[os.fsdecode(a) for a in list(args)[1:]]])
            return real(path, args, *rest, **kwargs)

        return run

    def spawn_wrapper(real):
        def spawn(path, argv, env, *rest, **kwargs):
            _note([os.fsdecode(path), *[os.fsdecode(a) for a in list(argv)[1:]]], env)
            return real(path, argv, env, *rest, **kwargs)

        return spawn

    # os.execl*/execvp*/spawn* and pty.spawn all end in os.execv or os.execve.
    os.execv = exec_wrapper(os.execv)
    os.execve = exec_wrapper(os.execve)
    os.posix_spawn = spawn_wrapper(os.posix_spawn)
    os.posix_spawnp = spawn_wrapper(os.posix_spawnp)


_install()


# -- the hooks -------------------------------------------------------------------------------------


def _guarded(item: pytest.Item, check_fixtures: bool):
    log = _Log()
    _stack.append(log)
    try:
        outcome = yield
    finally:
        _stack.remove(log)
        seen = log.collect()
    if item.get_closest_marker("slow") is not None:
        return outcome
    if check_fixtures:
        seen += [
            f"it uses the fixture `{name}`, whose setup {why}"
            for (baseid, name), why in _spawning_fixtures.items()
            if name in getattr(item, "fixturenames", ()) and item.nodeid.startswith(baseid)
        ]
    if seen:
        pytest.fail(
            "this test is not marked @pytest.mark.slow, but "
            + "\n  ".join(seen)
            + '\n(`-m "not slow"` starts no agent, chroma or Python module/script process)',
            pytrace=False,
        )
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded(item, check_fixtures=True))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded(item, check_fixtures=False))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    return (yield from _guarded(item, check_fixtures=False))


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    log = _Log()
    _stack.append(log)
    try:
        return (yield)
    finally:
        _stack.remove(log)
        seen = log.collect()
        if seen:
            _spawning_fixtures[(fixturedef.baseid, fixturedef.argname)] = seen[0]
            if _stack:
                _stack[-1].seen.extend(seen)
