"""`agent recall`, `agent memory show` and `agent memory expire` in a store two repositories
share (one `home`): real Chroma, embedded, and the CLI's commands in this process.

Each repository sees, counts and archives its own items; `--all-repos` widens that, says which
repository each item came from, and judges no other repository's item stale by this one's files.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_cli.agent.learn.topic import repo_topic
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.workspace.git.blobs import blob_hash
from conftest import FIXTURES, git, make_repo

LONG_AGO = datetime.now(UTC) - timedelta(days=200)  # past the default memory_ttl_days (90)
FACT = "calc/stats.py holds the median function that tests/test_stats.py checks"


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.fixture
def shared(tmp_path: Path, agent_in_process):
    """(ra: the demo repository, no remote; rb: another with a remote; the `home` they share;
    run(repo, *args): the CLI in `repo` with that `home`)."""
    ra = make_repo(tmp_path / "ra", FIXTURES / "demo_repo")
    rb = make_repo(tmp_path / "rb")
    git(rb, "remote", "add", "origin", "https://user:pw@GitHub.com/team/rb.git")
    home = tmp_path / "shared-home"

    def run(repo: Path, *args: str):
        return agent_in_process(*args, cwd=repo, env={"AGENT_HOME": str(home), "COLUMNS": "200"})

    return ra, rb, home, run


def _counts(run, repo: Path) -> dict[str, int]:
    shown = run(repo, "memory", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    return dict(json.loads(shown.stdout)["counts"])


def test_expire_archives_this_repositorys_items_only_unless_all_repos(shared, embedder):
    ra, rb, home, run = shared
    with LongTermMemory(home / "chroma", embedder) as mem:
        for repo in (ra, rb):
            topic = repo_topic(repo)
            mem.add_fact(f"{repo.name}: {FACT}", "harness", topic=topic, now=LONG_AGO)
            mem.curate(f"{repo.name} sorts a copy", topic=topic, origin_event_id="e", now=LONG_AGO)
    before_b = _counts(run, rb)
    assert before_b["facts"] == before_b["notes"] == 1 and before_b["archive"] == 0

    expired = run(ra, "memory", "expire")
    assert expired.returncode == 0, expired.stderr
    assert expired.stdout.strip() == "moved 2 of this repository's item(s) into the archive"
    after_a = _counts(run, ra)
    assert after_a["archive"] == 2 and after_a["facts"] == after_a["notes"] == 0  # what it said
    assert _counts(run, rb) == before_b  # the other repository's memory is as it was

    widened = run(rb, "memory", "expire", "--all-repos")
    assert widened.stdout.strip() == "moved 2 item(s) into the archive"  # rb's: ra's are gone
    assert _counts(run, rb)["archive"] == 2


def test_all_repos_names_each_items_repository_and_judges_none_stale_by_this_ones_files(
    shared, embedder
):
    ra, rb, home, run = shared
    seen = {"calc/stats.py": blob_hash(ra, "calc/stats.py")}
    assert seen["calc/stats.py"]
    with LongTermMemory(home / "chroma", embedder) as mem:
        a_fact = mem.add_fact(FACT, "harness", topic=repo_topic(ra), files=seen)
        b_note = mem.curate(
            "the median of calc/stats.py sorts a copy", topic=repo_topic(rb), origin_event_id="e"
        )

    def recalled(repo: Path, *flags: str) -> dict[str, dict]:
        done = run(repo, "recall", "median calc/stats.py tests", "--json", *flags)
        assert done.returncode == 0, done.stderr
        return {r["id"]: r for r in json.loads(done.stdout)}

    own = recalled(ra)
    assert set(own) == {a_fact} and own[a_fact]["stale"] is False
    everyone = recalled(rb, "--all-repos")
    assert set(everyone) == {a_fact, b_note}
    # rb has no calc/stats.py: ra's fact is not stale for that, ra's file is unchanged
    assert everyone[a_fact]["stale"] is False

    assert own[a_fact]["this_repo"] is True
    assert own[a_fact]["repo"] == "git:" + git(ra, "rev-list", "--max-parents=0", "HEAD")[:12]
    assert everyone[a_fact]["this_repo"] is False
    assert everyone[b_note]["this_repo"] is True
    assert everyone[b_note]["repo"] == "github.com/team/rb"  # the remote, without its password

    table = run(rb, "recall", "median calc/stats.py tests", "--all-repos")
    assert table.returncode == 0, table.stderr
    assert "repository" in table.stdout and "a file it names changed" not in table.stdout
    line = next(row for row in table.stdout.splitlines() if a_fact in row)
    assert everyone[a_fact]["repo"] in line
    line = next(row for row in table.stdout.splitlines() if b_note in row)
    assert "this repository" in line

    # in its own repository, a change to the file it names still makes it stale
    (ra / "calc" / "stats.py").write_text("def median(xs):\n    return 0\n")
    assert recalled(ra)[a_fact]["stale"] is True
