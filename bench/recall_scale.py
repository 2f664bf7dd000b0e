"""Long-term memory at 10^4, 10^5 and 10^6 facts: import and recall, time and peak memory.

    python bench/recall.py [--sizes 10000,100000,1000000] [--dir /tmp/agent-bench-scale] [--rebuild]

For each size N: an export of N facts written as a stream (JSON lines; half of them about the
benchmark's repository, the rest about 20 others, one in ten a note, one in a hundred a
procedure), then `agent memory import` of it as a process (wall time, peak RSS, the progress
lines it printed), then `agent recall QUERY` as a process 7 times (wall time and peak RSS
each; the first, cold run reported apart), and a process of its own that opens the store once
and recalls 50 times (the latency a run sees), with the repository digest's bounded listing,
then does what the end of a run does to the store (the named upgrades, three items kept,
expiry, close).
Stores are kept under --dir and reused (`imported` marks one whose import finished).
CPU seconds are printed beside wall seconds: on a shared machine they say more. Targets: the
import's peak RSS does not grow with N beyond Chroma's own index, recall in process well
under a second, `agent recall` under 1.5 s at every size (with the machine to itself).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VERBS = ["run", "use", "avoid", "prefer", "pin", "check", "set", "keep", "call", "skip"]
THINGS = [
    "the CSV parser",
    "the login form",
    "retry logic",
    "the cache layer",
    "date handling",
    "the config loader",
    "error messages",
    "the HTTP client",
    "pagination",
    "the CLI flags",
    "unicode filenames",
    "the job scheduler",
    "database migrations",
    "the plugin API",
    "logging output",
    "rate limiting",
    "the export command",
    "timezone conversion",
]
PLACES = ["api", "core", "cli", "storage", "web", "jobs", "auth", "utils", "models", "reports"]
ADVICE = [
    "before committing",
    "with the fixture in tests/conftest.py",
    "through the wrapper, not directly",
    "only on Linux",
    "under a lock",
    "with a timeout of 30 seconds",
    "after the migration step",
    "because the old path leaks file handles",
    "when the cache is cold",
    "in UTC, never local time",
]
QUERIES = [
    "how are database migrations run",
    "the CSV parser in core",
    "retry logic for the HTTP client",
    "timezone conversion in reports",
    "rate limiting in web",
    "unicode filenames in storage",
    "login form validation",
    "the plugin API",
    "logging output in jobs",
    "the config loader under a lock",
]
OTHER_REPOS = 20
RECALLS = 50
PROCESS_RUNS = 7
TARGET_IN_PROCESS_S, TARGET_PROCESS_S = 0.5, 1.5


def agent_cmd() -> list[str]:
    """`agent` from this source tree."""
    return [sys.executable, "-m", "agent_cli"]


def agent_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def make_repo(repo: Path) -> str:
    """A repository with one commit; its topic (what its memory is filed under)."""
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    sys.path.insert(0, str(ROOT))
    from agent_cli.agent.learn.topic import repo_topic

    return repo_topic(repo)


def fact_record(i: int, rng: random.Random, topic: str) -> dict[str, Any]:
    """One exported fact, note or procedure, as `agent memory export` writes it."""
    from agent_cli.memory.longterm.curation import content_id, item_key

    if i % 2:
        topic = f"git:{(i % OTHER_REPOS):040x}"
    place, thing = rng.choice(PLACES), rng.choice(THINGS)
    text = f"{rng.choice(VERBS)} {thing} in {place} {rng.choice(ADVICE)} (item {i})"
    kind = "procedure" if i % 100 == 7 else "note" if i % 10 == 3 else "fact"
    key = item_key(topic, text) or ""
    stamp = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T00:00:00+00:00"
    meta = {
        "kind": kind,
        "source": f"run 2026{i:010d}",
        "trust": 1.0 if i % 3 else 0.5,
        "created_at": stamp,
        "confirmed_at": stamp,
        "confirmed_ts": 1.77e9 + i,
        "text_hash": key,
        "ttl_days": 0.0,
        "hit_count": i % 5,
        "gist": text,
        "topic": topic,
        "topic_alt": "",
        "files": json.dumps({f"src/{place}/{thing.split()[-1]}.py": f"{i:040x}"}),
    }
    return {"collection": "facts", "id": content_id(key), "document": text, "metadata": meta}


def write_export(path: Path, n: int, topic: str) -> None:
    """N facts as JSON lines, one at a time."""
    rng = random.Random(7)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            out.write(json.dumps(fact_record(i, rng, topic)) + "\n")


def timed(argv: list[str], log: Path) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak RSS in MB and exit code of a process (its output in
    `log`). CPU time says more than wall time on a machine that others load."""
    with open(log, "w") as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=agent_env())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def build(root: Path, n: int) -> dict[str, Any]:
    """The store of N facts, imported by `agent memory import`; the import's numbers."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    topic = make_repo(root / "repo")
    export = root / "facts.jsonl"
    t = time.perf_counter()
    write_export(export, n, topic)
    print(
        f"  wrote {n:,} facts ({export.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s"
    )
    argv = [*agent_cmd(), "memory", "import", str(export), "--repo", str(root / "repo")]
    wall, cpu, rss, code = timed(argv, root / "import.log")
    log = (root / "import.log").read_text()
    if code != 0:
        sys.exit(f"agent memory import failed ({code}):\n{log[-2000:]}")
    progress = [line for line in log.splitlines() if line.startswith("imported")]
    numbers = {"n": n, "wall_s": wall, "cpu_s": cpu, "rss_mb": rss, "progress_lines": len(progress)}
    (root / "imported").write_text(json.dumps(numbers))
    export.unlink()  # the store is what is reused; the export is written again on --rebuild
    return numbers


def probe(repo: Path) -> None:
    """In this process: open the store as `agent recall` does, recall RECALLS times, take the
    digest's listing; print the numbers as JSON."""
    sys.path.insert(0, str(ROOT))
    from agent_cli.agent.learn.topic import repo_topic
    from agent_cli.cli.commands.memory_commands import _open_to_read, _place

    t = time.perf_counter()
    top, settings, state = _place(repo)
    mem = _open_to_read(settings, state)
    topics = [repo_topic(top), top.name, ""]
    mem.recall("warm up", k=5, topics=topics)
    opened = time.perf_counter() - t
    times, cpus, found = [], [], 0
    for i in range(RECALLS):
        t, c = time.perf_counter(), time.process_time()
        hits = mem.recall(QUERIES[i % len(QUERIES)], k=5, topics=topics)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        found += len(hits)
    t = time.perf_counter()
    listed = mem.listing(topics, min_trust=0.5, limit=2000)
    listing_s = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    end_s = run_end(settings, state, repo_topic(top), top.name)
    print(
        json.dumps(
            {
                "run_end_s": end_s,
                "open_s": opened,
                "recall_median_s": statistics.median(times),
                "recall_max_s": max(times),
                "recall_cpu_s": statistics.median(cpus),
                "found_per_query": found / RECALLS,
                "listing_s": listing_s,
                "listed": len(listed),
                "rss_mb": rss,
                "reader": type(mem).__name__,
            }
        )
    )


