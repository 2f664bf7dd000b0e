"""Confinement of the file tools, attacked through the real `agent run` process.

The repository is planted with symlinks (absolute, relative, chained, dangling, to a
directory in the middle of a path, to .git, to themselves) and a hard link, all pointing at
a sentinel directory outside it. The scripted model then tries every way out in one reply;
each attempt must come back to it as a tool error, and the sentinel must not change.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import git, make_repo
from reliability.relkit import (
    GOAL,
    all_text,
    calls,
    finish,
    make_done,
    plan,
    sentinel,
    task,
    tool_results,
)

__all__ = ["sentinel"]  # the fixture, imported so that pytest finds it

BIG_LINES = 5000


def _planted_repo(root: Path, outside: Path) -> Path:
    """A repository whose committed files include symlinks and a hard link leading outside."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, BIG_LINES + 1)))
    # NUL bytes but valid UTF-8: only the binary check keeps it out of the context.
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" + bytes(range(128)) * 8)
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    (root / "link_file").symlink_to(outside / "secret.txt")
    (root / "link_dir").symlink_to(outside)
    (root / "src" / "up").symlink_to(Path("..") / ".." / "outside")  # relative, via src/
    (root / "chain_b").symlink_to(outside / "secret.txt")
    (root / "chain_a").symlink_to("chain_b")
    (root / "dangling").symlink_to(outside / "created-through-dangling.txt")
    (root / "gitdir").symlink_to(".git")
    (root / "loop").symlink_to("loop")
    os.link(outside / "hardlinked.txt", root / "hard.txt")
    return make_repo(root)


# (tool, arguments, what the tool result must say). `{out}` is the sentinel directory.
ATTACKS = [
    ("read_file", {"path": "/etc/passwd"}, "outside the repository"),
    ("read_file", {"path": "../outside/secret.txt"}, "outside the repository"),
    ("read_file", {"path": "{out}/secret.txt"}, "outside the repository"),
    ("read_file", {"path": "src/../../outside/secret.txt"}, "outside the repository"),
    ("read_file", {"path": "link_file"}, "through a symlink"),
    ("read_file", {"path": "link_dir/secret.txt"}, "through a symlink"),
    ("read_file", {"path": "src/up/secret.txt"}, "through a symlink"),
    ("read_file", {"path": "chain_a"}, "through a symlink"),
    ("read_file", {"path": "loop"}, "error"),
    ("read_file", {"path": "bad\u0000name"}, "NUL"),
    ("write_file", {"path": "link_dir/pwned.txt", "content": "x"}, "through a symlink"),
    ("write_file", {"path": "dangling", "content": "x"}, "through a symlink"),
    ("write_file", {"path": "../outside/pwned.txt", "content": "x"}, "outside the repository"),
    ("write_file", {"path": "{out}/sub/keep.py", "content": "x = 2\n"}, "outside the repository"),
    ("write_file", {"path": "src/up/sub/new.py", "content": "x"}, "through a symlink"),
    ("edit_file", {"path": "link_file", "old": "OUTSIDE", "new": "x"}, "through a symlink"),
    (
        "edit_file",
        {"path": "src/up/sub/keep.py", "old": "x = 1", "new": "x = 3"},
        "through a symlink",
    ),
    (
        "write_file",
        {"path": ".git/hooks/post-commit", "content": "#!/bin/sh\necho pwned\n"},
        "inside .git",
    ),
    ("write_file", {"path": "gitdir/config", "content": "[core]\n"}, "inside .git"),
    ("write_file", {"path": "src/../.git/info/attributes", "content": "* text\n"}, "inside .git"),
    (
        "edit_file",
        {"path": ".git/config", "old": "[core]", "new": "[core]\n\thooksPath = x"},
        "inside .git",
    ),
    ("write_file", {"path": ".agent/runs/forged/state.json", "content": "{}"}, "state directory"),
    ("search", {"pattern": "OUTSIDE", "path": "link_dir"}, "through a symlink"),
    ("search", {"pattern": "OUTSIDE", "path": "../outside"}, "outside the repository"),
    ("search", {"pattern": "OUTSIDE-SECRET"}, "no matches"),
    ("list_dir", {"path": "link_dir"}, "through a symlink"),
    ("list_dir", {"path": "src/up"}, "through a symlink"),
    ("list_dir", {"path": "../outside"}, "outside the repository"),
    ("list_dir", {"path": "{out}"}, "outside the repository"),
    ("list_dir", {"path": "gitdir"}, "list_dir does not show it"),
    ("list_dir", {"path": ".agent"}, "list_dir does not show it"),
    # A symlink the model's own command makes mid-run is seen through the same way.
    ("run", {"cmd": "ln -s {out} made_by_command"}, "[exit 0]"),
    ("read_file", {"path": "made_by_command/secret.txt"}, "through a symlink"),
    ("write_file", {"path": "made_by_command/new.txt", "content": "x"}, "through a symlink"),
]
NOT_REFUSALS = ("no matches", "[exit 0]")


