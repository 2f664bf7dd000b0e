"""Which repository a work tree is, whatever its folder is called: its root commit and remote
(and the passwords its remotes' URLs hold, which a run masks, as it masks those of URLs in
its environment).

Read with plain `git` commands (safe.run_git), since a run asks before its first model
request, when GitPython is not imported yet (see handle.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from agent_cli.workspace.git.safe import run_git

_FIRST_ROOT = ("--max-parents=0", "--first-parent", "HEAD")  # the root HEAD's own line starts at
# a user name that is a token: long, of letters and digits both (never `git` or `deploy`)
_TOKEN_LIKE = re.compile(r"(?=[^@:]*\d)(?=[^@:]*[A-Za-z])[A-Za-z0-9_.~%-]{20,}")
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@host:owner/name.git


@dataclass(frozen=True)
class RepoIdentity:
    """A repository's identity: the root commit of HEAD's first-parent chain and the normalized
    URL of its remote (either may be empty). `former_root` is the root commit earlier versions
    named it by (the oldest of every root reachable from HEAD) when that is another: not a
    key, but where its items may still be filed."""

    root_commit: str = ""
    remote: str = ""
    former_root: str = ""

    def keys(self) -> list[str]:
        """The identity as memory keys, the root commit first; a match on any one is a match."""
        return [
            *([f"git:{self.root_commit}"] if self.root_commit else []),
            *([f"url:{self.remote}"] if self.remote else []),
        ]


def normalize_remote(url: str) -> str:
    """`host/owner/name` of a remote URL: scheme, user and password, port, query, fragment,
    `.git` and case of the host dropped, so the https and ssh forms of one remote are equal
    and no credential in the URL is kept; a local path as given, less its `.git` and trailing
    slashes as well, so that `/srv/calc.git`, `file:///srv/calc.git` (the form a shallow
    clone of a local repository needs) and `file://localhost/srv/calc.git` are one remote."""
    url = url.strip()
    if not url:
        return ""
    scp = _SCP.match(url)
    if scp and "://" not in url:
        host, path = scp.group(1), scp.group(2)
        key = f"{host.lower()}/{_without_git(path)}"
    elif "://" in url:
        _, host, path = _parts(url)
        if url[:7].lower() == "file://" and host.lower() == "localhost":
            host = ""  # git reads file://localhost/srv/calc.git as /srv/calc.git
        key = f"{host.lower()}/{_without_git(path)}"
    else:
        key = "/" * url.startswith("/") + _without_git(url)
    # a key is one word: a topic is its keys separated by blanks (`/My Projects/calc` would
    # be read as `/My`, which every repository beside it in that folder shares)
    return re.sub(r"\s", lambda m: quote(m.group()), key)


def _without_git(path: str) -> str:
    """`path` without its slashes at either end and its `.git` (`calc.git`, `calc/.git`)."""
    path = path.strip("/")
    return (path[:-4] if path.endswith(".git") else path).rstrip("/")


def remote_secrets(url: str) -> tuple[str, ...]:
    """The secrets in a remote URL's user part: its password (`https://user:PASSWORD@host/...`)
    and a user name that looks like a token (`https://TOKEN@host/...`, as hosts take a personal
    access token, also with a password beside it: `https://TOKEN:x-oauth-basic@host/...`)."""
    if "://" not in url:
        return ()
    user, _, _ = _parts(url.strip())
    name, _, password = user.partition(":")
    token = name if _TOKEN_LIKE.fullmatch(name) else ""
    return tuple(secret for secret in (password, token) if secret)


def remote_passwords(root: Path) -> tuple[str, ...]:
    """The passwords in the URLs of the repository's remotes (fetch and push, as `git remote
    -v` shows them), as written and percent-decoded: secrets that output may quote."""
    lines = _out(root, "remote", "-v").splitlines()
    return url_passwords(fields[1] for fields in map(str.split, lines) if len(fields) > 1)


def url_passwords(values: Iterable[str]) -> tuple[str, ...]:
    """The passwords in those of `values` that are URLs with one (`scheme://user:PASSWORD@`),
    and the user names that are tokens, as written and percent-decoded."""
    found: set[str] = set()
    for value in values:
        for secret in remote_secrets(value) if "@" in value else ():
            found.update((secret, unquote(secret)))
    return tuple(sorted(found))


def _parts(url: str) -> tuple[str, str, str]:
    """(user part, host, path) of a URL with a scheme, its port, query and fragment dropped
    (an IPv6 host keeps its brackets). The user part ends at the last `@`, not at the first
    `/`: a password may hold an unescaped `/` (an `@` in the path is read as its end too)."""
    rest = re.split(r"[?#]", url.split("://", 1)[1], maxsplit=1)[0]
    user, at, after = rest.rpartition("@")
    if not at:
        user, after = "", rest
    hostport, _, path = after.partition("/")
    if hostport.startswith("[") and "]" in hostport:
        return user, hostport[: hostport.index("]") + 1], path
    return user, hostport.split(":", 1)[0], path


def _out(root: Path, *args: str, secrets: tuple[str, ...] = ()) -> str:
    try:
        code, out, _ = run_git(list(args), root, secrets)
    except OSError:
        return ""
    return out.decode("utf-8", "replace").strip() if code == 0 else ""


def repo_identity(root: Path, secrets: tuple[str, ...] = ()) -> RepoIdentity:
    """The identity of the repository at `root`: empty parts where it has no commit or remote.

    A shallow clone's history stops at a cut, not at its root commit, so it has no root commit
    to be known by (its remote names it): its cut would be a root no full clone shares, and
    would no longer be one once the clone is deepened.

    The root is the one the first-parent chain from HEAD ends at: a history merged in (a
    vendored library, `git subtree add`) brings roots of its own, which other repositories that
    merged the same history share, and the chain never leads to them."""
    first, former = "", ""
    if not _is_shallow(root, secrets):  # one root (the common case): one walk of the history
        every = _out(root, "rev-list", "--max-parents=0", "HEAD", secrets=secrets).split()
        first = every[-1] if len(every) == 1 else ""
        if len(every) > 1:
            chain = _out(root, "rev-list", *_FIRST_ROOT, secrets=secrets).split()
            first = chain[-1] if chain else ""
            former = every[-1] if every[-1] != first else ""
    remote = _own_remote(root, secrets)
    url = _out(root, "remote", "get-url", remote, secrets=secrets) if remote else ""
    return RepoIdentity(first, normalize_remote(_absolute(url, root)), former)


def _own_remote(root: Path, secrets: tuple[str, ...]) -> str:
    """The name of the remote the repository at `root` is a clone of: `origin`, else the one
    most of its branches track (of two as many, the first by name), else none; never which
    branch is checked out, so that a run's own branch (which tracks nothing) is the same
    repository as the branch it started from.

    A remote no branch tracks is not taken for the repository's own: it is as often another
    project's, added to fetch or merge from (`git subtree add` of a library), and the
    library's own clones, known by that remote, would share this repository's memory."""
    remotes = _out(root, "remote", secrets=secrets).split()
    if "origin" in remotes or not remotes:
        return "origin" if remotes else ""
    refs = ("for-each-ref", "--format=%(upstream:remotename)", "refs/heads")
    tracked = [name for name in _out(root, *refs, secrets=secrets).split() if name in remotes]
    return min(tracked, key=lambda name: (-tracked.count(name), name), default="")


def _is_shallow(root: Path, secrets: tuple[str, ...]) -> bool:
    """Whether the repository at `root` is a shallow clone: git keeps the cut in `.git/shallow`
    (read as a file in a main work tree, asked of git in a linked one)."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return (dot_git / "shallow").is_file()
    return _out(root, "rev-parse", "--is-shallow-repository", secrets=secrets) == "true"


def _absolute(url: str, root: Path) -> str:
    """A remote that is a relative path, as the path it names from `root` (git reads it so):
    `../upstream` of two repositories in different places is two remotes, not one."""
    url = url.strip()
    if not url or "://" in url or _SCP.match(url) or Path(url).is_absolute():
        return url
    return str((Path(root) / url).resolve())
