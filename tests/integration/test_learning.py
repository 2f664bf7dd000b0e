"""Memory that learns across runs: two real runs in one repository, in this process.

Run 1 takes a note, fails its first attempt at test_median_even, fixes it, and extracts a
fact at the end. Run 2, planning the same goal in the same repository, must be handed run 1's
note, fact and procedure; its retry after the same failure must be handed run 1's fix.
"""

from __future__ import annotations

import json
import shutil

import pytest
from learnkit import (
    facts_requests,
    planning_requests,
    request_text,
    run_env,  # noqa: F401
    run_in_process,
    run_once,
    task_requests,
)
from runkit import (
    BAD_MEDIAN,
    GOAL,
    GOOD_MEDIAN,
    PYTEST,
    add_median,
    facts,
    finish,
    plan,
    replace_median,
    task,
)

from agent_cli.memory.longterm.chroma import LongTermMemory
from conftest import FIXTURES, git, make_repo

NOTE = (
    "add median to calc/stats.py: tests/test_stats.py passes only if the median of an "
    "even list averages the two middle values"
)
FACT = "tests/test_stats.py checks the median function in calc/stats.py"
FIX = "averaged the two middle values for even lists and raised ValueError on an empty one"


FIRST_RUN = [
    plan(task()),
    {"tool": "note", "args": {"text": NOTE}},
    add_median(BAD_MEDIAN),
    finish("first try"),
    replace_median(BAD_MEDIAN, GOOD_MEDIAN),
    finish(FIX),
    facts((FACT, ["tests/test_stats.py", "calc/stats.py"])),
]
SECOND_RUN = [
    plan(task()),
    add_median(BAD_MEDIAN),
    finish("first try"),
    replace_median(BAD_MEDIAN, GOOD_MEDIAN),
    finish("fixed"),
    facts(),
]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Run 1, then run 2 of the same goal, in one demo repository: made once for the tests
    that read them. The repository and run 2's (stopped) server, with its requests."""
    base = tmp_path_factory.mktemp("two-runs")
    repo = make_repo(base / "demo", FIXTURES / "demo_repo")
    code, events, _ = run_once(base, repo, GOAL, FIRST_RUN)
    assert code == 0, events[-1]
    git(repo, "checkout", "-q", "main")  # the fix is on run 1's branch; main still lacks median
    code, events, second = run_once(base, repo, GOAL, SECOND_RUN)
    assert code == 0, events[-1]
    return repo, second


@pytest.mark.slow
def test_run_two_is_handed_what_run_one_learned(two_runs):
    _, srv = two_runs
    planning = request_text(planning_requests(srv)[0])
    recalled = planning.split("Reference material recalled from earlier runs", 1)[1]
    assert NOTE in recalled and FACT in recalled  # the note and the model's fact
    assert "- procedure" in recalled and f"`{PYTEST}` checks work" in recalled
    fact_line = next(line for line in recalled.splitlines() if FACT in line)
    assert 'trust="0.5"' in fact_line  # the model's words, marked as such
    first, retry = (
        [r for r in task_requests(srv) if "attempt 1 of 2" in request_text(r)][0],
        [r for r in task_requests(srv) if "attempt 2 of 2" in request_text(r)][0],
    )
    assert FIX in request_text(retry) and "test_median_even" in request_text(retry)
    fixed = next(m["content"] for m in retry["messages"] if FIX in (m["content"] or ""))
    block = fixed.split("Earlier runs had the failure this task just had", 1)[1]
    assert block.index("<retrieved_memory>") < block.index(FIX) < block.index("</retrieved_memory>")
    assert FIX not in request_text(first)  # looked up on the failure, not before
    assert len(facts_requests(srv)) == 1


@pytest.mark.slow
def test_recalled_items_count_hits_and_show_kind_trust_and_staleness(
    two_runs, fake_server, tmp_path, agent_in_process
):
    made, _ = two_runs  # run 2 recalled the note, the fact, the procedure
    demo_repo = tmp_path / "demo"
    shutil.copytree(made, demo_repo, symlinks=True)  # a copy: the recalls count hits
    git(demo_repo, "checkout", "-q", "main")  # calc/stats.py as it was before either run
    proc = agent_in_process(
        "recall",
        "median calc/stats.py tests/test_stats.py",
        "--json",
        "--k",
        "10",
        cwd=demo_repo,
        env={"AGENT_EMBEDDING_MODEL": "fake-embed", "OPENAI_BASE_URL": fake_server().url},
    )
    found = {r["kind"]: r for r in json.loads(proc.stdout)}
    assert {"episode", "fact", "note", "procedure"} <= set(found), proc.stdout + proc.stderr
    assert all({"kind", "trust", "hit_count", "stale"} <= set(r) for r in found.values())
    assert found["note"]["trust"] == 0.5 and found["note"]["hit_count"] >= 1
    assert found["fact"]["trust"] == 0.5 and found["procedure"]["trust"] == 1.0
    assert found["procedure"]["hit_count"] >= 1
    # On main, calc/stats.py has no median: the fact saw the file with it, so it is stale now;
    # the procedure names tests/test_stats.py, which no run changed.
    assert found["fact"]["stale"] is True and found["procedure"]["stale"] is False
    assert (
        "stale: a file it names changed since"
        in agent_in_process(
            "recall",
            FACT,
            "--kind",
            "fact",
            cwd=demo_repo,
            env={
                "AGENT_EMBEDDING_MODEL": "fake-embed",
                "OPENAI_BASE_URL": fake_server().url,
                "COLUMNS": "300",
            },
        ).stdout
    )


@pytest.mark.slow
def test_an_unreadable_submit_facts_stores_nothing_and_is_no_error(
    run_env, fake_server, capsys, demo_repo
):
    broken = {"tool_calls": [{"name": "submit_facts", "arguments": '{"facts": "not a list"'}]}
    srv = fake_server([plan(task()), add_median(), finish(), broken, broken])
    code, events = run_in_process(capsys, demo_repo, GOAL, srv)
    assert code == 0 and events[-1]["status"] == "verified"
    assert len(facts_requests(srv)) == 2  # the request and its one re-ask
    said = [e["text"] for e in events if e["event"] == "notice"]
    assert any(t.startswith("no facts kept from this run:") for t in said), said
    with LongTermMemory(demo_repo / ".agent" / "chroma", _embedder(srv)) as mem:
        assert mem.counts()["facts"] == 0 and mem.counts()["procedures"] == 1


def _embedder(server):
    from agent_cli.llm.openai.embedder import OpenAIEmbedder

    return OpenAIEmbedder(base_url=server.url, api_key=None, model="fake-embed")
