"""Build bench/thresholds_pairs.jsonl: related and unrelated pairs from this project's history.

    python bench/thresholds_pairs.py [--rev 3dddf72] [--out bench/thresholds_pairs.jsonl]

Everything is read from git at `--rev` (the commits reachable from it, the files as they are
there), and every choice is drawn from a seeded generator, so the same revision gives the same
file. The committed file is the benchmark: bench/thresholds.py reads it, not this script.

Kinds and sources (each related pair comes with a hard negative from the same package and an
easy negative from another one):

- associate, commit -> function: a commit's subject (a goal) and the docstring of a function
  that commit added (a fact about the code). Hard negative: the docstring of a function in the
  same folder that the commit did not touch; easy: one from another sub-package.
- associate, commit -> test: a commit's subject and the name of a test it added, as words
  (`test_stale_lock_is_taken_over` -> "stale lock is taken over": a note on behaviour). Hard: a test in the same test folder from a file the commit did not touch.
- associate, heading -> paragraph: a README or docs/ section heading and its first paragraph.
  Hard: another section's paragraph of the same file; easy: one of another file.
- episode, goal -> past goal: a commit's subject and the episode document (as
  `records.episode_docs` writes it) of another commit that changed the same function of the
  same module: a past run on the same code, worded differently. Hard: the episode of a commit
  that changed a module of the same folder and no file of the first; easy: of another folder.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REV = "3dddf72"
SEED = 22
PER_SOURCE = {"function": 45, "test": 40, "heading": 40, "episode": 60}
# modules nearly every change passes through: sharing one says little about what a change is
HUBS = {
    "agent_cli/cli/wiring.py",
    "agent_cli/cli/config/settings.py",
    "agent_cli/cli/app.py",
    "agent_cli/cli/commands/run_command.py",
    "agent_cli/agent/run/session.py",
    "agent_cli/agent/attempt/executor.py",
    "agent_cli/core/models.py",
    "agent_cli/core/protocols.py",
}
DEF = re.compile(r"^\+\s*(?:async\s+)?def (\w+)\(")
HUNK = re.compile(r"^@@ [^@]+ @@\s*(?:.*?\s)?(?:async\s+)?def (\w+)\(")
ITEM_CHARS = 400
# an episode pair's commits change at most this much: a sweeping change shares a function
# with many others without being about what they are about
FOCUSED_FILES = 8
FOCUSED_FUNCTIONS = 12
SHARED_BY = 4  # a function more commits changed is a hub: sharing it says little


@dataclass
class Commit:
    """One commit's subject and what it changed."""

    sha: str
    subject: str
    files: list[str] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)  # (path, function) it added
    changed: set[tuple[str, str]] = field(default_factory=set)  # (path, function) it touched


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def read_commits(rev: str) -> list[Commit]:
    """The non-merge commits reachable from `rev`, oldest first, with their changes."""
    out = []
    for line in git("log", "--no-merges", "--reverse", "--format=%H%x00%s", rev).splitlines():
        sha, subject = line.split("\0", 1)
        commit = Commit(sha, subject.strip())
        path = ""
        diff = git("show", "--format=", "-U0", sha, "--", "agent_cli", "tests")
        for row in diff.splitlines():
            if row.startswith("+++ "):
                path = row[6:] if row.startswith("+++ b/") else ""
                if path.endswith(".py"):
                    commit.files.append(path)
            elif path.endswith(".py") and (m := DEF.match(row)):
                commit.added.append((path, m.group(1)))
                commit.changed.add((path, m.group(1)))
            elif path.endswith(".py") and (m := HUNK.match(row)):
                commit.changed.add((path, m.group(1)))
        out.append(commit)
    return out


