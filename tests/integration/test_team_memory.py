"""Memory a team shares: the real `agent` CLI against a real Chroma server (`chroma run`).

Every test talks to the session's server through a database of its own, runs `agent` through
the CLI's entry point in the test's process (`agent_in_process`) and uses the loopback OpenAI-compatible server as the model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runkit import GOAL, PYTEST, add_median, events_of, finish, plan, task

from agent_cli.agent.learn.topic import repo_topic
from agent_cli.core.models import Episode, TaskRecord
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from chromakit import ChromaProcess, chroma_executable, free_port
from conftest import DOCTOR_REPLIES, git

pytestmark = pytest.mark.slow  # Chroma server and agent processes
TOKEN = "chroma-team-token-LEAKTEST-0123456789"
RUN_ID = "20250314-090000-aaaa"


def server_env(url: str, database: str, **extra: str) -> dict[str, str]:
    return {"AGENT_MEMORY_URL": url, "AGENT_MEMORY_DATABASE": database, **extra}


def one_error_line(proc) -> str:
    """The single line a failed command printed, with no traceback anywhere."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def seed(store, embedder, topic: str = "") -> str:
    """One episode and one fact in `store` (a directory or a server) of the repository `topic`
    ("": of none); the fact's id."""
    with LongTermMemory(store, embedder) as mem:
        mem.add_episode(
            Episode(
                run_id=RUN_ID,
                topic=topic,
                goal="Add retry with backoff to the HTTP client",
                plan=["Add retry"],
                status="verified",
                summary="1 of 1 verified.",
                tasks=[
                    TaskRecord(
                        goal="Add retry",
                        status="verified",
                        attempts=1,
                        acceptance_cmd="pytest -q tests/test_http.py",
                    )
                ],
            )
        )
        return mem.add_fact(
            "The HTTP client tests run with pytest -q tests/test_http.py", "harness", topic=topic
        )


@pytest.fixture(scope="module")
def embedder():
    return WordLlamaEmbedder()


def test_recall_and_show_through_the_server(
    agent_in_process, scratch_repo, chroma_server, chroma_database, embedder
):
    server = ChromaServer(chroma_server.url, database=chroma_database)
    fact = seed(server, embedder, repo_topic(scratch_repo))  # on a server, only its repository's
    env = server_env(chroma_server.url, chroma_database)
    recalled = agent_in_process(
        "recall", "retrying HTTP requests", "--json", cwd=scratch_repo, env=env
    )
    assert recalled.returncode == 0, recalled.stderr
    assert {r["id"] for r in json.loads(recalled.stdout)} == {RUN_ID, fact}
    shown = agent_in_process("memory", "show", "--json", cwd=scratch_repo, env=env)
    assert json.loads(shown.stdout)["counts"] == {
        "episodes": 1,
        "facts": 1,
        "notes": 0,
        "procedures": 0,
        "archive": 0,
    }
    assert not (scratch_repo / ".agent").exists()  # nothing was kept on this machine


def test_memory_commands_against_a_down_server_exit_1_in_one_line(agent_in_process, scratch_repo):
    env = server_env(f"http://127.0.0.1:{free_port()}", "team-db")
    for args in (["recall", "retry"], ["memory", "show"], ["memory", "export", "out.jsonl"]):
        proc = agent_in_process(*args, cwd=scratch_repo, env=env)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        line = one_error_line(proc)
        assert "memory server http://127.0.0.1" in line and "cannot be reached" in line


