"""`agent recall` and `agent memory ...` on a real Chroma store in a tmp repo: in this process
(`agent_in_process`), and as real processes where the process is what is checked (what it
imports, an argument that is not UTF-8, a reader that closes the pipe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.core.models import Episode
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory
from conftest import git
from redactkit import KEY as PLAIN_KEY
from redactkit import joined, split

pytestmark = pytest.mark.slow  # some tests here start the agent as a process

KEY = "sk-test-configured-key-0123456789abcdef"
OLD_RUN, NEW_RUN = "20250313-080000-aaaa", "20250314-090000-bbbb"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_", "OPENAI_")) and k not in ("COLUMNS", "LINES")
    }
    return {**env, "HOME": str(home), "COLUMNS": "200", **extra}


def spawned(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m agent_cli ARGS` as a real process, for what only a process shows."""
    return subprocess.run(
        [sys.executable, "-m", "agent_cli", *args],
        cwd=cwd,
        text=True,
        env=_env(cwd.parent, **env),
        capture_output=True,
        timeout=120,
    )


@pytest.fixture
def agents(agent_in_process):
    """Run the CLI's commands in this process, one after another, in `cwd` with its parent as
    HOME (as `_env` gives a process); their results in order."""

    def run(cwd: Path, *commands: list[str], **env: str) -> list[subprocess.CompletedProcess]:
        # NO_COLOR empty is NO_COLOR unset (as the commands read it), as in `_env`
        over = {"HOME": str(cwd.parent), "COLUMNS": "200", "NO_COLOR": "", **env}
        return [agent_in_process(*args, cwd=cwd, env=over) for args in commands]

    return run


@pytest.fixture
def agent(agents):
    def run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
        return agents(cwd, list(args), **env)[0]

    return run


@pytest.fixture(scope="session")
def embedder():
    return WordLlamaEmbedder()


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def _save_working_memory(state: Path, outputs: int = 6) -> None:
    """Two runs: an older one without working memory, the latest with hot and cold items."""
    from agent_cli.memory import SqliteStore, WorkingMemory

    (state / "runs" / NEW_RUN).mkdir(parents=True)
    wm = WorkingMemory(
        store=SqliteStore(state / "runs" / NEW_RUN / "memory.db"), embedder=None, max_tokens=300
    )
    wm.set_goal("add a verbose flag")
    wm.note("remember to update the README", "readme note")
    for i in range(outputs):
        wm.tick()
        wm.add("tool_output", f"output number {i} " + "lorem ipsum " * 30, f"output {i}")
    wm.add("edit", "def verbose(): pass", "edit cli.py")
    for run_id, data in ((OLD_RUN, {"status": "done"}), (NEW_RUN, {"memory": wm.export_state()})):
        (state / "runs" / run_id).mkdir(parents=True, exist_ok=True)
        (state / "runs" / run_id / "state.json").write_text(json.dumps(data))


@pytest.fixture
def seeded(repo, embedder) -> Path:
    mem = LongTermMemory(repo / ".agent" / "chroma", embedder)
    mem.add_episode(
        Episode(
            run_id=NEW_RUN,
            goal="Make quoted strings parse",
            status="verified",
            summary="escaped quotes in the tokenizer",
            started_at="2025-03-14T09:00:00+00:00",
            failure_signatures=[
                "tests/test_parser.py::test_quotes failed at tests/test_parser.py:42"
            ],
        )
    )
    mem.add_episode(
        Episode(
            run_id=OLD_RUN,
            goal="Update the README installation section",
            status="verified",
            started_at="2025-03-13T08:00:00+00:00",
        )
    )
    mem.add_fact("The parser tests run with pytest tests/test_parser.py", "harness, run " + NEW_RUN)
    claim = mem.add_fact("The parser was written by a contractor", "model claim", trust=0.3)
    (repo.parent / "fact_id").write_text(claim)
    return repo


