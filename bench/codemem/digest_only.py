"""The digest alone: what B's planning request would carry, for every pair, in seconds.

    python bench/codemem/digest_only.py --work DIR [--quick] [--sizes 10,100,1000]
                                        [--projects a,b] [--pairs ID,ID] [--show]

The first call with a DIR runs (or takes from the cache) the runs A and builds the stores of
every size under DIR, as run.py does; later calls with the same DIR and pairs reuse them,
whatever changed in `agent_cli/` since (the runs A learn the same items: their replies are
scripted); a call with other pairs (--quick or not) makes them again.
Each pair's run B is then only what its planning request gets from long-term memory: the
session's own `RunMemory.recall` of B's goal in the repository on `main`, formatted as the
session formats it. It prints, per pair and size, whether the needed item is in it (a fix
pair's need, the earlier fix, comes by failure signature in a later request: not measured
here), at which line, how many tokens the block takes and how long the recall took; then
the recall by size. `--show` prints each block. `--rebuild` builds the stores again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agentrun  # noqa: E402
import learn  # noqa: E402
import pairs_b  # noqa: E402
import run as bench_run  # noqa: E402
import scenarios  # noqa: E402
import score  # noqa: E402
import stores  # noqa: E402
from projects import git  # noqa: E402

from agent_cli.agent.ask.window import Window  # noqa: E402
from agent_cli.agent.learn import digest  # noqa: E402
from agent_cli.agent.learn.run_memory import RunMemory  # noqa: E402
from agent_cli.core import tokens  # noqa: E402
from agent_cli.memory.embed import WordLlamaEmbedder  # noqa: E402
from agent_cli.memory.longterm.chroma import LongTermMemory  # noqa: E402


def learned_in(scn: scenarios.Scenario, work: Path, cache: Path) -> learn.Learned:
    """The runs A of `scn`: kept in `work` after the first call (cached runs A, or new ones).

    They are kept under the set of pairs they were made for (a --quick call learns from fewer
    runs A), so that a call with other pairs never reuses what a narrower one learned."""
    pairs = ",".join(sorted(p.id for p in scn.pairs))
    saved = work / f"{scn.project.name}.learned.json"
    if saved.exists() and (
        json.loads(saved.read_text()).get("pairs") != pairs
        or json.loads(saved.read_text()).get("failed")  # run them again, as run.py does
    ):
        for built in (work / "stores").glob(f"{scn.project.name}-*"):
            shutil.rmtree(built)  # built from the other runs A
        saved.unlink()
    repo = work / scn.project.name
    if saved.exists() and repo.exists():
        data = json.loads(saved.read_text())
        return learn.Learned(scn, repo, data["records"], data["owner"], data["failed"])
    shutil.rmtree(repo, ignore_errors=True)
    got = learn.learn_cached(scn, cache, work)
    saved.write_text(
        json.dumps(
            {"records": got.records, "owner": got.owner, "failed": got.failed, "pairs": pairs}
        )
    )
    return got


def store_for(got: learn.Learned, size: int, pair: str, work: Path, rebuild: bool) -> Path:
    """The state directory of the store run B of `pair` reads at `size` (built once)."""
    shared = size > sum(stores.counted(r) for r in got.records)
    key = "all" if shared else pair
    home = work / "stores" / f"{got.scenario.project.name}-{size}-{key}"
    if rebuild or not (home / "built").exists():
        shutil.rmtree(home, ignore_errors=True)
        stores.build(stores.contents(got, size, None if shared else pair), home)
        (home / "built").write_text("")
    return home


def block_of(mem: RunMemory, goal: str) -> tuple[str, float]:
    """The fenced block the session puts into the planning request for `goal`, and the
    seconds the recall took."""
    start = time.monotonic()
    found = mem.recall(goal)
    took = time.monotonic() - start
    return digest.render(found, mem.digest_tokens), took


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    agentrun.isolate(work)
    sizes = [int(s) for s in args.sizes.split(",")]
    wanted_pairs = set(filter(None, args.pairs.split(",")))
    embedder = WordLlamaEmbedder()
    hits: dict[int, list[bool]] = {s: [] for s in sizes}
    worst_tokens: dict[int, int] = dict.fromkeys(sizes, 0)
    for scn in scenarios.load_all():
        if args.projects and scn.project.name not in args.projects.split(","):
            continue
        if args.quick:
            kinds = bench_run.QUICK_KINDS
            scn = scenarios.Scenario(
                **{**scn.__dict__, "pairs": tuple(p for p in scn.pairs if p.id.endswith(kinds))}
            )
        got = learned_in(scn, work, args.cache)
        for line in got.failed:  # its pair is a miss
            print(f"run A failed: {line}")
        git(got.repo, "checkout", "-q", "-f", "main")
        git(got.repo, "clean", "-fdq")
        for size in sizes:
            for pair in scn.pairs:
                if pair.need == "fix" or (wanted_pairs and pair.id not in wanted_pairs):
                    continue
                home = store_for(got, size, pair.id, work, args.rebuild)
                need = pairs_b.needed(got, pair)
                with LongTermMemory(home / "chroma", embedder) as longterm:
                    mem = RunMemory(longterm, got.repo, 90.0, Window(), read_only=True)
                    text, took = block_of(mem, pair.b_goal)
                listed = list(score.memory_items(text))
                line = next((n for n, i in enumerate(listed, 1) if i in need), 0)
                n_tokens = tokens.count(text)
                worst_tokens[size] = max(worst_tokens[size], n_tokens)
                hits[size].append(bool(line))
                print(
                    f"{size:>5} {'ok  ' if line else 'MISS'} {pair.id:<26} "
                    f"line {line or '-':>2}/{len(listed):<2} {n_tokens:>5} tok {took * 1000:>5.0f} ms"
                    f"  {pair.b_goal[:60]}"
                )
                if args.show:
                    print(text)
    print()
    for size in sizes:
        got_hits = hits[size]
        print(
            f"{size:>5} items: recall {sum(got_hits)}/{len(got_hits)} "
            f"({100 * sum(got_hits) / max(len(got_hits), 1):.0f}%), "
            f"at most {worst_tokens[size]} memory tokens"
        )
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench/codemem/digest_only.py", description=__doc__.split("\n")[0]
    )
    p.add_argument("--work", type=Path, required=True, help="where the stores are kept")
    p.add_argument("--quick", action="store_true", help="five pairs per project, as run.py's")
    p.add_argument("--sizes", default="10,100,1000", help="store sizes, comma-separated")
    p.add_argument("--projects", default="", help="only these projects, comma-separated")
    p.add_argument("--pairs", default="", help="only these pairs, comma-separated")
    p.add_argument("--show", action="store_true", help="print each block")
    p.add_argument("--rebuild", action="store_true", help="build the stores again")
    p.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "agent-codemem", help="sdist cache"
    )
    return p


if __name__ == "__main__":
    sys.exit(main())
