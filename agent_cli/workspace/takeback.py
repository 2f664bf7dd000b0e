"""The run's branch moves by the harness's commits alone: what a command committed is taken back.

The command policy refuses `git commit`, `git reset` and `git switch`, but it is no security
boundary: a script the model wrote runs git as well as any shell. So where a task's attempt
begins, `hold` notes the run's branch and its commit, the tree git's index holds and the tip
of every other local branch. When the attempt ends (and after each check the harness runs),
`take_back` finds HEAD where it was or puts it back: on the run's branch, at that commit, the
index as it was, the work tree as the commands left it (a soft reset, with the index too).
What they committed is then uncommitted work again, as if they had committed nothing: the
harness judges it (a test the task rewrote is named in `check_changed`) and commits it with
its trailer when it is verified, or leaves it uncommitted when it is not.

The user's branches are never moved, made or deleted here: one that moved or went away while
the attempt ran is named in the notice, with the git command that puts it back. Other runs'
branches (`agent/…`) move by their own runs' commits and are not looked at.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from agent_cli.core.errors import GitError
from agent_cli.core.text import readable
from agent_cli.workspace.git.safe import run_git

RUNS = "agent/"  # every run's branch is agent/<run-id>
_HEADS = "refs/heads/"
_LOG = "agent: the run's branch taken back to the commit its attempt began at"


@dataclass(frozen=True)
class Hold:
    """Where an attempt began: the run's branch, its commit, the tree of git's index then
    (None when git could not write it: conflicts), and the tips of the user's branches."""

    branch: str
    head: str
    index: str | None
    tips: dict[str, str]


def hold(root: Path, branch: str, secrets: tuple[str, ...] = ()) -> Hold | None:
    """Where the attempt begins; None when HEAD is not on the run's `branch` (nothing to hold
    it to: a commit of the harness's is refused there anyway)."""
    if _on(root, secrets) != branch:
        return None
    head = _git(root, secrets, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if head is None:
        return None
    index = _git(root, secrets, "write-tree")
    return Hold(branch, head, index, _users(_tips(root, secrets), branch))


def take_back(root: Path, held: Hold, who: str, secrets: tuple[str, ...] = ()) -> tuple[str, Hold]:
    """Put HEAD back on the run's branch at the commit it was held at, the index as it was,
    the work tree untouched. The line that says what `who` had done ("" when nothing moved),
    and the hold from now on (the user's branches as they are now: each is said once)."""
    tips = _tips(root, secrets)
    tip = tips.get(held.branch)
    on = _on(root, secrets)
    now = replace(held, tips=_users(tips, held.branch))
    said = _branches_said(held.tips, now.tips)
    if tip == held.head and on == held.branch:
        return (f"while {who} ran, {said}" if said else ""), now
    head = _git(root, secrets, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    new = _new_commits([head, tip], [held.head, *held.tips.values()], root, secrets)
    _restore(root, held, tip, on, secrets)
    done = []
    if new:
        done.append(f"committed {new} commit{'s' if new > 1 else ''}")
    if on != held.branch:
        done.append(f"switched to branch {readable(on)}" if on else "detached HEAD")
    if tip != held.head and not new:
        done.append("moved the run's branch" if tip else "deleted the run's branch")
    where = (
        f"{readable(held.branch)} is back at {held.head[:12]}, what they changed left "
        "uncommitted for the harness to check and commit"
    )
    also = f"; {said}" if said else ""
    line = f"{who} {' and '.join(done)}: taken back into the work tree ({where}){also}"
    return f"{line}; only the harness commits", now


def _restore(
    root: Path, held: Hold, tip: str | None, on: str | None, secrets: tuple[str, ...]
) -> None:
    """The run's branch at its held commit, HEAD on it, the index as it was held."""
    ref = _HEADS + held.branch
    steps = []
    if tip != held.head:
        steps.append(["update-ref", "-m", _LOG, ref, held.head])
    if on != held.branch:
        steps.append(["symbolic-ref", "-m", _LOG, "HEAD", ref])
    for args in steps:
        _must(root, secrets, args)
    if held.index is None:
        return
    # with -m, an entry whose content matches keeps its stat data: git status rehashes nothing
    if run_git(["read-tree", "-m", held.index], root, secrets)[0] != 0:
        _must(root, secrets, ["read-tree", held.index])


def _must(root: Path, secrets: tuple[str, ...], args: list[str]) -> None:
    code, _, err = run_git(args, root, secrets)
    if code != 0:
        raise GitError(
            f"a command moved the run's branch, and git {args[0]} could not take it back: "
            f"{' '.join(err.split()) or f'exit code {code}'}",
            f"check with git status; if .git/index.lock exists and no git runs, delete it; then "
            f"git switch {readable(_on(root, secrets) or 'BRANCH')} and `agent run --resume`",
        )


def _branches_said(before: dict[str, str], now: dict[str, str]) -> str:
    """The user's branches that moved, went away or came, each with the way back; "" for none."""
    said = []
    for name, was in sorted(before.items()):
        shown = readable(name)
        if name not in now:
            said.append(
                f"your branch {shown} was deleted (git branch {shown} {was[:12]} makes it again)"
            )
        elif now[name] != was:
            said.append(
                f"your branch {shown} moved from {was[:12]} to {now[name][:12]}, by a command "
                f"or by you, and is left as it is (git branch -f {shown} {was[:12]} puts it back)"
            )
    made = sorted(readable(name) for name in now if name not in before)
    if made:
        said.append(f"branch {', '.join(made)} was made and is left as it is")
    return "; ".join(said)


def _new_commits(
    now: list[str | None], before: list[str], root: Path, secrets: tuple[str, ...]
) -> int:
    """How many commits `now` reach that none of `before` did: those made while held."""
    tips = [sha for sha in dict.fromkeys(now) if sha]
    if not tips:
        return 0
    out = _git(root, secrets, "rev-list", "--count", *tips, "--not", *before, "--")
    return int(out) if out and out.isdigit() else 0


def _on(root: Path, secrets: tuple[str, ...]) -> str | None:
    """The branch HEAD is on (short name); None when detached."""
    ref = _git(root, secrets, "symbolic-ref", "-q", "HEAD")
    return ref[len(_HEADS) :] if ref and ref.startswith(_HEADS) else None


def _tips(root: Path, secrets: tuple[str, ...]) -> dict[str, str]:
    """Every local branch (short name) and its commit."""
    out = _git(root, secrets, "for-each-ref", "--format=%(objectname) %(refname)", _HEADS) or ""
    tips = {}
    for line in out.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.startswith(_HEADS):
            tips[ref[len(_HEADS) :]] = sha
    return tips


def _users(tips: dict[str, str], branch: str) -> dict[str, str]:
    """The branches of `tips` that are the user's: not the run's, nor another run's."""
    return {name: sha for name, sha in tips.items() if name != branch and not name.startswith(RUNS)}


def _git(root: Path, secrets: tuple[str, ...], *args: str) -> str | None:
    """One git command's output, stripped; None when it failed."""
    code, out, _ = run_git(list(args), root, secrets)
    return out.decode("utf-8", "surrogateescape").strip() if code == 0 else None