def test_without_state_every_command_says_no_memory_and_creates_nothing(repo, agents):
    commands = [
        ["recall", "parser"],
        ["recall", "parser", "--json"],
        ["memory", "show"],
        ["memory", "show", "--json"],
        ["memory", "forget", "x"],
        ["memory", "expire"],
        ["memory", "export", str(repo.parent / "out.jsonl")],
        ["memory", "reindex"],
    ]
    results = agents(repo, *commands)
    for args, r in zip(commands, results, strict=False):
        # an id that is not there is an error, as it is in a memory that exists
        assert r.returncode == (1 if args[1:2] == ["forget"] else 0), (args, r.stderr)
        assert "no memory yet" in r.stderr, args
    assert (repo.parent / "out.jsonl").read_text() == ""  # an export of nothing
    assert json.loads(results[1].stdout) == []
    assert set(json.loads(results[3].stdout)["counts"].values()) == {0}
    assert sorted(p.name for p in repo.iterdir()) == [".git"]


def test_outside_a_git_repository_says_how_to_fix_it(tmp_path, agents):
    (tmp_path / "plain").mkdir()
    for r in agents(tmp_path / "plain", ["recall", "x"], ["memory", "show"]):
        assert r.returncode == 1
        assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
        assert "--repo" in r.stderr and "Traceback" not in r.stderr


def test_recall_prints_ranked_results_as_a_table_and_as_json(seeded, agents):
    table, as_json, facts = agents(
        seeded,
        ["recall", "tests/test_parser.py::test_quotes failed"],
        ["recall", "quoted strings parser", "--json", "--k", "3"],
        ["recall", "who wrote the parser", "--kind", "fact", "--min-trust", "0.2", "--json"],
    )
    assert table.returncode == 0, table.stderr
    first = next(line for line in table.stdout.splitlines() if NEW_RUN in line)
    assert "episode" in first and "2025-03-14" in first and "Make quoted strings parse" in first
    assert f"run {NEW_RUN}" in table.stdout and "failed before" in table.stdout
    results = json.loads(as_json.stdout)
    assert results[0]["id"] == NEW_RUN and len(results) <= 3
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert set(results[0]) >= {"score", "kind", "id", "text", "gist", "source", "date", "metadata"}
    assert "contractor" not in as_json.stdout  # trust 0.3 is below the default --min-trust
    found = json.loads(facts.stdout)
    assert {r["kind"] for r in found} == {"fact"} and "contractor" in found[0]["text"]


def test_recall_answers_from_the_snapshot_without_chromadb_as_the_store_would(
    seeded, embedder, agents
):
    from agent_cli.memory.longterm import snapshot

    store = seeded / ".agent" / "chroma"
    with LongTermMemory(store, embedder) as mem:
        mem.add_fact("Quoted strings are tokenized in src/lexer.py", "harness")  # a change
    assert snapshot.exists(store)
    queries = [
        ["recall", "quoted strings parser", "--json", "--k", "10"],
        ["recall", "who wrote the parser", "--kind", "fact", "--min-trust", "0.2", "--json"],
    ]
    fast = agents(seeded, *queries)
    # what it imports: a process of its own
    traced = spawned(seeded, "recall", "parser", **{"PYTHONPROFILEIMPORTTIME": "1"})
    assert traced.returncode == 0 and "| agent_cli" in traced.stderr
    assert "chromadb" not in traced.stderr, "the snapshot needs no chromadb"
    snapshot.invalidate(store)
    slow, again = agents(seeded, *queries), agents(seeded, *queries)
    for a, b, c in zip(fast, slow, again, strict=True):
        assert a.returncode == b.returncode == 0, a.stderr + b.stderr
        got, expected = json.loads(a.stdout), json.loads(b.stdout)
        assert [r["id"] for r in got] == [r["id"] for r in expected] and got
        # the same bytes, whichever answered and however often: scores rounded, keys sorted
        assert a.stdout == b.stdout == c.stdout
        assert all(list(r["metadata"]) == sorted(r["metadata"]) for r in got)


def test_memory_show_prints_the_latest_working_memory_and_counts(seeded, agent, agents):
    before = agent(seeded, "memory", "show")
    assert before.returncode == 0, before.stderr
    assert "No run has recorded working memory yet." in before.stdout
    assert (
        "Long-term memory: 2 episode(s), 2 fact(s), 0 note(s), 0 procedure(s), 0 archived item(s)."
    ) in before.stdout
    _save_working_memory(seeded / ".agent")
    text, as_json, edits = agents(
        seeded,
        ["memory", "show"],
        ["memory", "show", "--json"],
        ["memory", "show", "--json", "--kind", "edit"],
    )
    assert text.returncode == 0, text.stderr
    assert f"Hot zone of run {NEW_RUN}" in text.stdout and "Cold zone: 5 item(s)" in text.stdout
    assert "edit cli.py" in text.stdout and "output 0" in text.stdout
    report = json.loads(as_json.stdout)
    assert report["run_id"] == NEW_RUN
    assert report["counts"] == {
        "episodes": 2,
        "facts": 2,
        "notes": 0,
        "procedures": 0,
        "archive": 0,
    }
    assert {h["id"] for h in report["hot"]} == {"m1", "m7", "m8"}
    assert [c["id"] for c in report["cold"]] == ["m2", "m3", "m4", "m5", "m6"]
    assert [h["kind"] for h in json.loads(edits.stdout)["hot"]] == ["edit"]


