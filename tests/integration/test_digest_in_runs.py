"""The memory digest as a run sends it: real runs in this process against the loopback server,
the repository's long-term memory filled beforehand through the real store.

The block keeps to its token share as the tokenizer counts it, the line counting what was
left out is exact, a hit is counted on what was shown and on nothing else, and once a run
however often it is resumed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from learnkit import planning_requests, run_env, run_in_process, task_requests  # noqa: F401
from runkit import (
    BAD_MEDIAN,
    GOAL,
    GOOD_MEDIAN,
    add_median,
    facts,
    finish,
    plan,
    replace_median,
    task,
)

from agent_cli.agent.learn.topic import repo_topic
from agent_cli.cli.wiring import RunOptions, execute
from agent_cli.core import tokens
from agent_cli.llm.openai.embedder import OpenAIEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory

pytestmark = pytest.mark.slow  # the runs verify with `python -m pytest`

WRAPPER = "Reference material recalled from earlier runs:\n"


def _store(repo: Path, server) -> LongTermMemory:
    embedder = OpenAIEmbedder(base_url=server.url, api_key=None, model="fake-embed")
    return LongTermMemory(repo / ".agent" / "chroma", embedder)


def _fill(repo: Path, server, n: int) -> set[str]:
    """`n` facts of the repository, dense with paths and names as a code base's are, each
    naming a file that is not there any more (its line marked stale: a longer line)."""
    topic = repo_topic(repo)
    with _store(repo, server) as mem:
        return {
            mem.add_fact(
                f"module{i} in pkg/mod{i}.py keeps the helper h{i} that tests/test_mod{i}.py checks",
                "test",
                topic=topic,
                files={f"pkg/mod{i}.py": "0" * 40},
            )
            for i in range(n)
        }


def _hits(repo: Path, server) -> dict[str, int]:
    with _store(repo, server) as mem:
        return {r.id: r.hit_count for r in mem.listing([repo_topic(repo)], limit=5000)}


def _digest(request: dict) -> str:
    """The digest block of a request ("" when it has none)."""
    for m in request["messages"]:
        content = str(m.get("content") or "")
        if content.startswith(WRAPPER):
            return content[len(WRAPPER) :]
    return ""


def _run(capsys, repo: Path, server, share: int) -> str:
    """A run with a digest share of `share` tokens; its planning request's digest."""
    srv = server([plan(task()), add_median(), finish(), facts()])
    code, events = run_in_process(capsys, repo, GOAL, srv, memory_digest_tokens=share)
    assert code == 0, events
    block = _digest(planning_requests(srv)[0])
    assert all(_digest(r) == block for r in task_requests(srv))  # every step's, unchanged
    return block


@pytest.mark.parametrize(("share", "n"), [(200, 40), (1500, 80)])  # 2 and 23 lines fit
def test_a_large_stores_digest_keeps_to_its_share_and_counts_the_rest_exactly(
    run_env, fake_server, capsys, demo_repo, share, n
):
    stored = _fill(demo_repo, fake_server([]), n)
    block = _run(capsys, demo_repo, fake_server, share)
    shown = set(re.findall(r'^- fact (\S+) trust="1.0" stale="true": ', block, re.M))
    assert shown and shown <= stored
    (left,) = re.findall(r"^- (\d+) more facts, notes and procedures", block, re.M)
    assert int(left) == len(stored) - len(shown)
    hits = _hits(demo_repo, fake_server([]))
    assert {i for i in stored if hits[i]} == shown and {hits[i] for i in shown} == {1}
    assert tokens.count(block) <= share


def test_a_share_too_small_for_one_item_still_says_how_much_is_there(
    run_env, fake_server, capsys, demo_repo
):
    stored = _fill(demo_repo, fake_server([]), 40)
    block = _run(capsys, demo_repo, fake_server, 100)
    assert tokens.count(block) <= 100
    assert "- 40 more facts, notes and procedures" in block and "- fact " not in block
    assert _run(capsys, demo_repo, fake_server, 0) == ""  # no share: no digest at all
    hits = _hits(demo_repo, fake_server([]))
    assert not any(hits[i] for i in stored)


def test_a_share_larger_than_the_window_holds_is_kept_to_half_a_request(
    run_env, fake_server, capsys, demo_repo
):
    stored = _fill(demo_repo, fake_server([]), 150)
    srv = fake_server([plan(task()), add_median(), finish(), facts()])
    code, events = run_in_process(
        capsys, demo_repo, GOAL, srv, memory_digest_tokens=10**7, context_window=8000
    )
    assert code == 0, events
    blocks = [_digest(r) for r in srv.chat_requests if _digest(r)]
    assert blocks and len(set(blocks)) == 1  # the planning request's and every step's
    block = blocks[0]
    assert "cut to fit" not in block and block.endswith("</retrieved_memory>")
    shown = set(re.findall(r"^- fact (\S+) ", block, re.M))
    (left,) = re.findall(r"^- (\d+) more facts", block, re.M)
    assert shown and int(left) == len(stored) - len(shown)
    hits = _hits(demo_repo, fake_server([]))
    assert {i for i in stored if hits[i]} == shown


def test_a_resumed_run_counts_no_hit_twice(run_env, fake_server, capsys, demo_repo):
    stored = _fill(demo_repo, fake_server([]), 5)
    rejected = fake_server([plan(task()), add_median(BAD_MEDIAN), finish("one"), finish("two")])
    code, events = run_in_process(capsys, demo_repo, GOAL, rejected)
    assert code == 3, events  # escalated: the run waits for an answer
    hits = _hits(demo_repo, fake_server([]))
    assert {hits[i] for i in stored} == {1}
    fixed = fake_server([replace_median(BAD_MEDIAN, GOOD_MEDIAN), finish("fixed"), facts()])
    resumed = RunOptions(
        goal=None,
        repo=demo_repo,
        yes=True,
        json_out=True,
        resume=True,
        answer=("hint", "sort a copy"),
        flags={"base_url": fixed.url, "approval": "auto"},
    )
    assert execute(resumed) == 0
    assert all(_digest(r).count("- fact ") == 5 for r in task_requests(fixed))  # sent again
    hits = _hits(demo_repo, fake_server([]))
    assert {hits[i] for i in stored} == {1}  # counted once
