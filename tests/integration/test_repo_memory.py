"""Long-term memory follows the repository, not its folder: real runs in this process.

Clones in differently named folders share one store (`home`) and everything in it;
an unrelated repository in a folder of the same name shares nothing; a plan-only run
leaves the store's files byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from learnkit import (  # noqa: F401
    planned_request,
    planning_requests,
    request_text,
    run_env,
    run_in_process,
    run_once,
    task_requests,
)
from runkit import GOAL, add_median, facts, finish, plan, task

from agent_cli.cli.wiring import RunOptions, execute
from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.chroma import LongTermMemory
from conftest import FIXTURES, git, make_repo

# The runs verify with `python -m pytest` as their acceptance command.
pytestmark = pytest.mark.slow

NOTE = "a median function in calc/stats.py sorts a copy so that tests/test_stats.py passes"
FACT = "calc/stats.py holds the median function that tests/test_stats.py checks"


def _clone(origin: Path, path: Path) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(path))
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    return path


def _learn_replies() -> list[dict]:
    return [
        plan(task()),
        {"tool": "note", "args": {"text": NOTE}},
        add_median(),
        finish(),
        facts((FACT, ["calc/stats.py"])),
    ]


def _learn(capsys, fake_server, repo: Path) -> str:
    """Run 1 in `repo`: a note, a verified task, a fact; its run id."""
    code, events = run_in_process(capsys, repo, GOAL, fake_server(_learn_replies()))
    assert code == 0, events
    return str(events[-1]["run_id"])


@pytest.fixture(scope="module")
def learned_once(tmp_path_factory) -> tuple[Path, str]:
    """The demo repository after run 1 (`_learn`), made once for the tests that start from
    it; each works on a copy (`learned_repo`). The repository and the run's id."""
    base = tmp_path_factory.mktemp("learned")
    repo = make_repo(base / "demo", FIXTURES / "demo_repo")
    code, events, _ = run_once(base, repo, GOAL, _learn_replies())
    assert code == 0, events
    return repo, str(events[-1]["run_id"])


@pytest.fixture
def learned_repo(learned_once, tmp_path) -> tuple[Path, str]:
    """A copy of that repository where `demo_repo` would be, and run 1's id: its store is
    keyed by the repository's root commit, which a copy keeps."""
    made, run_id = learned_once
    repo = tmp_path / "demo"
    shutil.copytree(made, repo, symlinks=True)
    return repo, run_id


def _planned(capsys, fake_server, repo: Path) -> str:
    """Run 2, plan-only, in `repo`: the text of its planning request."""
    return planned_request(capsys, fake_server([plan(task())]), repo, GOAL)


def test_clones_in_differently_named_folders_share_what_a_run_learned(
    run_env, fake_server, capsys, demo_repo, tmp_path
):
    run_env.setenv("AGENT_HOME", str(tmp_path / "shared-home"))
    alice = _clone(demo_repo, tmp_path / "alice" / "calc-work")
    bob = _clone(demo_repo, tmp_path / "bob" / "checkout")
    run_id = _learn(capsys, fake_server, alice)
    seen = _planned(capsys, fake_server, bob)
    assert NOTE in seen and FACT in seen and run_id in seen


def test_unrelated_repositories_in_same_named_folders_share_nothing(
    run_env, fake_server, capsys, tmp_path
):
    run_env.setenv("AGENT_HOME", str(tmp_path / "shared-home"))
    mine = make_repo(tmp_path / "a" / "demo", FIXTURES / "demo_repo")
    (tmp_path / "b" / "demo").mkdir(parents=True)
    (tmp_path / "b" / "demo" / "NOTICE").write_text("another project with the same layout\n")
    theirs = make_repo(tmp_path / "b" / "demo", FIXTURES / "demo_repo")
    run_id = _learn(capsys, fake_server, mine)
    seen = _planned(capsys, fake_server, theirs)
    assert NOTE not in seen and FACT not in seen and run_id not in seen
    assert "pytest -q tests/test_stats.py` checks work" not in seen  # nor the procedure
    assert NOTE in _planned(capsys, fake_server, mine)  # while its own repository recalls it


def test_items_under_the_folder_name_are_upgraded_by_the_next_run(
    run_env, fake_server, capsys, demo_repo
):
    srv = fake_server([plan(task())])
    store = demo_repo / ".agent" / "chroma"
    with LongTermMemory(store, _embedder(srv)) as mem:
        old = mem.curate(NOTE, topic=demo_repo.name, origin_event_id="e1")
    assert NOTE in _planned(capsys, fake_server, demo_repo)  # recalled before the upgrade
    run_id = _learn(capsys, fake_server, demo_repo)
    root = git(demo_repo, "rev-list", "--max-parents=0", "HEAD").split()[-1]
    with LongTermMemory(store, _embedder(srv)) as mem:  # its id now comes from its new topic
        got = mem.collection("facts").get(where={"legacy_topic": demo_repo.name})
    assert len(got["ids"]) == 1
    meta = got["metadatas"][0]
    assert meta["merged_ids"] == old and meta["id_upgrade"] == "content-ids"
    assert meta["topic"] == f"git:{root}" and meta["legacy_topic"] == demo_repo.name
    assert meta["upgraded"] == "repo-identity" and meta["confirmations"] == 2  # run 1's note
    assert run_id