def test_memory_show_says_a_killed_run_went_further_than_its_saved_memory(seeded, agents):
    from agent_cli.agent.run.journal import JournalEntry, MemoryAdd
    from agent_cli.agent.run.store import RunUsage

    state = seeded / ".agent"
    _save_working_memory(state)
    saved = state / "runs" / NEW_RUN / "state.json"
    saved.write_text(json.dumps({**json.loads(saved.read_text()), "steps": 6}))
    # the tool calls after the last save (a task's start), as a run killed then leaves them
    lines = [
        JournalEntry(
            step=step,
            task=0,
            usage=RunUsage(),
            added=MemoryAdd(kind="tool_output", text=f"output {step}", summary=f"out {step}"),
        ).model_dump_json()
        for step in (6, 7, 8)  # the first is older than the state: never replayed
    ]
    (state / "runs" / NEW_RUN / "journal.jsonl").write_text("\n".join(lines) + "\n")
    text, as_json = agents(seeded, ["memory", "show"], ["memory", "show", "--json"])
    assert text.returncode == as_json.returncode == 0, text.stderr
    assert f"Hot zone of run {NEW_RUN}" in text.stdout  # the memory as saved, and why
    for said in (text.stderr, as_json.stderr):
        assert said.count("\n") == 1 and f"run {NEW_RUN} went further" in said
        assert "2 later step(s), to step 8" in said and "agent run --resume" in said
    assert json.loads(as_json.stdout)["later_steps"] == {"steps": 2, "last_step": 8}
    from agent_cli.agent.run.live import checkout_lock
    from agent_cli.workspace.lock import RunLock

    with RunLock(checkout_lock(state, seeded)) as live:  # a run still running: no resume
        live.name(NEW_RUN)
        (running,) = agents(seeded, ["memory", "show"])
    assert f"run {NEW_RUN} is running, at step 8" in running.stderr
    assert "--resume" not in running.stderr


def test_memory_show_names_the_score_terms_alike_in_the_table_and_the_json(seeded, agents):
    _save_working_memory(seeded / ".agent")
    text, as_json = agents(seeded, ["memory", "show"], ["memory", "show", "--json"])
    lines = [line.rstrip() for line in text.stdout.splitlines()]
    legend = lines.index("score = weight + refs + goal + recent − size")
    header = lines[legend + 1].split()
    assert header == [
        "id",
        "kind",
        "score",
        "weight",
        "refs",
        "goal",
        "recent",
        "size",
        "tokens",
        "summary",
    ]
    hot = json.loads(as_json.stdout)["hot"]
    assert all(set(header) <= set(item) for item in hot)
    item = hot[0]
    total = item["weight"] + item["refs"] + item["goal"] + item["recent"] - item["size"]
    assert item["score"] == pytest.approx(total)
    row = next(line.split() for line in lines if line.startswith(item["id"] + " "))
    assert row[2:8] == [f"{item[c]:.2f}" for c in header[2:8]]


def test_memory_show_without_evictions_prints_no_empty_cold_table(repo, agent):
    _save_working_memory(repo / ".agent", outputs=0)
    text = agent(repo, "memory", "show")
    assert text.returncode == 0, text.stderr
    assert "Cold zone: empty (nothing was evicted)" in text.stdout
    assert "evicted" not in text.stdout.replace("nothing was evicted", "")
    assert text.stdout.count("summary") == 1  # one table: the hot zone's


