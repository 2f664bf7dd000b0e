"""git run by the harness without running anything the repository or the user's config names.

A model command can write `.git/config`, an included file, or `~/.gitconfig`: a clean filter,
a textconv or diff driver, an fsmonitor, a hooks path there would run inside the harness's
own git calls, outside any sandbox. So every git process the harness starts:

- reads no system config (`GIT_CONFIG_NOSYSTEM=1`) and, as its global config, a file the
  harness writes itself (`GIT_CONFIG_GLOBAL`) holding only the allowed keys (`CARRIED`:
  identity, excludes, line endings, `safe.directory`) read from the user's own config once,
  before any command could change it; `/dev/null` when there are none. The file is named by
  its content, in one folder per user (`$TMPDIR/agent-git-UID`, mode 0700), so runs share it
  and a killed run leaves nothing behind;
- runs the user's own filter drivers (`FILTER`: `filter.<driver>.clean`, `.smudge`,
  `.process`, `.required` from the system and global config and the user's `GIT_CONFIG_*`
  variables, read in that same one listing), so that the agent's commits store what
  `git commit` stores (a git-lfs pointer, a notebook without outputs, a redacted secret), a
  worktree gets what `git worktree add` checks out, and a file a filter cleans does not look
  changed. They come last, after the repository's emptied keys: the user's driver is the one
  that runs even where `.git/config` defines one of the same name. Its command runs as the
  user's own git runs it (one naming a program inside the repository runs what the
  repository holds then). A driver only the repository's own config defines is emptied
  with the rest of that config (next point): it never runs. `unrun_filters` names those the
  attributes use (the work tree's `.gitattributes`, `info/attributes`, the user's
  `core.attributesFile`), and a run refuses them at its preflight, before `git status`
  would call the files they clean changed: its commits would store those files unfiltered;
- keeps of the repository's own config (and what it includes) only the keys on an
  allow-list (`_KEEP`); every other key is overridden with an empty value through
  `GIT_CONFIG_KEY_n` variables (not `-c`, which splits `filter.a=b.clean` at its first `=`),
  listed by `git config` and listed again whenever the bytes that decide it may have changed
  (configfiles.py);
- gets `BASE`, which no override touches: no hooks, no fsmonitor, no signing, no automatic gc,
  no transport, submodules never entered;
- gets the scrubbed environment model commands get (no API key), never prompts, and is
  reaped like a command: no process it starts outlives it.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from agent_cli.workspace.git import configfiles, traps
from agent_cli.workspace.git.configfiles import Fingerprint
from agent_cli.workspace.shell import reaper
from agent_cli.workspace.shell.runner import scrub_env

BASE: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.pager", ""),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("diff.external", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
)
_BASE_KEYS = {key.lower() for key, _ in BASE}
BASE_CONFIG = tuple(part for key, value in BASE for part in ("-c", f"{key}={value}"))
# Keys of the repository's own config that stay as they are: none names a program.
# Matched against the key lower-cased; any other key is emptied. The enumerations git checks
# whenever it reads its config, or in the commands the harness runs (`push.default`,
# `status.showUntrackedFiles`, `log.date`…), stay too: emptied, they stop every git command.
_KEEP = re.compile(
    r"push\.default|branch\.(autosetupmerge|autosetuprebase|sort)|tag\.sort"
    r"|status\.showuntrackedfiles|commit\.cleanup|log\.(date|decorate)"
    r"|diff\.(algorithm|submodule|colormoved|colormovedws|wserrorhighlight|dirstat)"
    r"|core\.(repositoryformatversion|bare|filemode|symlinks|ignorecase|precomposeunicode"
    r"|logallrefupdates|autocrlf|eol|safecrlf|checkroundtripencoding|excludesfile"
    r"|attributesfile|quotepath|protectntfs|protecthfs|worktree|sharedrepository|compression"
    r"|loosecompression|bigfilethreshold|packedgitlimit|packedgitwindowsize|deltabasecachelimit"
    r"|abbrev|commentchar|commentstring|warnambiguousrefs|splitindex|sparsecheckout"
    r"|sparsecheckoutcone|trustctime|checkstat|preloadindex|multipackindex|whitespace|longpaths"
    r"|createobject|hidedotfiles)"
    r"|extensions\.[^.]+|user\.(name|email|useconfigonly)|(author|committer)\.(name|email)"
    r"|i18n\.(commitencoding|logoutputencoding)|init\.defaultbranch"
    r"|remote\..+\.(url|pushurl|fetch)|url\..+\.(insteadof|pushinsteadof)"
    r"|branch\..+\.(remote|merge)|pack\.(compression|packsizelimit|windowmemory|threads|depth|window)"
    r"|index\.(version|threads|skiphash|sparse)|feature\.manyfiles|gc\.[a-z]+|maintenance\.[a-z]+"
    r"|(diff|status|merge)\.(renames|renamelimit)|advice\.[a-z]+"
)
# Read from the user's system and global config (and the user's own GIT_CONFIG_* variables)
# and handed to harness git in the config file the harness writes.
CARRIED = re.compile(
    r"user\.(name|email|useconfigonly)|(author|committer)\.(name|email)|safe\.directory"
    r"|core\.(excludesfile|attributesfile|autocrlf|eol|safecrlf|quotepath|precomposeunicode"
    r"|longpaths|protectntfs|protecthfs)|i18n\.(commitencoding|logoutputencoding)"
)
_MULTI = {"safe.directory"}
# The user's filter drivers: carried as variables after the repository's emptied keys.
FILTER = re.compile(r"filter\.(.+)\.(clean|smudge|process|required)")
_RUNS = ("clean", "smudge", "process")  # a driver that sets one of these runs a program
# A `filter=NAME` attribute in a .gitattributes line (not `-filter`, `!filter`).
_FILTER_ATTR = re.compile(r"(?:^|\s)filter=(\S+)")
# Includes are followed when the listing is made: their keys are listed (and judged) one by one.
_INCLUDE = re.compile(r"include\.path|includeif\..+\.path")
_NUMBER = re.compile(r"-?[0-9]+[kmg]?", re.IGNORECASE)  # git fails on an empty number
_FORCE_FALSE = re.compile(r"filter\..*\.required|(commit|tag)\.gpgsign")
_REPO_SCOPES = {"local", "worktree"}
_USER_SCOPES = {"system", "global", "command"}
_CONFIG_ENV = re.compile(r"GIT_CONFIG(_PARAMETERS|_COUNT|_KEY_\d+|_VALUE_\d+|_SYSTEM|_GLOBAL)?")
TIMEOUT_S = 120
TIMED_OUT = 124  # the exit code of a git command killed at TIMEOUT_S (as timeout(1) gives)

Entry = tuple[str, str, str | None]  # scope, key, value (None: a key set without `=`)
_carried_cache: dict[tuple[str, ...], tuple[str, list[tuple[str, str]]]] = {}
# The last listings of `overrides` by work tree and environment, with the fingerprint each holds.
_listed: OrderedDict[tuple[str, ...], tuple[Fingerprint, list[tuple[str, str]]]] = OrderedDict()
_LISTED_MAX = 64
_listed_lock = threading.Lock()  # harness git may run on more than one thread
_files_dir: list[Path] = []


def _user_env(secrets: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment without secrets: what reading the user's config needs."""
    return scrub_env(dict(os.environ), list(secrets))


