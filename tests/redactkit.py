"""A run whose every kind of text holds the API key, and where to look for it afterwards.

The key is the configured one (`OPENAI_API_KEY`), shaped like no known key, so only the
configured secret can mask it; a GitHub token beside it is masked by its shape alone. The
model puts the key in its plan (goal, tasks, criteria), its re-plan reason and new tasks, its
finish summaries, its verdict and its closing summary; the first task's acceptance command
prints the key and fails until the task's second attempt; a nested `sub/AGENTS.md` holding the
key is read once the second task touches `sub/`.
"""

from __future__ import annotations

import json
import os
import struct
import unicodedata
from pathlib import Path

from agent_cli.core.text import clean, each_string
from conftest import make_repo

KEY = "plainkey7f3a9c2e1b5d4068"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"  # no configured secret: masked by its shape
MASK = "[REDACTED]"
NEEDLES = (KEY, TOKEN)


def repo_for(tmp: Path) -> Path:
    """The repository: the key in an ignored `.env`, a nested AGENTS.md and a check that
    prints `.env` and fails twice (before the task, to see it can fail, and at attempt 1)."""
    repo = tmp / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "README.md").write_text("# scratch\n")
    (repo / "sub" / "AGENTS.md").write_text(f"Deploy with {KEY} and {TOKEN}, never here.\n")
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text(f"K={KEY}\nT={TOKEN}\n")
    count = tmp / "check-count"
    (repo / "check.sh").write_text(
        f"n=$(cat {count} 2>/dev/null || echo 0)\necho $((n + 1)) > {count}\n"
        "test $n -ge 2 && test -f done.txt && exit 0\ncat .env\nexit 1\n"
    )
    return make_repo(repo)


def _call(name: str, **args: object) -> dict:
    return {"tool": name, "args": args}


def script() -> list[dict]:
    """The model's replies, each carrying the key."""
    second = {"goal": f"Create sub/x.txt {KEY}", "acceptance": f"x exists {KEY}"}
    return [
        _call(
            "submit_plan",
            goal=f"Create things {KEY}",
            success_criteria=f"both exist {KEY}",
            tasks=[
                {
                    "goal": f"Create done.txt {KEY}",
                    "acceptance": f"the check passes {KEY}",
                    "acceptance_cmd": "sh check.sh",
                },
                {**second, "acceptance_cmd": None},
            ],
        ),
        _call("write_file", path="done.txt", content="d\n"),
        _call("finish", summary=f"wrote done.txt {KEY}"),
        _call("write_file", path="done.txt", content="d2\n"),
        _call("finish", summary=f"wrote it again {KEY} {TOKEN}"),
        _call(
            "revise_plan",
            keep=False,
            reason=f"the second task needs its folder named {KEY}",
            tasks=[{**second, "goal": f"Create sub/x.txt now {KEY}", "acceptance_cmd": None}],
        ),
        _call("write_file", path="sub/x.txt", content="x\n"),
        _call("read_file", path="README.md"),
        _call("finish", summary=f"made sub/x.txt {KEY}"),
        _call("submit_verdict", verdict="pass", reason=f"sub/x.txt is there {KEY}"),
        _call("submit_facts", facts=[]),
        {"content": f"Both files are made. {KEY} {TOKEN}"},
    ]


def env(tmp: Path) -> dict[str, str]:
    """The variables the run sees: the key, no user config, embeddings from the fake server."""
    return {
        "OPENAI_API_KEY": KEY,
        "AGENT_RC": os.devnull,  # no user settings
        "HOME": str(tmp / "home"),
        "AGENT_RETRY_BACKOFF_S": "0.01",
        "AGENT_EMBEDDING_MODEL": "fake-embed",
        "NO_COLOR": "1",
    }


def holding(text: str) -> list[str]:
    """The needles `text` holds."""
    return [n for n in NEEDLES if n in text]


# Taken out as a terminal shows text (an escape sequence, a bell, a direction isolate, an
# 8-bit CSI), or drawn as nothing (a zero-width space): one inside a secret keeps it from
# matching as it is, and joins it again as shown.
SPLITS = ("\x1b[m", "\x07", "\u2066", "\x9b", "\u200b")


def split(secret: str, n: int = 0) -> str:
    """`secret` with the `n`th of SPLITS (in turn) inside it."""
    return f"{secret[:7]}{SPLITS[n % len(SPLITS)]}{secret[7:]}"


def joined(printed: str, *secrets: str) -> list[str]:
    """The strings of a command's output (its JSON's, or the text itself) in which a terminal
    shows one of `secrets` once their escape sequences and control characters are out."""
    found: list[str] = []

    def seen(text: str) -> str:
        found.append(text)
        return text

    each_string(json.loads(printed) if printed.startswith(("[", "{")) else printed, seen)
    return [text for text in found if any(secret in _as_seen(text) for secret in secrets)]


def _as_seen(text: str) -> str:
    """`text` as a terminal shows it: cleaned, and without what it draws as nothing."""
    return "".join(ch for ch in clean(text) if unicodedata.category(ch) != "Cf")


def request_bodies(srv) -> list[str]:
    """Every request body the server received (chat and embeddings), as JSON text."""
    return [json.dumps(r["body"], ensure_ascii=False) for r in srv.requests if r["body"]]


# Chroma's HNSW index writes these files at their whole capacity from buffers it never clears:
# slots past the last vector hold recycled process memory (chroma-core/chroma#7688, open in
# chromadb 1.5.9), which now and then includes the key. Not files the agent writes: of
# `length.bin` nothing is read, of `data_level0.bin` only the slots of the vectors it holds.
VENDOR_UNCLEARED = "length.bin"
VECTORS = "data_level0.bin"


def _written(path: Path) -> bytes:
    """The bytes of `path` that hold what was stored: of an HNSW `data_level0.bin`, its first
    `count` elements of `size` bytes, as its `header.bin` (version 1) says; else all of it."""
    data = path.read_bytes()
    header = path.with_name("header.bin")
    if path.name != VECTORS or not header.is_file():
        return data
    raw = header.read_bytes()
    if len(raw) < 36 or struct.unpack_from("<i", raw, 0)[0] != 1:
        return data
    count, size = struct.unpack_from("<Q", raw, 20)[0], struct.unpack_from("<Q", raw, 28)[0]
    return data[: count * size]


def files_holding(root: Path) -> list[str]:
    """The files under `root` whose stored bytes hold a needle (`_written`; never Chroma's
    `length.bin`)."""
    return [
        p.relative_to(root).as_posix()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and not p.is_symlink()
        and p.name != VENDOR_UNCLEARED
        and any(n.encode() in _written(p) for n in NEEDLES)
    ]