def run_end(settings: Any, state: Path, topic: str, folder: str) -> float:
    """Seconds for what the end of a run does to the store (the same calls, on the store
    itself): the two named upgrades, a fact, a procedure and a note kept, expiry, close."""
    from agent_cli.cli.commands.memory_commands import _open

    t = time.perf_counter()
    mem = _open(settings, state)
    mem.adopt(folder, topic)
    mem.upgrade_ids()
    mem.add_fact("the bench's probe keeps this fact", "probe", topic=topic)
    mem.add_procedure("python -m pytest -q tests/test_probe.py", "probe", topic=topic)
    mem.curate("the bench's probe keeps this note", topic=topic, origin_event_id="probe")
    mem.expire()
    mem.close()
    return time.perf_counter() - t


def measure(root: Path) -> dict[str, Any]:
    """`agent recall` as a process, and the in-process probe, over the store at `root`."""
    repo = root / "repo"
    walls, cpus, rsss = [], [], []
    for i in range(PROCESS_RUNS + 1):
        argv = [*agent_cmd(), "recall", QUERIES[i % len(QUERIES)], "--repo", str(repo), "--json"]
        wall, cpu, rss, code = timed(argv, root / "recall.log")
        if code != 0:
            sys.exit(f"agent recall failed:\n{(root / 'recall.log').read_text()[-2000:]}")
        walls.append(wall)
        cpus.append(cpu)
        rsss.append(rss)
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "recall.py"), "--probe", str(repo)],
        capture_output=True,
        text=True,
        env=agent_env(),
    )
    if out.returncode != 0:
        sys.exit(f"the probe failed:\n{out.stderr[-2000:]}")
    return {
        "cold_wall_s": walls[0],
        "wall_s": statistics.median(walls[1:]),
        "cpu_s": statistics.median(cpus[1:]),
        "rss_mb": max(rsss),
        **{f"probe_{k}": v for k, v in json.loads(out.stdout.splitlines()[-1]).items()},
    }


