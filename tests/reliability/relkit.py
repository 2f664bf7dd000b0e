"""Shared pieces of the reliability suite: small repos, scripted replies, real processes, evidence.

Everything here is real: git repositories in tmp directories, the `agent` CLI as a child
process, the loopback OpenAI-compatible server, signals sent with os.kill. Nothing is patched.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import QUICK_PYTEST_ENV, SCRIPTED_RUN_ENV, git, make_repo
from fencekit import balanced, pointed_result

PY = sys.executable
# Fast acceptance commands (no shell: the harness splits them with shlex).
DONE_CHECK = "test -f done.txt"
GOAL = "Create done.txt"


# -- repositories ---------------------------------------------------------------------------------


def repo_with(
    path: Path, files: dict[str, str | bytes] | None = None, ignore: tuple[str, ...] = ()
) -> Path:
    """A git repository at `path` holding `files` (committed) and a .gitignore of `ignore`."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README.md").write_text("# scratch\n")
    for name, content in (files or {}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    if ignore:
        (path / ".gitignore").write_text("".join(f"{p}\n" for p in ignore))
    return make_repo(path)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def branch(repo: Path) -> str:
    return git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()


def commit_count(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


# -- scripted replies -----------------------------------------------------------------------------


def call(name: str, **args) -> dict:
    """A reply with one tool call."""
    return {"tool": name, "args": args}


def calls(*pairs: tuple[str, dict | str]) -> dict:
    """A reply with several tool calls; a str argument is sent as raw (maybe broken) JSON."""
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def plan(*tasks: dict, goal: str = GOAL) -> dict:
    return {
        "tool": "submit_plan",
        "args": {"goal": goal, "tasks": list(tasks), "success_criteria": "the checks pass"},
    }


def task(goal: str = "Create done.txt", cmd: str | None = DONE_CHECK) -> dict:
    return {"goal": goal, "acceptance": "the check passes", "acceptance_cmd": cmd}


def finish(summary: str = "done") -> dict:
    return call("finish", summary=summary)


def no_facts() -> dict:
    """The reply to the end-of-run submit_facts request: nothing learned."""
    return call("submit_facts", facts=[])


def make_done(name: str = "done.txt", text: str = "done\n") -> dict:
    return call("write_file", path=name, content=text)


# -- processes ------------------------------------------------------------------------------------


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """What the `agent_env` fixture gives, for fixtures that outlive one test."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL") and not k.startswith("AGENT_")
    }
    env.update(
        AGENT_RC=os.devnull,  # no user settings
        HOME=str(home),
        NO_COLOR="1",
        AGENT_RETRY_BACKOFF_S="0.01",
        PYTHONUNBUFFERED="1",
        **SCRIPTED_RUN_ENV,
        **QUICK_PYTEST_ENV,
    )
    env.update(extra)
    return env


def to_a_gone_reader(env: dict[str, str], cwd, *args: str) -> subprocess.CompletedProcess:
    """`agent ARGS` as a process whose standard output is a pipe its reader closed before the
    first write, as `| head` does once it has read enough, or a pager quit early."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [PY, "-m", "agent_cli", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)


def run_cli(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run `python -m agent_cli ARGS` to the end (stdin empty)."""
    return subprocess.run(
        [PY, "-m", "agent_cli", *args],
        cwd=cwd,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Agent:
    """A running `agent` process with its output going to files (no pipe can fill up)."""

    def __init__(
        self,
        args: list[str],
        cwd: Path,
        env: dict[str, str],
        logdir: Path,
        stdin=subprocess.DEVNULL,
    ) -> None:
        logdir.mkdir(parents=True, exist_ok=True)
        n = len(list(logdir.glob("out-*.txt")))
        self.out_path, self.err_path = logdir / f"out-{n}.txt", logdir / f"err-{n}.txt"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                [PY, "-m", "agent_cli", *args],
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=out,
                stderr=err,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    @property
    def stdout(self) -> str:
        return self.out_path.read_text()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def spawn_agent(agent_env, tmp_path):
    """Start `python -m agent_cli ARGS` without waiting; every process is killed at the end."""
    started: list[Agent] = []

    def spawn(*args: str, cwd: Path, env: dict | None = None, stdin=subprocess.DEVNULL) -> Agent:
        agent = Agent(
            list(args), cwd, {**agent_env, **(env or {})}, tmp_path / "agent-logs", stdin=stdin
        )
        started.append(agent)
        return agent

    yield spawn
    for agent in started:
        agent.kill()


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 30,
    what: str = "a condition",
    interval: float = 0.02,
):
    """Poll `predicate` until it returns something true; fail the test after `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def pid_gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


# -- state on disk --------------------------------------------------------------------------------


def state_files(repo: Path) -> list[Path]:
    return sorted((repo / ".agent" / "runs").glob("*/state.json"))


def read_state(repo: Path) -> dict | None:
    """The newest run's state.json, or None when there is none yet."""
    files = state_files(repo)
    return json.loads(files[-1].read_text()) if files else None


def task_statuses(repo: Path) -> list[str]:
    state = read_state(repo) or {}
    return [t["status"] for t in state.get("agent_state", {}).get("plan", [])]


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


# -- evidence -------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root` (symlinks not followed): kind, size, content hash or link target."""
    entries: dict[str, tuple] = {}
    for directory, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                entries[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                entries[rel] = ("dir",)
            else:
                data = path.read_bytes()
                entries[rel] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return entries


@pytest.fixture
def sentinel(tmp_path):
    """A directory outside the repository; the test fails if anything in it changes."""
    root = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "secret.txt").write_text("OUTSIDE-SECRET-CONTENT\n")
    (root / "sub" / "keep.py").write_text("x = 1\n")
    (root / "hardlinked.txt").write_text("HARDLINKED-CONTENT\n")
    before = snapshot(root)
    yield root
    after = snapshot(root)
    assert after == before, f"files outside the repository changed: {set(after) ^ set(before)}"


def unbalanced_messages(srv) -> list[tuple[int, int, str]]:
    """(request, message, role) of every message whose fences do not balance."""
    bad = []
    for r, request in enumerate(srv.chat_requests):
        for m, message in enumerate(request.get("messages", [])):
            content = message.get("content")
            if isinstance(content, list):  # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if content and not balanced(content):
                bad.append((r, m, message.get("role", "?")))
    return bad


def tool_results(request: dict) -> list[str]:
    """The result of every tool message in one chat request, as the model reads it: a result
    that the request's working memory holds (the tool message then names the item) is taken
    from the memory block, where it is sent."""
    memory = next(
        (
            m["content"]
            for m in request["messages"]
            if str(m.get("content") or "").startswith("WORKING MEMORY:")
        ),
        "",
    )
    out = []
    for message in request["messages"]:
        if message.get("role") == "tool":
            content = message.get("content") or ""
            out.append(pointed_result(content, memory) or content)
    return out


def all_tool_results(srv) -> list[str]:
    """`tool_results` of every chat request the server received, in order."""
    return [text for request in srv.chat_requests for text in tool_results(request)]


def all_text(srv) -> str:
    """Every chat request body as one string."""
    return json.dumps(srv.chat_requests)


def roles_env(planner, executor, verifier) -> dict[str, str]:
    """The environment of a run whose planner, executor and verifier each have a fake server
    of their own (serving plan-model, exec-model and verify-model)."""
    return {
        "AGENT_BASE_URL": planner.url,
        "AGENT_MODEL": "plan-model",
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_MODEL": "exec-model",
        "AGENT_VERIFIER_BASE_URL": verifier.url,
        "AGENT_VERIFIER_MODEL": "verify-model",
    }