def test_items_under_a_merged_in_root_are_upgraded_by_the_next_run(
    run_env, fake_server, capsys, demo_repo, tmp_path
):
    from agent_cli.agent.learn.topic import repo_topics

    library = tmp_path / "lib"
    library.mkdir()
    (library / "lib.txt").write_text("vendored\n")
    git(library, "init", "-q", "-b", "main")
    git(library, "add", "-A")
    dated = {**os.environ, "GIT_COMMITTER_DATE": "2001-01-01T00:00:00"}
    ident = ["-c", "user.name=Lib", "-c", "user.email=lib@example.com"]
    subprocess.run(["git", *ident, "commit", "-qm", "lib"], cwd=library, env=dated, check=True)
    old = git(library, "rev-list", "HEAD").strip()
    before = git(demo_repo, "rev-list", "--max-parents=0", "HEAD").strip()
    git(demo_repo, "fetch", "-q", str(library), "main")
    git(demo_repo, "merge", "-q", "--allow-unrelated-histories", "-m", "vendor", "FETCH_HEAD")
    assert git(demo_repo, "rev-list", "--max-parents=0", "HEAD").split()[-1] == old  # was its key
    assert f"git:{old}" not in repo_topics(demo_repo, own_store=False)  # any repository's there
    srv = fake_server([plan(task())])
    store = demo_repo / ".agent" / "chroma"
    with LongTermMemory(store, _embedder(srv)) as mem:  # as an earlier version filed it
        mem.curate(NOTE, topic=f"git:{old}", origin_event_id="e1")
    assert NOTE in _planned(capsys, fake_server, demo_repo)  # recalled before the upgrade
    _learn(capsys, fake_server, demo_repo)
    with LongTermMemory(store, _embedder(srv)) as mem:
        got = mem.collection("facts").get(where={"legacy_topic": f"git:{old}"})
    assert len(got["ids"]) == 1
    meta = got["metadatas"][0]
    assert meta["topic"] == f"git:{before}" and meta["confirmations"] == 2  # run 1's note


def test_a_remotes_password_is_masked_in_all_a_run_keeps(run_env, fake_server, capsys, demo_repo):
    password = "hunter2Passw0rd"
    git(demo_repo, "remote", "add", "origin", "https://deploy:hunter2Passw0rd@git.example.com/t/p")
    git(
        demo_repo,
        "remote",
        "set-url",
        "--push",
        "origin",
        "https://ci:s3cr%40tPush@git.example.com/t/p",
    )
    quoted = "origin is https://deploy:hunter2Passw0rd@git.example.com/t/p, pushed as ci:s3cr@tPush"
    srv = fake_server(
        [
            plan(task()),
            {"tool": "run", "args": {"cmd": "git remote -v"}},
            {"tool": "note", "args": {"text": quoted}},
            add_median(),
            finish(),
            facts((FACT, ["calc/stats.py"])),
        ]
    )
    code, events = run_in_process(capsys, demo_repo, GOAL, srv)
    assert code == 0, events
    remote_v = [str(r) for r in srv.chat_requests if "(fetch)" in str(r)]
    assert remote_v and all(password not in r for r in remote_v)  # nor sent to the model
    kept = [p for p in (demo_repo / ".agent").rglob("*") if p.is_file()]
    for secret in (password.encode(), b"s3cr%40tPush", b"s3cr@tPush"):
        assert not [p for p in kept if secret in p.read_bytes()]
    assert password not in json.dumps(events)


def test_a_password_in_a_url_of_the_environment_reaches_commands_but_not_the_model(
    run_env, fake_server, capsys, demo_repo, monkeypatch
):
    password = "pg-Passw0rd-7731"
    monkeypatch.setenv("DATABASE_URL", f"postgres://app:{password}@db.internal:5432/app")
    seen = demo_repo.parent / "db.txt"  # outside the work tree: a file holding it is not committed
    srv = fake_server(
        [
            plan(task()),
            {"tool": "run", "args": {"cmd": f"sh -c 'echo $DATABASE_URL | tee {seen}'"}},
            add_median(),
            finish(),
            facts((FACT, ["calc/stats.py"])),
        ]
    )
    code, events = run_in_process(capsys, demo_repo, GOAL, srv)
    assert code == 0, events[-1]
    assert password in seen.read_text()  # the command had the variable
    shown = [str(r) for r in srv.chat_requests if "db.internal" in str(r)]
    assert shown and all(password not in r for r in shown)  # the model never saw it
    kept = [p for p in (demo_repo / ".agent").rglob("*") if p.is_file()]
    assert not [p for p in kept if password.encode() in p.read_bytes()]
    assert password not in json.dumps(events)


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("with_snapshot", [True, False])
def test_plan_only_leaves_the_store_byte_identical(
    run_env, fake_server, capsys, learned_repo, with_snapshot
):
    demo_repo, _ = learned_repo
    store = demo_repo / ".agent" / "chroma"
    if not with_snapshot:  # the store itself must be read, and is opened from a copy
        snapshot.invalidate(store)
    before = _hashes(store)
    assert before
    seen = _planned(capsys, fake_server, demo_repo)
    assert NOTE in seen and FACT in seen  # it read the store, and counted no hit
    assert _hashes(store) == before


