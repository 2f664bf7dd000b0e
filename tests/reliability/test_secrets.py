"""The API key never leaks: not to the model, the trajectory, state, memory, logs, commits,
--json output or --record file, however the model goes looking for it.

The key is planted in an ignored .env file the model reads, is sought in the command
environment (`env`, `echo $OPENAI_API_KEY`, the agent's own /proc/PID/environ), is copied by a
model that writes everything it saw into a committed file, is sent back by the model in its
own arguments, and a git hook is planted to dump the environment when the agent commits.
Afterwards every byte the run wrote is searched: all files under the repository (.agent/ and
.git/ included), every git object decompressed, stdout, stderr and the recording.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import git
from redactkit import VENDOR_UNCLEARED
from reliability.relkit import (
    GOAL,
    call,
    calls,
    events,
    finish,
    make_done,
    plan,
    read_state,
    repo_with,
    task,
)

KEY = "sk-proj-LEAKTEST0123456789abcdefghijklmnopqrstuvwxyzABCD"
PROC_ENVIRON = "tr '\\0' '\\n' < /proc/$PPID/environ"


class CopyingModel:
    """A scripted model whose callable steps see the request, to copy what it was shown."""

    def __init__(self, steps: list) -> None:
        self.steps, self.n = steps, 0

    def __call__(self, body: dict) -> dict:
        step = self.steps[self.n] if self.n < len(self.steps) else {"status": 500}
        self.n += 1
        return step(body) if callable(step) else step


def _everything_seen(body: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


def _files_holding(root: Path, needle: bytes, skip: set[str]) -> list[str]:
    hits = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and rel not in skip:
            if path.name == VENDOR_UNCLEARED:  # Chroma's uncleared index buffer (redactkit)
                continue
            if needle in path.read_bytes():
                hits.append(rel)
    return hits


def _git_objects(repo: Path) -> bytes:
    """Every object in the repository, decompressed, plus the full patch history."""
    batch = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    return batch + git(repo, "log", "-p", "--all").encode()


def test_the_key_appears_nowhere_the_run_wrote(run_agent, fake_server, tmp_path):
    repo = repo_with(
        tmp_path / "repo", {".env": f"OPENAI_API_KEY={KEY}\nDEBUG=1\n"}, ignore=(".env",)
    )
    hook = "printf '#!/bin/sh\\nenv > hook-env.txt\\n' > .git/hooks/post-commit"
    model = CopyingModel(
        [
            plan(task(), task("Create done2.txt", "test -f done2.txt")),
            calls(
                ("read_file", {"path": ".env"}),
                ("run", {"cmd": 'cat .env; env; echo "key=$OPENAI_API_KEY"'}),
                ("run", {"cmd": PROC_ENVIRON}),
                ("run", {"cmd": f"{hook} && chmod +x .git/hooks/post-commit"}),
                ("search", {"pattern": "OPENAI_API_KEY"}),
            ),
            # A model that learned the key anyway and sends it back in its own arguments.
            calls(("run", {"cmd": f"echo {KEY} | wc -c"}), ("note", {"text": f"key is {KEY}"})),
            lambda body: call("write_file", path="copy.txt", content=_everything_seen(body)),
            lambda body: call("note", text=_everything_seen(body)[-3000:]),
            make_done(),
            finish(f"done; by the way the key is {KEY}"),
            call("write_file", path="done2.txt", content="2\n"),
            finish(),
        ]
    )
    srv = fake_server(model, api_key=KEY)  # the server checks the key it is sent
    record = tmp_path / "record.jsonl"
    proc = run_agent(
        "run",
        GOAL,
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        "--record",
        str(record),
        cwd=repo,
        env={"OPENAI_API_KEY": KEY},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_state(repo)["status"] == "verified"

    # The attack did happen: the model read .env, ran the commands, planted the hook.
    # What the harness put in each request (the model's own tool-call arguments, echoed back to
    # it in the assistant message, are left out: it wrote them).
    seen = json.dumps([m.get("content") for r in srv.chat_requests for m in r["messages"]])
    assert "OPENAI_API_KEY=[REDACTED]" in seen and (repo / ".git/hooks/post-commit").exists()
    # The model's copy of what it saw holds the mask on lines no file had: refused, not written
    # (the mask would have stood in a file where the key was meant).
    assert "stands for a secret masked" in seen and not (repo / "copy.txt").exists()
    assert all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in srv.requests)

    assert KEY not in seen, "the model was shown the key"
    assert KEY not in proc.stdout and KEY not in proc.stderr
    assert KEY not in record.read_text()
    assert not (repo / "hook-env.txt").exists(), "the planted git hook ran with the agent's env"
    leaks = _files_holding(repo, KEY.encode(), skip={".env"})
    assert leaks == [], f"the key is in {leaks}"
    assert KEY.encode() not in _git_objects(repo)
    assert any(e["event"] == "run_done" for e in events(proc.stdout))


def test_a_command_that_dumps_the_environment_into_the_repo_is_never_committed(
    run_agent, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [plan(task()), call("run", cmd=f"{PROC_ENVIRON} > environ-dump.txt"), make_done(), finish()]
    )
    proc = run_agent(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo, env={"OPENAI_API_KEY": KEY}
    )
    assert KEY in (repo / "environ-dump.txt").read_text()  # the dump happened (no sandbox)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    done = events(proc.stdout)[-1]
    assert done["event"] == "run_done" and "environ-dump.txt holds the API key" in done["message"]
    assert "Traceback" not in proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    assert KEY.encode() not in _git_objects(repo)
    assert _files_holding(repo, KEY.encode(), skip={"environ-dump.txt"}) == []
    assert read_state(repo)["status"] == "failed"  # saved, resumable once the file is dealt with
    assert "environ-dump.txt" in git(repo, "status", "--porcelain")  # left for the human