def test_forget_expire_export_and_import(seeded, tmp_path, agent, agents):
    fact_id = (tmp_path / "fact_id").read_text()
    forgot, expired = agents(seeded, ["memory", "forget", fact_id], ["memory", "expire"])
    assert forgot.returncode == 0 and fact_id in forgot.stdout
    assert expired.returncode == 0 and "moved 0 item(s)" in expired.stdout
    again, exported = agents(
        seeded, ["memory", "forget", fact_id], ["memory", "export", str(tmp_path / "mem.jsonl")]
    )
    assert again.returncode == 1 and "no memory item" in again.stderr
    assert "exported 4 record(s)" in exported.stdout  # 2 episodes, 1 signature, 1 fact
    with open(tmp_path / "mem.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "collection": "facts",
                    "id": "mem_20250101_abcdef",
                    "document": f"deploy with key {KEY}",
                    "metadata": {
                        "kind": "fact",
                        "source": "hand-written",
                        "trust": 1.0,
                        "created_at": "2025-01-01T00:00:00+00:00",
                        "text_hash": "0",
                        "ttl_days": 0.0,
                    },
                }
            )
            + "\n"
        )
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    imported = agent(other, "memory", "import", str(tmp_path / "mem.jsonl"), OPENAI_API_KEY=KEY)
    assert imported.returncode == 0, imported.stderr
    assert "imported 5 record(s)" in imported.stdout
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=other, capture_output=True, text=True
    )
    assert status.stdout == ""  # .agent/ is excluded from git
    found = agent(other, "recall", "quoted strings", "--json")
    assert json.loads(found.stdout)[0]["id"] == NEW_RUN
    raw = b"".join(p.read_bytes() for p in (other / ".agent").rglob("*") if p.is_file())
    assert KEY.encode() not in raw and b"deploy with key [REDACTED]" in raw


def test_forget_refuses_an_id_that_is_not_utf8_and_names_a_huge_one_briefly(seeded, agent):
    base = [sys.executable, "-m", "agent_cli", "memory", "forget"]
    bad = subprocess.run(  # an argument a process is given as bytes
        [*base, b"mem_\xff"], cwd=seeded, env=_env(seeded.parent), capture_output=True, timeout=60
    )
    err = bad.stderr.decode()
    assert bad.returncode == 2 and "the id is not valid UTF-8 text" in err, err
    assert len(err.strip().splitlines()) == 1
    huge = agent(seeded, "memory", "forget", "x" * 100_000)
    assert huge.returncode == 1 and "no memory item 'xxx" in huge.stderr
    assert len(huge.stderr.strip().splitlines()) == 1 and len(huge.stderr) < 400
    found = agent(seeded, "recall", "quoted strings", "--json")
    assert json.loads(found.stdout)[0]["id"] == NEW_RUN  # nothing was forgotten


@pytest.mark.parametrize("columns", ["200", "60"])  # the table, and the stacked items
def test_recall_prints_no_escape_sequence_a_stored_id_holds(repo, tmp_path, columns, agent):
    record = {
        "collection": "facts",
        "id": "mem_\x1b[2J\x1b]0;pwned\x07abc",  # clear the screen, set the title
        "document": "tests run with pytest \x1b[31mred\x1b[0m",
        "metadata": {
            "kind": "fact",
            "source": "hand \x1b[5mblink",
            "trust": 1.0,
            "created_at": "2025-01-01T00:00:00+00:00",
            "text_hash": "0",
            "ttl_days": 0.0,
        },
    }
    (tmp_path / "hostile.jsonl").write_text(json.dumps(record) + "\n")
    assert agent(repo, "memory", "import", str(tmp_path / "hostile.jsonl")).returncode == 0
    found = agent(repo, "recall", "tests run with pytest", "--all-repos", COLUMNS=columns)
    assert found.returncode == 0 and "mem_abc" in found.stdout, found.stderr
    assert "\x1b" not in found.stdout and "pwned" not in found.stdout


PASSWORD = "remote-pass-7c1e9a"  # in the URL of the repository's remote: masked as the key is


