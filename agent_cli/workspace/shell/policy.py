"""Which model-proposed commands may run: a deny list no approval overrides, then ask or auto.

The deny list reads the command the way a shell would (quotes, wrappers such as `env` or
`bash -c`, pipelines, substitutions) but it is a guard against mistakes, not a security
boundary: the sandbox setting is what confines a command.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import regex

from agent_cli.core.errors import ConfigError, ToolError
from agent_cli.workspace.shell.cmdline import (
    SHELLS,
    is_python,
    shell_words,
)
from agent_cli.workspace.shell.cmdline import (
    operands as _operands,
)
from agent_cli.workspace.shell.cmdline import (
    pipelines as _pipelines,
)
from agent_cli.workspace.shell.cmdline import (
    split_redirects as _split_redirects,
)
from agent_cli.workspace.shell.cmdline import (
    unwrap as _unwrap,
)
from agent_cli.workspace.shell.globs import GlobTooLarge, bounded_glob
from agent_cli.workspace.shell.runner import scrub_env

APPROVALS = ("ask", "auto")
_MAX_DEPTH = 5
_INTERPRETERS = SHELLS | {"python", "python3", "perl", "ruby", "node", "php"}
_DOWNLOADERS = {"curl", "wget", "fetch"}
_PRIVILEGE = {"sudo", "doas", "su", "pkexec", "run0"}
# Commands that change the files named in their arguments.
_WRITERS = {
    "rm",
    "mv",
    "cp",
    "touch",
    "tee",
    "truncate",
    "ln",
    "mkdir",
    "rmdir",
    "chmod",
    "chown",
    "install",
    "dd",
    "sed",
    "rsync",
    "shred",
    "unlink",
    "tar",
    "unzip",
}
_ROOTS = {
    "",
    "~",
    "$HOME",
    "${HOME}",
    "/home",
    "/root",
    "/usr",
    "/etc",
    "/var",
    "/bin",
    "/lib",
    "/boot",
}
# Linear on any input: the path before a program name cannot contain a separator, so no
# start position rescans what another one already scanned (a 120 KB command stays fast).
_FETCH_INTO_SHELL = re.compile(
    r"(^|[\s;&|(])([^\s;&|(]*/)?((ba|z|da|k)?sh|eval|source|\.)\s+(-\S+\s+)*[\"']?(<\(|\$\(|`)\s*"
    r"([^\s;&|(]*/)?(curl|wget)\b"
)
USER_PATTERN_TIME_S = 1.0
_GIT_VALUED = {
    "-C",
    "-c",
    "--config-env",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
}
_KNOWN_GIT = frozenset({"status", "diff", "log", "show", "help", "version", "push", "commit"})
# Variables that point git at other config, programs or repositories.
_GIT_ENV = re.compile(r"GIT_(CONFIG\w*|DIR|WORK_TREE|EXEC_PATH|COMMON_DIR)=")
_GIT_ENV_MESSAGE = (
    "it sets a GIT_CONFIG*, GIT_DIR, GIT_WORK_TREE, GIT_EXEC_PATH or GIT_COMMON_DIR variable, "
    "which gives git other configuration, commands or repositories "
    "(aliases included), which no command may"
)
_EXPORTERS = {"export", "declare", "typeset", "local", "readonly"}
_FIND_FILTERS = {"-name", "-iname", "-path", "-ipath", "-wholename", "-regex", "-iregex"}
_INLINE_FLAGS = {"-c", "-e", "-E", "-r", "--eval", "-p"}
_INLINE_GIT = re.compile(
    r"\bgit\b[\s\"',\[\]()]+(?:-C[\s\"',]+\S+[\s\"',]+)?"
    r"(push|commit|update-ref|reset|rebase|merge|checkout|switch|branch|tag|symbolic-ref"
    r"|cherry-pick|revert|am|filter-branch|replace|worktree|pull|stash|clean|read-tree"
    r"|update-index|reflog|notes)\b"
)
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)\s*(['\"]?)([\w.-]+)\2")


class CommandPolicy:
    """Refuses denied commands outright; otherwise approves them itself (auto) or asks the user."""

    def __init__(
        self,
        approval: str = "ask",
        deny: list[str] | tuple[str, ...] = (),
        state_dir: Path | None = None,
        ask: Callable[[str], str] | None = None,
        cwd: Path | None = None,
        work_tree: Path | None = None,
    ) -> None:
        if approval not in APPROVALS:
            raise ConfigError(
                f"approval must be ask or auto, not {approval!r}", "set approval = ask or auto"
            )
        if approval == "ask" and ask is None:
            raise ValueError("approval = ask needs an ask callable")
        self.approval = approval
        self.ask = ask
        self.patterns = [_compile_user_pattern(p) for p in deny]
        self.state_dir = Path(os.path.realpath(state_dir)) if state_dir else None
        self.cwd = Path(cwd) if cwd else (self.state_dir.parent if self.state_dir else Path.cwd())
        # a worktree run's own tree lies inside the state directory and is its to change
        self.work_tree = Path(os.path.realpath(work_tree)) if work_tree else None
        self._always: set[str] = set()
        self._line_defines_alias = False

    def check(self, cmd: str) -> None:
        """Return when `cmd` may run; raise ToolError saying why when it is refused or declined."""
        reason = self.refusal(cmd)
        if reason:
            raise ToolError(
                f"command refused: {reason}; it is never run, whatever the approval setting"
            )
        if self.approval == "auto" or cmd in self._always:
            return
        assert self.ask is not None  # approval = ask always has one (checked when made)
        answer = str(self.ask(cmd) or "").strip().lower()
        if answer in ("a", "always"):
            self._always.add(cmd)
        elif answer not in ("y", "yes"):
            raise ToolError("the user declined to run this command")

    def allow(self, cmd: str) -> None:
        """Run this exact command without asking from now on (deny rules still apply)."""
        self._always.add(cmd)

    def refusal(self, cmd: str) -> str | None:
        """Why `cmd` must never run, or None."""
        for pattern in self.patterns:
            try:  # the user's own pattern, applied to the model's text: bounded in time
                hit = any(
                    pattern.search(text, timeout=USER_PATTERN_TIME_S)
                    for text in (cmd, " ".join(cmd.split()))
                )
            except TimeoutError:
                return (
                    f"the deny pattern {pattern.pattern!r} could not be checked against it in time"
                )
            if hit:
                return f"it matches the deny pattern {pattern.pattern!r} from the settings (deny_commands)"
        self._line_defines_alias = bool(re.search(r"alias", cmd, re.IGNORECASE))
        try:
            return self._refusal(cmd, depth=0)
        except GlobTooLarge as e:  # what could not be checked is not run
            return (
                f"its glob {e.pattern[:80]!r} could not be checked against the agent's state "
                f"directory ({e.why}); name the paths more narrowly"
            )

    def _refusal(self, cmd: str, depth: int) -> str | None:
        if depth > _MAX_DEPTH:
            return "it nests shells too deeply to be checked"
        body, heredocs = _split_heredocs(cmd.replace("${IFS}", " ").replace("$IFS", " "))
        if _FETCH_INTO_SHELL.search(body):
            return (
                "it runs a downloaded script (curl/wget into a shell); download, read, then run it"
            )
        try:
            words = shell_words(body.replace("`", " ( "))  # a backtick substitution is a subshell
        except ValueError:
            return "it could not be parsed (unbalanced quotes); write the command more simply"
        for pipeline in _pipelines(words):
            reason = _pipe_into_shell(pipeline) or self._first(pipeline, depth)
            if reason:
                return reason
        if heredocs and re.search(r"\b((ba|z|da|k)?sh|eval)\b", body):
            return next(filter(None, (self._refusal(h, depth + 1) for h in heredocs)), None)
        return None

    def _first(self, pipeline: list[list[str]], depth: int) -> str | None:
        return next(filter(None, (self._stage(stage, depth) for stage in pipeline)), None)

    def _stage(self, stage: list[str], depth: int) -> str | None:
        """Why one simple command (with its redirects) must not run, or None."""
        argv, targets = _split_redirects(stage)
        if any(self._in_state_dir(t) for t in targets):
            return self._state_message()
        if any(_is_settings_file(t) for t in targets):
            return _SETTINGS_MESSAGE
        raw, argv = argv, _unwrap(argv)
        if any(_GIT_ENV.match(word) for word in raw[: len(raw) - len(argv)]):
            return _GIT_ENV_MESSAGE
        if not argv:
            return None
        program, args = os.path.basename(argv[0]), argv[1:]
        if program in _EXPORTERS and any(_GIT_ENV.match(a) for a in args):
            return _GIT_ENV_MESSAGE
        if _is_interpreter(program) and program not in SHELLS:
            reason = _inline_code_refusal(args)
            if reason:
                return reason
        if program in _PRIVILEGE:
            return (
                f"{program} runs a command as another user; the agent never raises its privileges"
            )
        if program in SHELLS:
            script = _dash_c_script(args)
            return None if script is None else self._refusal(script, depth + 1)
        if program == "eval":
            return self._refusal(" ".join(args), depth + 1)
        if program == "env" and args[:1] in (["-S"], ["--split-string"]):
            return self._refusal(" ".join(args[1:]), depth + 1)
        if program == "find":
            return self._find_refusal(args) or next(
                filter(None, (self._stage(sub, depth) for sub in _find_exec(args))), None
            )
        if program == "git":
            return self._git_refusal(args, depth)
        if program == "rm":
            return self._rm_refusal(args)
        if program in _WRITERS and any(
            self._in_state_dir(a.split("=", 1)[-1]) for a in _operands(args)
        ):
            return self._state_message()
        if program in _WRITERS and any(
            _is_settings_file(a.split("=", 1)[-1]) for a in _operands(args)
        ):
            return _SETTINGS_MESSAGE
        return None

    def _git_refusal(self, args: list[str], depth: int, where: str = "") -> str | None:
        """Why a git invocation must not run, judged on the subcommand it resolves to."""
        if depth > _MAX_DEPTH:
            return "its git aliases nest too deeply to be checked"
        option, i = None, 0
        while i < len(args) and args[i].startswith("-") and args[i] != "-":
            arg = args[i]
            if arg == "--":
                i += 1
                break
            option = option or _git_option_refusal(arg)
            if arg == "-C" and i + 1 < len(args):
                where = os.path.join(where, args[i + 1])
            i += 2 if arg in _GIT_VALUED else 1
        args = args[i:]
        if not args:
            return option
        sub, rest = args[0], args[1:]
        if sub in _git_commands():
            return _git_sub_refusal(sub, rest) or option
        if option:
            return option
        alias = self._git_alias(sub, where)
        if alias is None:
            if not self._line_defines_alias:
                return None  # git itself will say it is not a git command
            return (
                f"git {sub[:40]} is neither a git command nor an alias defined now, and the "
                "command line defines an alias; define it in a command of its own first"
            )
        if alias.startswith("!"):
            script = alias[1:] + "".join(" " + shlex.quote(a) for a in rest)
            return self._refusal(script, depth + 1)
        try:
            expanded = shlex.split(alias)
        except ValueError:
            return f"the git alias {sub[:40]} could not be parsed"
        return self._git_refusal(expanded + rest, depth + 1, where)

    def _git_alias(self, name: str, where: str) -> str | None:
        """What `git NAME` is an alias for in the repository (as the command's git reads it)."""
        cwd = self.cwd / where if where else self.cwd
        try:
            done = subprocess.run(
                ["git", "config", "--get", f"alias.{name}"],
                cwd=cwd if cwd.is_dir() else self.cwd,
                env=scrub_env(dict(os.environ)),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        return done.stdout.decode("utf-8", "replace").strip()

    def _find_refusal(self, args: list[str]) -> str | None:
        """Why a `find` must not run: it deletes or writes in the state directory."""
        starts = []
        for arg in args:
            if arg.startswith(("-", "(", "!", ")")):
                break
            starts.append(arg)
        writes = bool({"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"} & set(args))
        if not writes:
            return None
        if any(self._in_state_dir(s) for s in starts) or any(self._in_state_dir(a) for a in args):
            return self._state_message()
        filtered = bool(_FIND_FILTERS & set(args))
        if (
            "-delete" in args
            and not filtered
            and any(self._in_state_dir(s, ancestors=True) for s in starts or ["."])
        ):
            return self._state_message()
        return None

    def _rm_refusal(self, args: list[str]) -> str | None:
        options = args[: args.index("--")] if "--" in args else args
        recursive = any(
            a in ("-r", "-R", "--recursive") or re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", a)
            for a in options
        )
        for target in _operands(args):
            if recursive and (_is_root_or_home(target) or "--no-preserve-root" in options):
                return f"rm -r {target[:80]} would delete the whole system or home directory"
            if self._in_state_dir(target, ancestors=recursive):
                return self._state_message()
        return None

    def _in_state_dir(self, word: str, ancestors: bool = False) -> bool:
        """Whether `word` names a path in the state directory (or, with `ancestors`, one holding it)."""
        name = self.state_dir.name if self.state_dir else ".agent"
        if re.search(rf"(^|/){re.escape(name)}(/|$)", word):
            return True
        if self.state_dir is None:
            return False
        for path in _expand(word, self.cwd):
            real = Path(os.path.realpath(path))
            if self.work_tree and (real == self.work_tree or self.work_tree in real.parents):
                continue
            if real == self.state_dir or self.state_dir in real.parents:
                return True
            if ancestors and real in self.state_dir.parents:
                return True
        return False

    def _state_message(self) -> str:
        where = self.state_dir or ".agent/"
        return (
            f"it changes the agent's state directory ({where}), which only the agent itself writes"
        )


_SETTINGS_MESSAGE = (
    "it writes .agentrc, the agent's settings, which only the user edits "
    "(a changed one could turn the sandbox off for the next run)"
)


def _is_settings_file(word: str) -> bool:
    return os.path.basename(word.rstrip("/")) == ".agentrc"


def pattern_problem(pattern: str) -> str:
    """Why `pattern` cannot be a deny_commands pattern ("" when it can): the settings check it
    when they are read, so `agent doctor` says it before a run stops on it."""
    try:
        _compile_user_pattern(pattern)
    except ConfigError as e:
        return e.message
    return ""


def _compile_user_pattern(pattern: str) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern, flags=regex.VERSION0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise ConfigError(
            f"deny_commands pattern {pattern!r} is not a valid regular expression: {exc}",
            "fix the pattern in deny_commands",
        ) from exc


def _split_heredocs(cmd: str) -> tuple[str, list[str]]:
    """The command without here-document bodies, and the bodies."""
    lines, kept, bodies = cmd.split("\n"), [], []
    i = 0
    while i < len(lines):
        kept.append(lines[i])
        delimiters = _HEREDOC.findall(lines[i])
        i += 1
        for dash, _, delimiter in delimiters:
            body = []
            while i < len(lines) and (lines[i].lstrip("\t") if dash else lines[i]) != delimiter:
                body.append(lines[i])
                i += 1
            i += 1
            bodies.append("\n".join(body))
    return "\n".join(kept), bodies


def _dash_c_script(args: list[str]) -> str | None:
    """The script a shell runs with `-c`, or None when it runs a file or stdin."""
    has_c, i = False, 0
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if not arg.startswith(("-", "+")):
            return arg if has_c else None
        has_c = has_c or bool(re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", arg))
        i += 1
    return None


def _find_exec(args: list[str]) -> list[list[str]]:
    """The commands of find's -exec/-execdir/-ok actions."""
    commands = []
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next(
                (j for j in range(i + 1, len(args)) if args[j] in (";", "+", "\\;")), len(args)
            )
            commands.append(args[i + 1 : end])
    return commands


def _program(stage: list[str]) -> str:
    """The program a stage runs, wrappers and redirections left out ("" when none)."""
    argv = _unwrap(_split_redirects(stage)[0])
    return os.path.basename(argv[0]) if argv else ""


def _pipe_into_shell(pipeline: list[list[str]]) -> str | None:
    programs = [_program(stage) for stage in pipeline]
    for i, program in enumerate(programs):
        if program in _DOWNLOADERS and any(_is_interpreter(p) for p in programs[i + 1 :]):
            return f"it pipes a download ({program}) into a shell; download, read, then run it"
    return None


def _is_interpreter(program: str) -> bool:
    return program in _INTERPRETERS or is_python(program)


def _inline_code_refusal(args: list[str]) -> str | None:
    """Why an interpreter's inline code (`python3 -c`, `perl -e`, `node -e`) must not run:
    it runs a git command the deny rules refuse (what it does to files, the state
    directory's guard and the sandbox see)."""
    code = " ".join(args[i + 1] for i, a in enumerate(args[:-1]) if a in _INLINE_FLAGS)
    if not code:
        return None
    hit = _INLINE_GIT.search(code)
    if hit:
        return (
            f"its inline code runs git {hit.group(1)}, which no command may "
            "(the harness alone commits, and the agent never pushes)"
        )
    return None


@lru_cache(maxsize=1)
def _git_commands() -> frozenset[str]:
    """The commands `git` runs itself (built in, in its exec path, or git-* on PATH)."""
    try:
        done = subprocess.run(
            ["git", "--list-cmds=main,others,nohelpers"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            env=scrub_env(dict(os.environ)),
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset(_KNOWN_GIT)
    return frozenset(done.stdout.decode("utf-8", "replace").split()) | _KNOWN_GIT


def _git_option_refusal(arg: str) -> str | None:
    """Why one of git's own options (before the subcommand) must not be given, or None."""
    if arg in ("-c", "--config-env") or arg.startswith(("--config-env=", "-c")):
        return (
            "git -c and --config-env set configuration (aliases, hooks, programs) on the "
            "command line, which no command may; run git without them"
        )
    if arg.startswith("--exec-path="):
        return "git --exec-path= runs git's commands from another directory"
    if arg.split("=", 1)[0] in ("--git-dir", "--work-tree"):
        return (
            "git --git-dir/--work-tree point git at another repository or work tree; "
            "run git in the repository as it is"
        )
    return None


def _git_sub_refusal(sub: str, rest: list[str]) -> str | None:
    """Why a git subcommand must not run: it publishes or destroys the user's work."""
    flags = {c for a in rest if re.fullmatch(r"-[a-zA-Z]+", a) for c in a[1:]}
    if sub == "push":
        return "git push publishes work; the agent never pushes (the user does after review)"
    if sub == "reset" and "--hard" in rest:
        return "git reset --hard would throw away the user's uncommitted work"
    if (
        sub == "clean"
        and ("f" in flags or "--force" in rest)
        and not ("n" in flags or "--dry-run" in rest)
    ):
        return "git clean -f deletes untracked files, which may be the user's work"
    if sub == "checkout" and ({"--", ".", ":/", "--force"} & set(rest) or "f" in flags):
        return "git checkout -- <paths> (or -f) discards uncommitted changes, which may be the user's work"
    if sub == "restore" and not (
        {"--staged", "-S"} & set(rest) and not {"--worktree", "-W"} & set(rest)
    ):
        return "git restore discards uncommitted changes in the work tree, which may be the user's work"
    if sub == "switch" and ({"--discard-changes", "--force"} & set(rest) or "f" in flags):
        return "git switch --discard-changes (or -f) throws away uncommitted changes"
    if sub == "stash" and rest[:1] not in (["list"], ["show"]):
        return "git stash moves the user's uncommitted work out of the work tree"
    if sub in _HARNESS_GIT:
        return (
            f"git {sub} changes branches, the index or history, which the harness alone does: "
            "it commits each verified task on the run's branch"
        )
    if sub == "symbolic-ref" and (len(_operands(rest)) > 1 or {"-d", "--delete"} & set(rest)):
        return (
            "git symbolic-ref moves HEAD to another branch, which the harness alone does: "
            "verified work must land on the run's branch"
        )
    if sub == "branch" and (
        {"-d", "-D", "-m", "-M", "-f", "--delete", "--move", "--force"} & set(rest)
    ):
        return "git branch -d/-m/-f changes branches, which the harness alone does"
    return None


# Commits, branch moves and index changes belong to the harness: a model commit would skip
# verification and could take the user's protected files with it.
_HARNESS_GIT = {
    "commit",
    "checkout",
    "reset",
    "switch",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "am",
    "add",
    "rm",
    "mv",
    "tag",
    "update-ref",
    "replace",
    "filter-branch",
    "worktree",
    "pull",
    "read-tree",
    "update-index",
    "reflog",
    "notes",
}


def _is_root_or_home(target: str) -> bool:
    """Whether an rm target is /, the home directory, or a top-level system directory."""
    home = os.path.expanduser("~").rstrip("/")
    # An unset variable expands to nothing: `rm -rf "$DIR"/*` with DIR unset is `rm -rf /*`.
    unset_empty = re.sub(
        r"\$(\w+|\{\w+\})", lambda m: os.environ.get(m.group(1).strip("{}"), ""), target
    )
    for text in {target, unset_empty}:
        if not text.strip():
            continue
        text = _strip_trailing(re.sub(r"/+", "/", text))
        if text in _ROOTS or text == home:
            return True
    return False


def _strip_trailing(text: str) -> str:
    """`text` without any run of trailing `/`, `/.` and `/*` (one backwards pass)."""
    end = len(text)
    while True:
        if text.endswith("/", 0, end):
            end -= 1
        elif text.endswith(("/.", "/*"), 0, end):
            end -= 2
        else:
            return text[:end]


def _expand(word: str, cwd: Path) -> list[str]:
    """The paths a shell word may name: variables and ~ expanded, globs matched within a
    bound (GlobTooLarge past it), relative to cwd."""
    text = os.path.expanduser(os.path.expandvars(word))
    path = text if os.path.isabs(text) else os.path.join(cwd, text)
    if glob.has_magic(path):
        return bounded_glob(path) or [path]
    return [path]
