"""Long-term recall at scale: import and recall of 10^4, 10^5 (and 10^6) facts, or episodes
against a brute-force numpy scan.

    python bench/recall.py [--sizes 10000,100000,1000000] [--dir DIR] [--rebuild]
    python bench/recall.py --episodes 100000 [--dir /tmp/agent-bench-recall-100000] [--rebuild]

The first form is bench/recall_scale.py (its docstring says what is measured). The second
builds a store of N episodes once (generated from templates, embedded with the offline
WordLlama model, about one in five with a failure signature) and reuses it from --dir.
Printed: in-process `LongTermMemory.recall` time, the numpy scan over the very same vectors,
their ratio and how often both agree on the top 5, and `agent recall` as a whole process.
Targets: recall <= 50 ms in the process, `agent recall` <= 1.5 s with a warm disk cache.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import recall_scale as scale
from agent_cli.core.models import CommandRun, Episode, TaskRecord
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory

VERBS = [
    "add",
    "fix",
    "refactor",
    "remove",
    "document",
    "speed up",
    "test",
    "rename",
    "port",
    "harden",
]
THINGS, PLACES = scale.THINGS, scale.PLACES  # the same vocabulary as the fact workload
ENDINGS = [
    "all tests pass",
    "acceptance command exited 0",
    "rejected after two attempts",
    "left for review",
    "flaky test fixed by seeding the random generator",
]
QUERIES = [
    "fix the CSV parser in core",
    "tests/test_storage.py::test_cache_7 failed",
    "speed up database migrations",
    "login form validation errors",
    "retry logic for the HTTP client",
    "timezone conversion bug in reports",
    "rename the CLI flags",
    "document the plugin API",
    "rate limiting in web",
    "unicode filenames in storage",
]
TARGET_IN_PROCESS_MS, TARGET_PROCESS_S = 50.0, 1.5


def make_episode(i: int, rng: random.Random) -> Episode:
    """One synthetic but varied episode."""
    verb, thing, place = rng.choice(VERBS), rng.choice(THINGS), rng.choice(PLACES)
    goal = f"{verb} {thing} in {place}"
    failed = rng.random() < 0.2
    sigs = (
        [
            f"tests/test_{place}.py::test_{thing.split()[-1]}_{i % 50} failed at "
            f"tests/test_{place}.py:{rng.randint(5, 400)}: AssertionError"
        ]
        if failed
        else []
    )
    return Episode(
        run_id=f"2025{i:010d}",
        goal=goal,
        plan=[goal],
        status="rejected" if failed else "verified",
        tasks=[TaskRecord(goal=goal, status="verified", attempts=rng.randint(1, 2))],
        files_touched=[f"src/{place}/{thing.split()[-1]}.py"],
        commands=[CommandRun(cmd="pytest -q", exit_code=1 if failed else 0)],
        failure_signatures=sigs,
        summary=rng.choice(ENDINGS),
        started_at=f"2025-01-01T00:00:{i % 60:02d}+00:00",
    )


def build(root: Path, n: int) -> None:
    """Fill a fresh store with `n` episodes and save its vectors for the scan."""
    import numpy as np

    repo = root / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    mem = LongTermMemory(repo / ".agent" / "chroma", WordLlamaEmbedder())
    rng, start = random.Random(7), time.perf_counter()
    for lo in range(0, n, 5000):
        mem.add_episodes([make_episode(i, rng) for i in range(lo, min(n, lo + 5000))])
        print(
            f"  built {min(n, lo + 5000):>7} episodes  {time.perf_counter() - start:6.1f} s",
            flush=True,
        )
    col, vectors, offset = mem.collection("episodes"), [], 0  # the raw vectors, read back
    while True:
        got = col.get(include=["embeddings"], limit=5000, offset=offset)
        if not got["ids"]:
            break
        vectors.append(np.asarray(got["embeddings"], dtype=np.float32))
        offset += len(got["ids"])
    np.save(root / "vectors.npy", np.concatenate(vectors))
    (root / "built").write_text(str(n))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def in_process(root: Path) -> tuple[list[float], list[float], list[float], float]:
    """Times of recall, of embedding the query, of the scan; and top-5 agreement."""
    import numpy as np

    embedder = WordLlamaEmbedder()
    mem = LongTermMemory(root / "repo" / ".agent" / "chroma", embedder)
    vectors = np.load(root / "vectors.npy")
    for q in QUERIES[:3]:
        mem.recall(q, min_score=-1)  # load the index and the model
        vectors @ embedder.embed_array([q])[0]  # and page the vectors in
    recall_t, embed_t, scan_t, agree = [], [], [], []
    for _ in range(5):
        for q in QUERIES:
            t = time.perf_counter()
            hits = mem.recall(q, k=5, kind="episode", min_score=-1)
            recall_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            qv = embedder.embed_array([q])[0]
            embed_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            scores = vectors @ qv
            top = np.argpartition(-scores, 15)[:15]
            top = top[np.argsort(-scores[top])]
            scan_t.append(time.perf_counter() - t)
            fifth = float(scores[top][4])  # ties are common: compare scores, not ids
            agree.append(sum(h.score >= fifth - 1e-4 for h in hits) / 5)
    return recall_t, embed_t, scan_t, statistics.mean(agree)


def whole_process(root: Path, runs: int = 7) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of `agent recall QUERY --repo REPO` (the first, cold run dropped)."""
    import resource

    agent = Path(sys.executable).with_name("agent")
    cmd = [str(agent)] if agent.exists() else [sys.executable, "-m", "agent_cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    wall, cpu = [], []
    for i in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        out = subprocess.run(
            [*cmd, "recall", QUERIES[i % len(QUERIES)], "--repo", str(root / "repo")],
            capture_output=True,
            text=True,
            env=env,
        )
        wall.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if out.returncode != 0:
            sys.exit(f"agent recall failed: {out.stderr}")
    return wall[1:], cpu[1:]


def episodes_main(args: argparse.Namespace) -> None:
    """The episode store against the numpy scan (`--episodes N`)."""
    args.n = args.episodes
    root = args.dir or Path(f"/tmp/agent-bench-recall-{args.n}")
    if args.rebuild or not (root / "built").exists():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        print(f"building {args.n} episodes in {root} (once; reused on later runs)")
        build(root, args.n)
    recall_t, embed_t, scan_t, agree = in_process(root)
    wall, cpu = whole_process(root)
    r, e, s, p = median_ms(recall_t), median_ms(embed_t), median_ms(scan_t), statistics.median(wall)
    count = len(__import__("numpy").load(root / "vectors.npy", mmap_mode="r"))
    print(
        f"store: {args.n} episodes ({count} vectors with the failure signatures), "
        f"{len(recall_t)} queries, medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"  recall in process (embed + Chroma HNSW + metadata): {r:7.2f} ms  "
        f"p95 {sorted(recall_t)[int(len(recall_t) * 0.95)] * 1000:.2f} ms  "
        f"target <= {TARGET_IN_PROCESS_MS:.0f} ms: {'ok' if r <= TARGET_IN_PROCESS_MS else 'MISSED'}"
    )
    print(
        f"  numpy brute-force scan (same vectors, top 15):      {s:7.2f} ms  "
        f"+ query embedding {e:.2f} ms = {s + e:.2f} ms"
    )
    print(
        f"  ratio recall / scan: {r / s:.2f}x  recall / (scan + embedding): {r / (s + e):.2f}x  "
        f"top-5 agreement with the exact scan: {agree:.0%}"
    )
    print(
        f"  `agent recall` whole process, warm cache: wall {p:.3f} s (min {min(wall):.3f} s), "
        f"CPU {statistics.median(cpu):.3f} s  target <= {TARGET_PROCESS_S} s: "
        f"{'ok' if p <= TARGET_PROCESS_S else 'MISSED'}  wall / target {p / TARGET_PROCESS_S:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="fact counts, comma-separated")
    parser.add_argument("--episodes", type=int, default=0, help="the episode bench at N instead")
    parser.add_argument("--dir", type=Path, default=None, help="where stores are built and kept")
    parser.add_argument("--rebuild", action="store_true", help="build the stores again")
    parser.add_argument("--probe", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        scale.probe(args.probe)
    elif args.episodes:
        episodes_main(args)
    else:
        scale.main([int(n) for n in args.sizes.split(",")], args.dir, args.rebuild)


if __name__ == "__main__":
    main()