def git_env(secrets: tuple[str, ...] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a harness git process: secrets and config variables removed,
    no system config, no global config (until `safe_env` names the harness's own), never
    prompting."""
    env = {k: v for k, v in _user_env(secrets).items() if not _CONFIG_ENV.fullmatch(k)}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
    )
    env.update(extra or {})
    return env


def config_entries(cwd: Path, env: dict[str, str]) -> list[Entry]:
    """Every config entry git sees in `cwd` under `env`, includes followed, in git's order."""
    return _listing(cwd, env)[0]


def _listing(cwd: Path, env: dict[str, str]) -> tuple[list[Entry], bool]:
    """`config_entries`, and whether git listed them and exited 0."""
    spared = reaper.adopt_orphans()
    try:
        out = subprocess.run(
            ["git", "config", "--list", "--show-scope", "--includes", "-z"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return [], False
    finally:
        reaper.kill_leftovers(spared)
    fields = out.stdout.decode("utf-8", "surrogateescape").split("\0")
    entries: list[Entry] = []
    for scope, item in zip(fields[::2], fields[1::2], strict=False):  # SCOPE NUL KEY LF VALUE NUL
        key, newline, value = item.partition("\n")
        entries.append((scope, key, value if newline else None))
    return entries, out.returncode == 0


def overrides(cwd: Path, env: dict[str, str]) -> list[tuple[str, str]]:
    """(key, value) that empties each key of the repository's own config off the allow-list.

    Listed by a `git config` process, and listed again only when the repository's config may
    have changed: a listing is reused while `configfiles.fingerprint`, read before this call,
    equals the one read before and after that listing (see configfiles.py). A listing that
    holds an include, or that git did not finish cleanly, is never reused.
    """
    key = (str(cwd), *sorted(f"{name}={value}" for name, value in env.items()))
    before = configfiles.fingerprint(cwd, env)
    with _listed_lock:
        held = _listed.get(key)
    if before is not None and held is not None and held[0] == before:
        return list(held[1])
    entries, clean = _listing(cwd, env)
    found = _emptied(entries)
    includes = any(_INCLUDE.fullmatch(name.lower()) for _, name, _ in entries)
    if (
        clean
        and not includes
        and before is not None
        and before == configfiles.fingerprint(cwd, env)
    ):
        with _listed_lock:
            _listed[key] = (before, found)
            _listed.move_to_end(key)
            while len(_listed) > _LISTED_MAX:
                _listed.popitem(last=False)
    else:
        with _listed_lock:
            _listed.pop(key, None)
    return list(found)


def _emptied(entries: list[Entry]) -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for scope, key, value in entries:
        low = key.lower()
        if scope not in _REPO_SCOPES or _KEEP.fullmatch(low) or _INCLUDE.fullmatch(low):
            continue
        if low in _BASE_KEYS:
            continue  # BASE sets it: an override after BASE would undo it
        if value is not None and _NUMBER.fullmatch(value.strip()):
            continue  # a number names no program, and an empty one would stop git
        found[key] = "false" if _FORCE_FALSE.fullmatch(low) else ""
    return list(found.items())


def neutralizing_config(cwd: Path, env: dict[str, str]) -> list[str]:
    """`overrides` written as `-c KEY=VALUE` flags (for showing them; run_git uses variables)."""
    return [part for key, value in overrides(cwd, env) for part in ("-c", f"{key}={value}")]


def carried(cwd: Path, secrets: tuple[str, ...] = ()) -> tuple[str, list[tuple[str, str]]]:
    """The harness's global config file for `cwd` (its path, or /dev/null), and the carried
    entries that come after the repository's emptied keys: those the user's own GIT_CONFIG_*
    variables set, and the user's filter drivers (`FILTER`), in git's order.

    Read once per repository and environment: later a command may have written ~/.gitconfig.
    """
    user = _user_env(secrets)
    key = (
        str(cwd),
        *(f"{k}={v}" for k, v in sorted(user.items()) if _CONFIG_ENV.fullmatch(k)),
        *(user.get(k, "") for k in ("HOME", "XDG_CONFIG_HOME")),
    )
    if key not in _carried_cache:
        entries = config_entries(cwd, user)
        text = _config_text([(k, v) for s, k, v in entries if s in _USER_SCOPES - {"command"}])
        after = [
            (k, v if v is not None else "true")
            for s, k, v in entries
            if s in _USER_SCOPES
            and (
                (s == "command" and _carry(k) and v is not None)
                or (
                    FILTER.fullmatch(k.lower())
                    and (v is not None or k.lower().endswith("required"))
                )
            )
        ]
        _carried_cache[key] = (text, after)
    text, after = _carried_cache[key]
    return _config_file(text), list(after)


def carried_filters(cwd: Path, secrets: tuple[str, ...] = ()) -> set[str]:
    """The filter drivers (names as git compares them) harness git runs in `cwd`: the user's."""
    drivers: dict[str, str] = {}
    for key, value in carried(cwd, secrets)[1]:
        found = FILTER.fullmatch(key)
        if found and found[2].lower() in _RUNS:
            drivers[found[1]] = value
    return {name for name, value in drivers.items() if value}


def unrun_filters(cwd: Path, common_dir: Path, secrets: tuple[str, ...] = ()) -> list[str]:
    """The filter drivers the attributes harness git reads name (`filter=NAME` in a
    .gitattributes file of the work tree, in `info/attributes` or in the user's attributes
    file, `core.attributesFile`) that only the repository's own config defines, so harness git
    never runs them.

    Cheap when there are none: the repository's config is listed anyway (`overrides`), and the
    attributes files are read only when it defines a driver the user's config does not.
    """
    env = git_env(secrets)
    env["GIT_CONFIG_GLOBAL"] = carried(cwd, secrets)[0]
    ours = carried_filters(cwd, secrets)
    theirs = set()
    for key, _ in overrides(cwd, env):
        found = FILTER.fullmatch(key)
        if found and found[2].lower() in _RUNS and found[1] not in ours:
            theirs.add(found[1])
    if not theirs:
        return []
    listing = ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"]
    _, out, _ = run_git(
        [*listing, ":(glob)**/.gitattributes"], cwd, secrets, {"GIT_LITERAL_PATHSPECS": "0"}
    )
    names = {".gitattributes", *out.decode("utf-8", "surrogateescape").split("\0")} - {""}
    texts = [_attributes_text(cwd / name, follow=False) for name in names]
    # git follows a link to these two, as it does not to a .gitattributes in the tree
    for path in (common_dir / "info" / "attributes", _users_attributes(cwd, secrets)):
        if path is not None:
            texts.append(_attributes_text(path, follow=True))
    named = {name for text in texts for name in _named_filters(text)}
    return sorted(theirs & named)


def _users_attributes(cwd: Path, secrets: tuple[str, ...]) -> Path | None:
    """The attributes file harness git reads besides the repository's: `core.attributesFile`
    (the user's, carried, or the repository's own, kept), else git's default,
    `$XDG_CONFIG_HOME/git/attributes` or `~/.config/git/attributes`; None without a HOME."""
    code, out, _ = run_git(["config", "--path", "--get", "core.attributesFile"], cwd, secrets)
    named = out.decode("utf-8", "surrogateescape").rstrip("\n")
    if code == 0 and named:
        return cwd / named  # a relative one is git's from the top of the work tree
    env = git_env(secrets)
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "git" / "attributes"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".config" / "git" / "attributes"
    return None


def _named_filters(text: str) -> set[str]:
    """The drivers an attributes file's lines set as `filter=NAME` (comments left out)."""
    return {
        name
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
        for name in _FILTER_ATTR.findall(line)
    }


def _attributes_text(path: Path, follow: bool) -> str:
    """The text of an attributes file, as git reads it: a regular file (a link to one only
    when `follow`), its first `configfiles.MAX_BYTES`; "" for anything else."""
    try:
        if not stat.S_ISREG((path.stat() if follow else path.lstat()).st_mode):
            return ""
        with path.open("rb") as f:
            return f.read(configfiles.MAX_BYTES).decode("utf-8", "surrogateescape")
    except OSError:
        return ""


def _carry(key: str) -> bool:
    return bool(CARRIED.fullmatch(key.lower()))


def _config_text(entries: list[tuple[str, str | None]]) -> str:
    """Config-file text of the carried `entries`: the last value of each key, every value of a
    multi-valued one."""
    last: dict[str, list[str]] = {}
    for key, value in entries:
        if not _carry(key) or value is None or "\n" in value:
            continue
        values = last.setdefault(key.lower(), [])
        if key.lower() in _MULTI:
            values.append(value)
        else:
            values[:] = [value]
    text = []
    for key, values in last.items():
        section, _, rest = key.partition(".")
        sub, _, name = rest.rpartition(".")
        head = f'[{section} "{_quote(sub)}"]' if sub else f"[{section}]"
        text += [head, *(f'\t{name} = "{_quote(v)}"' for v in values)]
    return "".join(line + "\n" for line in text)


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")


def _config_file(text: str) -> str:
    """A private file holding `text`, named by its content and written again (whole, by a
    rename) before each use if anything changed it; runs at once share it."""
    if not text:
        return os.devnull
    data = text.encode("utf-8", "surrogateescape")
    name = f"{hashlib.sha256(data).hexdigest()[:16]}.gitconfig"
    path = _private_dir() / name
    try:
        same = path.read_bytes() == data and not path.is_symlink()
    except OSError:
        same = False
    if not same:
        try:
            fd, written = tempfile.mkstemp(dir=path.parent, prefix=".write-")
        except FileNotFoundError:  # a cleaner of the temporary directory took the folder
            _files_dir.clear()
            path = _private_dir() / name
            fd, written = tempfile.mkstemp(dir=path.parent, prefix=".write-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(written, path)
        except BaseException:
            Path(written).unlink(missing_ok=True)
            raise
    return str(path)


def _private_dir() -> Path:
    """The folder of the harness's config files: this user's own in the temporary directory
    (`agent-git-UID`, mode 0700), so that a run killed by SIGKILL leaves nothing new behind;
    a folder of this process's, removed at its exit, when that one is not this user's alone."""
    if not _files_dir:
        uid = getattr(os, "getuid", lambda: None)()
        shared = Path(tempfile.gettempdir()) / f"agent-git-{uid}"
        try:
            shared.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            uid = None
        if uid is not None and _owned_alone(shared, uid):
            _files_dir.append(shared)
        else:
            _files_dir.append(Path(tempfile.mkdtemp(prefix="agent-git-")))
            atexit.register(shutil.rmtree, _files_dir[0], True)
    return _files_dir[0]


def _owned_alone(folder: Path, uid: int) -> bool:
    """Whether `folder` is a real folder (no link) of user `uid` that no one else may enter."""
    try:
        st = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077


def safe_env(
    cwd: Path, secrets: tuple[str, ...] = (), extra_env: dict[str, str] | None = None
) -> dict[str, str]:
    """`git_env` with the harness's global config file and, as `GIT_CONFIG_*` variables, BASE,
    the repository's emptied keys (none of BASE's) and the user's carried entries; GitError
    when a file git reads on its own would make it wait for ever (traps.py)."""
    traps.quick(cwd)
    env = git_env(secrets, extra_env)
    global_file, after = carried(cwd, secrets)
    env["GIT_CONFIG_GLOBAL"] = global_file
    return with_pairs(env, [*BASE, *overrides(cwd, env), *after])


def run_git(
    args: list[str],
    cwd: Path,
    secrets: tuple[str, ...] = (),
    extra_env: dict[str, str] | None = None,
) -> tuple[int, bytes, str]:
    """Run one harness git command; (exit code, stdout bytes, stderr text)."""
    env = safe_env(cwd, secrets, extra_env)
    spared = reaper.adopt_orphans()
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return TIMED_OUT, b"", timed_out(args)
    finally:
        reaper.kill_leftovers(spared)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def timed_out(args: list[str]) -> str:
    """What a git command killed at TIMEOUT_S reports in place of its stderr."""
    return f"git {args[0]} did not finish in {TIMEOUT_S}s"


def with_config(env: dict[str, str], flags: list[str]) -> dict[str, str]:
    """`env` with the `-c KEY=VALUE` pairs of `flags` appended as `GIT_CONFIG_KEY_n`/`_VALUE_n`."""
    pairs = []
    for flag in flags[1::2]:
        key, _, value = flag.partition("=")
        pairs.append((key, value))
    return with_pairs(env, pairs)


def with_pairs(
    env: dict[str, str], pairs: list[tuple[str, str]] | tuple[tuple[str, str], ...]
) -> dict[str, str]:
    """`env` with (key, value) `pairs` appended as `GIT_CONFIG_KEY_n`/`_VALUE_n` variables."""
    out = dict(env)
    count = out.get("GIT_CONFIG_COUNT", "0")
    n = int(count) if count.isdigit() else 0  # the caller's own entries come first: ours win
    for key, value in pairs:
        out[f"GIT_CONFIG_KEY_{n}"] = key
        out[f"GIT_CONFIG_VALUE_{n}"] = value
        n += 1
    out["GIT_CONFIG_COUNT"] = str(n)
    return out