def test_reading_a_database_that_is_not_there_creates_nothing_on_the_server(
    agent_in_process, fake_server, scratch_repo, chroma_server, chroma_database
):
    """A mistyped memory_database: the commands that only read (and a --plan-only run) say
    there is no memory there and leave the server as it was, without that database."""
    import urllib.request

    env = server_env(chroma_server.url, chroma_database + "-mistyped")
    for args in (
        ["recall", "retry"],
        ["memory", "show", "--json"],
        ["memory", "export", "-"],
    ):
        proc = agent_in_process(*args, cwd=scratch_repo, env=env)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        assert "no memory yet" in proc.stderr and "-mistyped" in proc.stderr, proc.stderr
    srv = fake_server([plan(task())])
    planned = agent_in_process(
        "run", GOAL, "--plan-only", "--base-url", srv.url, cwd=scratch_repo, env=env
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    database = f"{chroma_server.url}/api/v2/tenants/default_tenant/databases/{chroma_database}"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(database + "-mistyped", timeout=10)
    assert missing.value.code == 404


def test_export_from_embedded_then_import_into_the_server(
    agent_in_process, scratch_repo, tmp_path, chroma_server, chroma_database, embedder
):
    fact = seed(scratch_repo / ".agent" / "chroma", embedder)
    (scratch_repo / ".agentrc").write_text(
        f'memory_url = "{chroma_server.url}"\nmemory_database = "{chroma_database}"\n'
    )
    assert (
        agent_in_process("trust", cwd=scratch_repo).returncode == 0
    )  # the .agentrc may name a server
    dump = tmp_path / "memory.jsonl"  # as the README says: an empty AGENT_MEMORY_URL = embedded
    exported = agent_in_process(
        "memory", "export", str(dump), cwd=scratch_repo, env={"AGENT_MEMORY_URL": ""}
    )
    assert exported.returncode == 0 and "exported 2 record(s)" in exported.stdout, exported.stderr
    imported = agent_in_process(
        "memory", "import", str(dump), cwd=scratch_repo
    )  # the .agentrc's server
    assert imported.returncode == 0, imported.stderr
    assert f"imported 2 record(s) into {chroma_server.url}" in imported.stdout
    with LongTermMemory(ChromaServer(chroma_server.url, database=chroma_database), embedder) as mem:
        assert mem.counts() == {
            "episodes": 1,
            "facts": 1,
            "notes": 0,
            "procedures": 0,
            "archive": 0,
        }
        assert {r.id for r in mem.recall("retrying HTTP requests")} == {RUN_ID, fact}


def test_a_run_with_the_server_down_goes_on_without_long_term_memory(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task()), add_median(), finish()])
    env = server_env(f"http://127.0.0.1:{free_port()}", "team-db")
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notices = [e["text"] for e in events_of(proc.stdout) if e["event"] == "notice"]
    down = [n for n in notices if "long-term memory is unavailable" in n]
    assert len(down) == 1 and "cannot be reached" in down[0] and "goes on without it" in down[0]
    assert events_of(proc.stdout)[-1]["status"] == "verified"
    assert not (demo_repo / ".agent" / "chroma").exists()  # no quiet fallback to a local store