def main(sizes: list[int], where: Path | None, rebuild: bool) -> None:
    base = where or Path("/tmp/agent-bench-scale")
    rows = []
    for n in sizes:
        root = base / str(n)
        if rebuild or not (root / "imported").exists():
            print(f"building {n:,} facts in {root} (once; reused on later runs)", flush=True)
            imported = build(root, n)
        else:
            imported = json.loads((root / "imported").read_text())
        recalled = measure(root)
        rows.append((n, imported, recalled))
        report(n, imported, recalled)
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs")


def report(n: int, imp: dict[str, Any], rec: dict[str, Any]) -> None:
    in_proc = rec["probe_recall_median_s"]
    print(
        f"{n:>9,} facts  import: {imp['wall_s']:7.1f} s (CPU {imp.get('cpu_s', 0):.1f} s)  "
        f"peak RSS {imp['rss_mb']:6.0f} MB  "
        f"({imp['n'] / imp['wall_s']:,.0f} records/s, {imp['progress_lines']} progress lines)\n"
        f"{'':16} `agent recall`: {rec['wall_s']:5.2f} s warm, CPU {rec['cpu_s']:.2f} s "
        f"(cold {rec['cold_wall_s']:.2f} s)  "
        f"peak RSS {rec['rss_mb']:6.0f} MB  target <= {TARGET_PROCESS_S} s: "
        f"{'ok' if rec['wall_s'] <= TARGET_PROCESS_S else 'MISSED'}\n"
        f"{'':16} in process ({rec['probe_reader']}): open + first recall {rec['probe_open_s']:.2f} s, "
        f"recall median {in_proc * 1000:.1f} ms, CPU {rec['probe_recall_cpu_s'] * 1000:.1f} ms "
        f"(max {rec['probe_recall_max_s'] * 1000:.1f} ms, "
        f"{rec['probe_found_per_query']:.1f} hits/query), digest listing "
        f"{rec['probe_listing_s'] * 1000:.0f} ms ({rec['probe_listed']} items), "
        f"peak RSS {rec['probe_rss_mb']:.0f} MB  target <= {TARGET_IN_PROCESS_S} s: "
        f"{'ok' if in_proc <= TARGET_IN_PROCESS_S else 'MISSED'}\n"
        f"{'':16} a run's end (upgrades, a fact, a procedure and a note kept, expiry, close): "
        f"{rec['probe_run_end_s']:.2f} s",
        flush=True,
    )