def _attack_calls(outside: Path) -> list[tuple[str, dict]]:
    out = []
    for name, args, _ in ATTACKS:
        out.append((name, {k: v.replace("{out}", str(outside)) for k, v in args.items()}))
    return out


def test_every_escape_is_a_tool_error_and_nothing_outside_changes(
    agent_in_process, fake_server, sentinel, tmp_path
):
    repo = _planted_repo(tmp_path / "repo", sentinel)
    config_before = (repo / ".git" / "config").read_bytes()
    reads = [
        ("read_file", {"path": "blob.bin"}),
        ("read_file", {"path": "latin1.txt"}),
        ("read_file", {"path": "big.txt"}),
        ("read_file", {"path": "big.txt", "start_line": BIG_LINES - 2, "end_line": BIG_LINES + 50}),
        ("write_file", {"path": "hard.txt", "content": "replaced inside the repo\n"}),
        ("list_dir", {}),
    ]
    srv = fake_server(
        [plan(task()), calls(*_attack_calls(sentinel), *reads), make_done(), finish()]
    )
    proc = agent_in_process(
        "run",
        GOAL,
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        cwd=repo,
        env={"AGENT_TASK_MAX_STEPS": "60"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr

    results = tool_results(srv.chat_requests[2])
    assert len(results) == len(ATTACKS) + len(reads)
    for (name, args, expected), result in zip(ATTACKS, results, strict=False):
        assert expected in result, f"{name} {args}: {result}"
        if expected not in NOT_REFUSALS:
            assert "error:" in result, f"{name} {args} was not refused: {result}"

    binary, latin1, page1, last_page, hard, listing = results[len(ATTACKS) :]
    assert "binary file" in binary and "not shown" in binary and "ELF" not in binary
    assert "is not UTF-8 text" in latin1 and "1  caf\\xe9 cr\\xe8me" in latin1
    assert "[lines 1-400 of 5000 shown; read again with start_line=401" in page1
    assert "line 400\n" in page1 and "line 401\n" not in page1
    assert "line 5000" in last_page and "line 4997" not in last_page
    assert "error" not in hard
    # The listing is one level with sizes; git's and the agent's directories are not in it.
    assert "src/" in listing and "big.txt  " in listing and "link_dir@" in listing
    assert ".git" not in listing and ".agent" not in listing and "app.py" not in listing
    offered = [t["function"]["name"] for t in srv.chat_requests[1]["tools"]]
    assert "list_dir" in offered

    # Nothing was read from outside, nothing was written there or into .git / .agent.
    assert "OUTSIDE-SECRET-CONTENT" not in all_text(srv)
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert not (repo / ".git" / "info" / "attributes").exists()
    assert (repo / ".git" / "config").read_bytes() == config_before
    assert not (repo / ".agent" / "runs" / "forged").exists()
    # Writing the hard-linked file replaced it inside the repo; the outside inode kept its text.
    assert (sentinel / "hardlinked.txt").read_text() == "HARDLINKED-CONTENT\n"
    assert (repo / "hard.txt").read_text() == "replaced inside the repo\n"
    assert "hard.txt" in git(repo, "show", "--stat", "--format=", "HEAD")
    # The symlinks themselves are intact (never replaced by a regular file).
    for link in ("link_file", "link_dir", "dangling", "gitdir", "chain_a"):
        assert (repo / link).is_symlink()