def test_a_plan_only_run_with_the_server_down_promises_to_keep_nothing(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task())])
    env = server_env(f"http://127.0.0.1:{free_port()}", "team-db")
    proc = agent_in_process(
        "run", GOAL, "--plan-only", "--json", "--base-url", srv.url, cwd=demo_repo, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notices = [e["text"] for e in events_of(proc.stdout) if e["event"] == "notice"]
    down = [n for n in notices if "long-term memory is unavailable" in n]
    assert len(down) == 1 and "goes on without it" in down[0]
    assert "kept for the next run" not in down[0]  # it learns nothing, so it keeps nothing
    assert not (demo_repo / ".agent" / "memory-outbox.jsonl").exists()


def test_what_a_run_learned_with_the_server_down_reaches_it_with_the_next_run(
    agent_in_process, fake_server, demo_repo, tmp_path, embedder
):
    executable = chroma_executable()
    if executable is None:
        pytest.skip("the `chroma` executable (installed with chromadb) is not found")
    server = ChromaProcess(executable, tmp_path / "chroma")  # not started yet: down
    env = server_env(server.url, "team-db")
    srv = fake_server([plan(task()), add_median(), finish()])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = events_of(proc.stdout)[-1]["run_id"]
    outbox = demo_repo / ".agent" / "memory-outbox.jsonl"
    kept = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert kept[0]["op"] == "add_episode" and kept[0]["args"][0]["run_id"] == first

    server.start()  # the same address, answering now
    try:
        git(demo_repo, "checkout", "-q", "main")
        srv = fake_server([plan(task()), add_median(), finish()])
        proc = agent_in_process(
            "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=env
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        notices = [e["text"] for e in events_of(proc.stdout) if e["event"] == "notice"]
        assert any(f"sent {len(kept)} write(s) kept by an earlier run" in n for n in notices), (
            notices
        )
        assert not outbox.exists()
        with LongTermMemory(ChromaServer(server.url, database="team-db"), embedder) as mem:
            runs = {r.id for r in mem.recall(GOAL, k=10, kind="episode")}
            assert {first, events_of(proc.stdout)[-1]["run_id"]} <= runs
            assert mem.counts()["procedures"] == 1  # the same check, kept by both runs: merged
    finally:
        server.stop()


def clone(origin: Path, path: Path) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(path))
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    return path


def test_two_clones_share_what_the_first_run_learned(
    agent_in_process, fake_server, demo_repo, tmp_path, chroma_server, chroma_database
):
    (demo_repo / "ci").mkdir()
    (demo_repo / "ci" / "notes.txt").write_text(f"memory server token: {TOKEN}\n")
    git(demo_repo, "add", "-A")
    git(demo_repo, "commit", "-q", "-m", "ci notes")
    alice = clone(demo_repo, tmp_path / "alice" / "demo")
    bob = clone(demo_repo, tmp_path / "bob" / "stats-checkout")  # another folder name: one repo
    env = server_env(chroma_server.url, chroma_database, AGENT_MEMORY_TOKEN=TOKEN)
    first = fake_server(
        [
            plan(task()),
            {"tool": "read_file", "args": {"path": "ci/notes.txt"}},
            {"tool": "run", "args": {"cmd": "env"}},
            add_median(),
            finish(),
        ]
    )
    ran = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", first.url, cwd=alice, env=env
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = events_of(ran.stdout)[-1]["run_id"]

    second = fake_server([plan(task("Make median() in calc/stats.py reject an empty list"))])
    goal = "Make median in calc/stats.py raise ValueError on an empty list"
    planned = agent_in_process(
        "run", goal, "--plan-only", "--json", "--base-url", second.url, cwd=bob, env=env
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    texts = [m.get("content") or "" for m in second.chat_requests[0]["messages"]]
    recalled = next(
        t.split("<retrieved_memory>\n", 1)[1].split("\n</retrieved_memory>", 1)[0]
        for t in texts
        if "<retrieved_memory>\n" in t
    )
    assert run_id in recalled and PYTEST in recalled  # alice's episode and verified fact
    for repo in (alice, bob):
        assert not (repo / ".agent" / "chroma").exists()  # the memory lives on the server only
    seen = json.dumps(first.chat_requests) + json.dumps(second.chat_requests) + ran.stdout
    assert "memory server token:" in seen and "PATH=" in seen  # the file and `env` were shown
    assert TOKEN not in seen  # but never the token


def test_doctor_names_and_checks_the_memory_server(
    agent_in_process, fake_server, scratch_repo, chroma_server, chroma_database
):
    srv = fake_server(
        DOCTOR_REPLIES * 2,  # doctor runs twice
        models=("gpt-4o-mini",),
    )
    env = server_env(
        chroma_server.url,
        chroma_database,
        AGENT_MEMORY_TOKEN=TOKEN,
        OPENAI_API_KEY="sk-doctor-test-key-1234567890",
    )
    up = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert up.returncode == 0, up.stdout + up.stderr
    memory = next(line for line in up.stdout.splitlines() if line.split()[:2] == ["ok", "memory"])
    assert f"Chroma server {chroma_server.url}" in memory
    assert f"database {chroma_database}" in memory and "0 episode(s)" in memory
    assert TOKEN not in up.stdout and "env AGENT_MEMORY_TOKEN" in up.stdout

    env["AGENT_MEMORY_URL"] = f"http://127.0.0.1:{free_port()}"
    down = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert down.returncode == 1 and "Traceback" not in down.stdout + down.stderr
    fails = [line for line in down.stdout.splitlines() if "FAIL" in line]
    assert len(fails) == 1 and "memory" in fails[0] and "cannot be reached" in fails[0]


def test_doctor_fails_memory_a_run_would_refuse_for_its_embedder(
    agent_in_process, fake_server, scratch_repo, chroma_server, chroma_database, embedder
):
    from embedkit import HashEmbedder

    server = ChromaServer(chroma_server.url, database=chroma_database)
    with LongTermMemory(server, HashEmbedder()) as mem:  # a teammate's, with another embedder
        mem.add_fact("The HTTP client retries with backoff", "harness")
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    env = server_env(chroma_server.url, chroma_database, OPENAI_API_KEY="sk-doctor-1234567890")
    doctor = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    said = [line.split(maxsplit=2) for line in doctor.stdout.splitlines()]
    fails = [words[1:] for words in said if words[:1] == ["FAIL"]]
    assert [name for name, _ in fails] == ["memory"]
    assert fails[0][1] == (  # what every run says, and stops on
        f"memory at {server} was embedded with hash-256 (256 dims), but the configured embedder "
        f"is {embedder.name} (run `agent memory reindex` to re-embed everything with "
        f"{embedder.name}, or configure the embedder the store was built with)"
    )
    assert any(words[:2] == ["ok", "git"] for words in said)  # the checks after it still ran