def test_recall_and_memory_show_mask_a_key_that_joins_once_its_escapes_are_out(
    repo, embedder, agents
):
    """A secret stored with an escape sequence or a control character inside (a run masks it
    as it comes, and it does not match) is masked in what recall and memory show print: the
    table's cells and each JSON string, which a terminal would show joined."""
    git(repo, "remote", "add", "origin", f"https://me:{PASSWORD}@example.com/r.git")
    with LongTermMemory(repo / ".agent" / "chroma", embedder, secrets=(PLAIN_KEY,)) as mem:
        for n, secret in enumerate((PLAIN_KEY, PASSWORD)):
            mem.add_fact(f"deploy with {split(secret, n)}", f"said {split(secret, n + 1)}")
        mem.add_episode(
            Episode(
                run_id=NEW_RUN,
                goal=f"deploy with {split(PLAIN_KEY, 2)}",
                status="verified",
                summary=f"used {split(PASSWORD, 3)}",
                started_at="2025-03-14T09:00:00+00:00",
            )
        )
    from agent_cli.memory import SqliteStore, WorkingMemory

    (repo / ".agent" / "runs" / NEW_RUN).mkdir(parents=True)
    cold = SqliteStore(repo / ".agent" / "runs" / NEW_RUN / "memory.db")
    wm = WorkingMemory(store=cold, embedder=None, max_tokens=300)
    for n in range(6):  # the first ones evicted: summaries in the hot and the cold zone
        wm.tick()
        wm.add("tool_output", f"output {n} " + "lorem ipsum " * 30, split(PLAIN_KEY, n))
    cold.close()
    state = json.dumps({"memory": wm.export_state()})
    (repo / ".agent" / "runs" / NEW_RUN / "state.json").write_text(state)
    commands = [
        [*words, *more]
        for words in (["recall", "deploy with", "--all-repos", "--k", "10"], ["memory", "show"])
        for more in ([], ["--json"])
    ]
    for columns in ("200", "60"):  # the tables, and the stacked items
        shown = agents(repo, *commands, OPENAI_API_KEY=PLAIN_KEY, COLUMNS=columns)
        for args, r in zip(commands, shown, strict=True):
            assert r.returncode == 0, (args, r.stderr)
            assert joined(r.stdout, PLAIN_KEY, PASSWORD) == [], (args, columns, r.stdout)
            assert r.stdout.count("[REDACTED]") >= 4, (args, columns, r.stdout)


@pytest.mark.parametrize(
    "words", [["memory", "show"], ["recall", "parser"], ["memory", "export", "-"]]
)
def test_memory_to_a_reader_that_stops_early_ends_quietly_with_141(seeded, words):
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_cli", *words],
        cwd=seeded,
        env=_env(seeded.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # as `| head -1` does once it has its line
    _, err = proc.communicate(timeout=120)
    # as git and coreutils end: nothing more said, the status of a closed pipe
    assert (proc.returncode, err.decode()) == (141, ""), err.decode()


def test_show_and_export_wait_for_a_write_in_progress_then_answer(seeded, tmp_path, agent):
    # Chroma's reads save the index too: read beside a write, the index grew until the disk
    # was full (tests/memory/test_reads_wait_for_writes.py), so a read waits for the writer
    import fcntl
    import threading
    import time

    held = 3.0
    answers = []
    for args in (["memory", "show", "--json"], ["memory", "export", str(tmp_path / "out.jsonl")]):
        # its own open of the file: an flock is another holder's even in this process
        fd = os.open(seeded / ".agent" / "chroma" / "write.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)  # as `agent memory import` holds it while it writes
        release = threading.Timer(held, os.close, (fd,))  # closing it gives the lock up
        started = time.monotonic()
        release.start()
        try:
            answers.append(agent(seeded, *args))
        finally:
            release.join()
        took = time.monotonic() - started
        assert held <= took < 25, args  # it waited for the write, not for the 30 s limit
    show, export = answers
    assert show.returncode == 0 and export.returncode == 0, show.stderr + export.stderr
    assert json.loads(show.stdout)["counts"]["episodes"] == 2
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) >= 4


def test_another_embedder_is_refused_until_reindex(seeded, agent):
    from agent_cli.llm.fake.server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        env = {"AGENT_EMBEDDING_MODEL": "emb-small", "OPENAI_BASE_URL": server.url}
        refused = agent(seeded, "recall", "parser", **env)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert (
            "wordllama:l2_supercat-256" in refused.stderr and "openai:emb-small" in refused.stderr
        )
        assert "agent memory reindex" in refused.stderr
        reindexed = agent(seeded, "memory", "reindex", **env)
        assert reindexed.returncode == 0, reindexed.stderr
        assert "re-embedded 5 record(s) with openai:emb-small" in reindexed.stdout
        found = agent(seeded, "recall", "quoted strings parse", "--json", **env)
    assert json.loads(found.stdout)[0]["id"] == NEW_RUN