def docstrings(rev: str, path: str, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each function's docstring in `path` at `rev` (the first definition of a name wins)."""
    if path not in cache:
        try:
            tree = ast.parse(git("show", f"{rev}:{path}"))
        except (subprocess.CalledProcessError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        found: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 30 and node.name not in found:
                    found[node.name] = " ".join(doc.split())[:ITEM_CHARS]
        cache[path] = found
    return cache[path]


def test_words(name: str) -> str | None:
    """A test's name as the sentence it is (`test_a_b_c` -> "a b c"), if it has 4 words or more."""
    words = name.removeprefix("test_").split("_")
    return " ".join(words) if len(words) >= 4 else None


def folder(path: str) -> str:
    return path.rpartition("/")[0]


def subpackage(path: str) -> str:
    """`agent_cli/memory`, `tests/agent`: the first two parts of a path."""
    return "/".join(path.split("/")[:2])


def pair(
    kind: str,
    source: str,
    label: str,
    query: tuple[str, str],
    item: tuple[str, str],
    why: str,
    related: list[str],
) -> dict[str, Any]:
    """One labelled pair: `query` and `item` are (id, text); `related` names the ids of the
    items that are related to this query wherever they appear (bench/thresholds.py's retrieval
    table reads it)."""
    return {
        "kind": kind,
        "source": source,
        "label": label,
        "query": query[1],
        "item": item[1],
        "query_id": query[0],
        "item_id": item[0],
        "related_ids": related,
        "why": why,
    }


def code_pairs(
    rng: random.Random, commits: list[Commit], rev: str, tests: bool
) -> list[dict[str, Any]]:
    """Commit subject -> docstring of a function (or test) it added, with two negatives."""
    cache: dict[str, dict[str, str]] = {}
    area = "tests/" if tests else "agent_cli/"
    first: dict[tuple[str, str], tuple[str, str]] = {}  # (path, function) -> (text, adder)
    for c in commits:
        for path, name in c.added:
            is_test = name.startswith("test_")
            if path.startswith(area) and is_test == tests and (path, name) not in first:
                doc = test_words(name) if tests else docstrings(rev, path, cache).get(name)
                if doc:
                    first[(path, name)] = (doc, c.sha)
    pool = sorted((p, n, d, sha) for (p, n), (d, sha) in first.items())
    source = "test" if tests else "function"
    out: list[dict[str, Any]] = []
    order = [c for c in commits if not c.subject.lower().startswith(("merge", "revert"))]
    rng.shuffle(order)
    for c in order:
        if len(out) >= 3 * PER_SOURCE[source]:
            break
        mine = [(p, n, d) for p, n, d, _ in pool if (p, n) in set(c.added)]
        if not mine:
            continue
        path, name, doc = rng.choice(mine)
        hard = [x for x in pool if folder(x[0]) == folder(path) and x[0] not in c.files]
        easy = [x for x in pool if subpackage(x[0]) != subpackage(path) and x[0] not in c.files]
        if not hard or not easy:
            continue
        h, e = rng.choice(hard), rng.choice(easy)
        goal, why = (c.sha, c.subject), f"{c.sha[:7]} added {path}:{name}"
        out += [
            pair("associate", source, "related", goal, (c.sha, doc), why, [c.sha]),
            pair(
                "associate",
                source,
                "unrelated",
                goal,
                (h[3], h[2]),
                f"hard: {h[0]}:{h[1]}",
                [c.sha],
            ),
            pair(
                "associate",
                source,
                "unrelated",
                goal,
                (e[3], e[2]),
                f"easy: {e[0]}:{e[1]}",
                [c.sha],
            ),
        ]
    return out


def sections(rev: str) -> list[tuple[str, str, str]]:
    """(file, heading, first paragraph) of README.md and docs/*.md at `rev`."""
    names = ["README.md"] + [
        p for p in git("ls-tree", "--name-only", rev, "docs/").split() if p.endswith(".md")
    ]
    out = []
    for name in names:
        heading, para, lines = "", "", git("show", f"{rev}:{name}").splitlines() + ["#"]
        fenced = False
        for line in lines:
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            if line.startswith("#"):
                heading, para = line.lstrip("#").strip(), ""
            elif heading and not para and line.strip() and not line.startswith(("|", "    ")):
                para = line.strip()
            elif heading and para and line.strip() and not line.startswith(("|", "    ")):
                para += " " + line.strip()
            elif heading and para and len(para) >= 80:
                out.append((name, heading, para[:ITEM_CHARS]))
                heading = ""
            elif heading and para:
                para = ""
    return out


def heading_pairs(rng: random.Random, rev: str) -> list[dict[str, Any]]:
    """Section heading -> its first paragraph, with two negatives."""
    found = sections(rev)
    rng.shuffle(found)
    out: list[dict[str, Any]] = []
    for name, heading, para in found[: PER_SOURCE["heading"]]:
        hard = [s for s in found if s[0] == name and s[1] != heading]
        easy = [s for s in found if s[0] != name]
        if not hard or not easy:
            continue
        h, e = rng.choice(hard), rng.choice(easy)
        mine, other, far = f"{name}#{heading}", f"{h[0]}#{h[1]}", f"{e[0]}#{e[1]}"
        query, why = (mine, heading), f"{name}: {heading}"
        out += [
            pair("associate", "heading", "related", query, (mine, para), why, [mine]),
            pair(
                "associate", "heading", "unrelated", query, (other, h[2]), f"hard: {other}", [mine]
            ),
            pair("associate", "heading", "unrelated", query, (far, e[2]), f"easy: {far}", [mine]),
        ]
    return out


def episode_doc(c: Commit) -> str:
    """The document `records.episode_docs` embeds for a verified one-task run of `c`'s goal."""
    files = ", ".join(sorted(set(c.files)))
    return "\n".join(
        [
            f"Goal: {c.subject}",
            "Outcome: done. 1 of 1 task(s) verified.",
            f"Tasks: {c.subject} (verified, 1 attempts)",
            f"Files: {files}",
        ]
    )


def episode_pairs(rng: random.Random, commits: list[Commit]) -> list[dict[str, Any]]:
    """Goal -> episode of another commit on the same function, with two negatives."""
    code = [
        c
        for c in commits
        if any(p.startswith("agent_cli/") for p in c.files)
        and len(c.files) <= FOCUSED_FILES
        and len(c.changed) <= FOCUSED_FUNCTIONS
    ]
    by_function: dict[tuple[str, str], list[Commit]] = defaultdict(list)
    for c in code:
        for path, name in c.changed:
            if path.startswith("agent_cli/") and path not in HUBS:
                by_function[(path, name)].append(c)
    order = list(code)
    rng.shuffle(order)
    out: list[dict[str, Any]] = []
    for c in order:
        if len(out) >= 3 * PER_SOURCE["episode"]:
            break
        shared = sorted(
            (
                (key, other)
                for key in c.changed
                for other in by_function.get(key, [])
                if len(by_function[key]) <= SHARED_BY
                and other.sha != c.sha
                and other.subject != c.subject
            ),
            key=lambda ko: (ko[0], ko[1].sha),
        )
        if not shared:
            continue
        (path, name), other = rng.choice(shared)
        mine = {p for p in c.files if p.startswith("agent_cli/")}
        dirs = {folder(p) for p in mine}
        hard = [
            o
            for o in code
            if not set(o.files) & set(c.files) and {folder(p) for p in o.files} & dirs
        ]
        easy = [
            o
            for o in code
            if not {subpackage(p) for p in o.files} & {subpackage(p) for p in c.files}
        ]
        if not hard or not easy:
            continue
        h, e = rng.choice(hard), rng.choice(easy)
        why = f"{c.sha[:7]} and {other.sha[:7]} both changed {path}:{name}"
        goal, near = (c.sha, c.subject), sorted({o.sha for _, o in shared})
        out += [
            pair("episode", "episode", "related", goal, (other.sha, episode_doc(other)), why, near),
            pair(
                "episode",
                "episode",
                "unrelated",
                goal,
                (h.sha, episode_doc(h)),
                f"hard: {h.sha[:7]}",
                near,
            ),
            pair(
                "episode",
                "episode",
                "unrelated",
                goal,
                (e.sha, episode_doc(e)),
                f"easy: {e.sha[:7]}",
                near,
            ),
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default=REV)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "thresholds_pairs.jsonl")
    args = ap.parse_args()
    commits = read_commits(args.rev)
    rows = [
        *code_pairs(random.Random(SEED), commits, args.rev, tests=False),
        *code_pairs(random.Random(SEED + 1), commits, args.rev, tests=True),
        *heading_pairs(random.Random(SEED + 2), args.rev),
        *episode_pairs(random.Random(SEED + 3), commits),
    ]
    with args.out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[f"{row['kind']}/{row['source']}/{row['label']}"] += 1
    print(f"{len(rows)} pairs -> {args.out}")
    for key in sorted(counts):
        print(f"  {key}: {counts[key]}")


if __name__ == "__main__":
    main()