def test_a_plan_only_run_names_the_users_corrupt_store_not_the_copy_it_reads(
    run_env, fake_server, learned_repo
):
    demo_repo, _ = learned_repo
    store = demo_repo / ".agent" / "chroma"
    snapshot.invalidate(store)  # the store itself is read, from a copy
    db = store / "chroma.sqlite3"
    db.write_bytes(b"\0" * 100 + db.read_bytes()[100:])
    before = _hashes(store)
    opts = RunOptions(
        goal=GOAL,
        repo=demo_repo,
        plan_only=True,
        json_out=True,
        flags={"base_url": fake_server([plan(task())]).url, "approval": "auto"},
    )
    with pytest.raises(StorageError) as refused:
        execute(opts)
    assert f"memory store at {store}: chroma.sqlite3 is not an SQLite" in refused.value.one_line()
    assert _hashes(store) == before


def test_an_episode_keeps_the_tools_the_run_called(run_env, fake_server, learned_repo):
    demo_repo, run_id = learned_repo
    srv = fake_server([])
    with LongTermMemory(demo_repo / ".agent" / "chroma", _embedder(srv)) as mem:
        found = mem.recall(GOAL, kind="episode")
    assert [r.id for r in found] == [run_id]
    assert found[0].metadata["tools_used"] == ["edit_file", "finish", "note"]


def _embedder(server):
    from agent_cli.llm.openai.embedder import OpenAIEmbedder

    return OpenAIEmbedder(base_url=server.url, api_key=None, model="fake-embed")


def _recalled_by_the_model(capsys, fake_server, repo: Path) -> str:
    """A run in `repo` whose model calls `recall`: every later task request, as text."""
    srv = fake_server(
        [
            plan(task()),
            {"tool": "recall", "args": {"query": "median function sorts a copy"}},
            add_median(),
            finish(),
            facts(),
        ]
    )
    code, _ = run_in_process(capsys, repo, GOAL, srv)
    assert code == 0
    return "\n".join(request_text(r) for r in task_requests(srv)[1:])


def test_the_models_recall_keeps_to_its_own_repository(run_env, fake_server, capsys, tmp_path):
    run_env.setenv("AGENT_HOME", str(tmp_path / "shared-home"))
    mine = make_repo(tmp_path / "a" / "demo", FIXTURES / "demo_repo")
    (tmp_path / "b" / "demo").mkdir(parents=True)
    (tmp_path / "b" / "demo" / "NOTICE").write_text("another project with the same layout\n")
    theirs = make_repo(tmp_path / "b" / "demo", FIXTURES / "demo_repo")
    _learn(capsys, fake_server, mine)
    assert NOTE not in _recalled_by_the_model(capsys, fake_server, theirs)
    assert NOTE in _recalled_by_the_model(capsys, fake_server, mine)


def test_agent_recall_keeps_to_this_repository_unless_asked_for_all(
    run_env, fake_server, demo_repo
):
    from typer.testing import CliRunner

    from agent_cli.agent.learn.topic import repo_topic
    from agent_cli.cli.app import app

    srv = fake_server([])
    run_env.setenv("AGENT_BASE_URL", srv.url)
    with LongTermMemory(demo_repo / ".agent" / "chroma", _embedder(srv)) as mem:
        mine = mem.curate(NOTE, topic=repo_topic(demo_repo), origin_event_id="e1")
        other = mem.curate(NOTE + " elsewhere", topic="git:0123 url:x/y", origin_event_id="e2")

    def recalled(*flags: str) -> set[str]:
        args = ["recall", NOTE, "--json", "--kind", "note", "--repo", str(demo_repo), *flags]
        done = CliRunner().invoke(app, args, prog_name="agent")
        assert done.exit_code == 0, done.output
        return {r["id"] for r in json.loads(done.stdout)}

    assert recalled() == {mine}
    assert recalled("--all-repos") == {mine, other}


def test_what_run_1_learned_is_in_run_2s_requests_however_run_2_is_worded(
    run_env, fake_server, capsys, learned_repo
):
    demo_repo, _ = learned_repo
    srv = fake_server([plan(task()), add_median(), finish(), facts()])
    unlike = "Tidy the project so the continuous integration job goes green again"
    code, events = run_in_process(capsys, demo_repo, unlike, srv)
    assert code == 0, events
    planning, first_step = request_text(planning_requests(srv)[0]), task_requests(srv)[0]
    for text in (planning, request_text(first_step)):
        assert NOTE in text and FACT in text  # the digest: a small store is sent whole
        assert "pytest -q tests/test_stats.py" in text  # and its procedure
