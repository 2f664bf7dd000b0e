"""Shared fixtures: a loopback OpenAI-compatible server, tmp git repos, the real `agent` CLI."""

from __future__ import annotations

import faulthandler
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.llm.fake.server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# spawnguard fails a test not marked `slow` that starts agent, chroma or a Python module/script.
pytest_plugins = ["pytester", "spawnguard"]
SECRET_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
# The re-plan check after each verified task and the closing summary each take a scripted reply;
# tests of those turn them on, the others keep their scripts to the task at hand.
# What `agent doctor` asks a server: a tiny forced call, then a plan-sized one.
DOCTOR_REPLIES = [
    {"tool": "report_status", "args": {"ok": True}},
    {"tool": "submit_plan", "args": {"tasks": [{"goal": "add()", "acceptance_cmd": "pytest"}]}},
]
SCRIPTED_RUN_ENV = {"AGENT_REPLAN": "off", "AGENT_FINAL_SUMMARY": "false"}
# The runs' checks start pytest in the test's project; loading the plugins installed beside it
# (xdist, anyio, ...) is most of what each such start costs, and no project here uses one.
QUICK_PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` and return its stdout."""
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def make_repo(path: Path, source: Path | None = None) -> Path:
    """A git repository at `path` with one commit, copied from `source` if given."""
    if source is not None:
        shutil.copytree(source, path, dirs_exist_ok=True)
    else:
        path.mkdir(parents=True, exist_ok=True)
        (path / "README.md").write_text("# scratch\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "user.name", "Test")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own user cache: what a loopback server showed is kept there for a day,
    and another test's server may get the same port."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    """The demo project (a failing test) as a fresh git repository."""
    return make_repo(tmp_path / "demo", FIXTURES / "demo_repo")


@pytest.fixture
def scratch_repo(tmp_path: Path) -> Path:
    """An almost empty git repository with one commit."""
    return make_repo(tmp_path / "scratch")


@pytest.fixture
def fake_server():
    """Factory for started loopback servers, stopped at the end of the test."""
    servers: list[FakeOpenAIServer] = []

    def start(script=None, **kwargs) -> FakeOpenAIServer:
        srv = FakeOpenAIServer(script, **kwargs).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    """An environment for the CLI with no user config and no real keys."""
    env = {
        k: v for k, v in os.environ.items() if k not in SECRET_ENV and not k.startswith("AGENT_")
    }
    env["AGENT_RC"] = os.devnull  # no user settings
    env["HOME"] = str(tmp_path / "home")
    env["NO_COLOR"] = "1"
    env["AGENT_RETRY_BACKOFF_S"] = "0.01"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(SCRIPTED_RUN_ENV)
    env.update(QUICK_PYTEST_ENV)
    return env


@pytest.fixture
def run_agent(agent_env):
    """Run `python -m agent_cli ARGS` as a real process; returns the CompletedProcess."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict | None = None,
        timeout: float = 120,
        input: str | None = None,
    ) -> subprocess.CompletedProcess:
        full_env = {**agent_env, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "agent_cli", *args],
            cwd=cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input if input is not None else "",
        )

    return run


@pytest.fixture
def agent_in_process(agent_env, capfd):
    """Run the `agent` CLI's entry point (`agent_cli.cli.app.main`, what `python -m agent_cli`
    calls) in this process, with `run_agent`'s arguments and result: the environment is
    `agent_env` (plus `env`) alone, the working directory `cwd`, stdin `input`, and stdout and
    stderr what reached file descriptors 1 and 2 (git's and every child's included). For
    commands whose own process is not what a test checks: no interpreter start, no imports,
    no tokenizer load, the same code from `main` down. A test that checks signals, a terminal,
    the process's exit or anything left in the process keeps `run_agent`."""
    from agent_cli.cli.app import main

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict | None = None,
        timeout: float = 120,
        input: str | None = None,
    ) -> subprocess.CompletedProcess:
        full_env = {**agent_env, **(env or {})}
        # run_agent's timeout: a command that hangs ends this test process, with every
        # thread's traceback, rather than the whole test run waiting for ever.
        faulthandler.dump_traceback_later(timeout, exit=True)
        saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
        capfd.readouterr()  # what came before is not this command's
        os.environ.clear()
        os.environ.update(full_env)
        sys.stdin = io.StringIO(input or "")
        try:
            os.chdir(cwd or saved_cwd)
            try:
                main(list(args))
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            faulthandler.cancel_dump_traceback_later()
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdin = saved_stdin
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["agent", *args], code, out, err)

    return run


SPAWNING_FIXTURES = {"run_agent", "spawn_agent", "pty_agent"}


def pytest_collection_modifyitems(config, items):
    """Tests that take a fixture made to start the `agent` CLI are `slow`; spawnguard fails any
    other test that starts such a process without the marker."""
    for item in items:
        if SPAWNING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _chroma_or_skip() -> str:
    from chromakit import chroma_executable

    executable = chroma_executable()
    if executable is None:
        pytest.skip(
            "the `chroma` executable (installed with chromadb) is not next to "
            f"{sys.executable} nor on PATH"
        )
    return executable


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """One real Chroma server (`chroma run`) on a free port for the session; tests keep apart
    by using a database of their own (see `chroma_database`)."""
    from chromakit import ChromaProcess

    server = ChromaProcess(_chroma_or_skip(), tmp_path_factory.mktemp("chroma") / "server").start()
    yield server
    server.stop()


@pytest.fixture
def chroma_database(chroma_server, request) -> str:
    """A database name no other test uses on the shared server (created on first use)."""
    import re

    return "t-" + re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[-60:].strip("-") + "-db"


@pytest.fixture
def chroma_process(tmp_path):
    """Factory for a Chroma server of the test's own (to stop it midway), stopped at the end."""
    from chromakit import ChromaProcess

    executable, started = _chroma_or_skip(), []

    def start() -> ChromaProcess:
        started.append(ChromaProcess(executable, tmp_path / f"chroma-{len(started)}").start())
        return started[-1]

    yield start
    for server in started:
        server.stop()
