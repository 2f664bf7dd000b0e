"""A coding-memory benchmark: does what one run learned reach the run that needs it?

    python bench/codemem/run.py [--quick] [--json] [--sizes 10,100,1000] [--cache DIR]
                                [--work DIR] [--fresh] [--out FILE] [--write-docs]
                                [--projects a,b] [--scenarios DIR]

For each scenario pair, run A (scripted replies against the loopback fake server) learns
something in a real project from PyPI; run B, later in the same repository, needs it. Each
system's recall, precision, memory tokens per request, stale items sent as fresh, poisoned text
outside a fence are read from the requests the server received, and the added latency of
`agent` from when its first request arrived. See docs/codemem.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agentrun  # noqa: E402
import learn  # noqa: E402
import pairs_b  # noqa: E402
import projects  # noqa: E402
import report  # noqa: E402
import scenarios  # noqa: E402

from agent_cli.memory.embed import WordLlamaEmbedder  # noqa: E402

QUICK_KINDS = ("procedure-1", "pitfall-1", "fact-1", "convention-1", "fix-1")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.from_json:
        return rewrite(args.from_json)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        return _usage(f"--sizes takes whole numbers, comma-separated (got {args.sizes!r})")
    if any(n < 1 for n in sizes):
        return _usage(f"--sizes must be positive (got {args.sizes!r})")
    try:
        loaded = scenarios.load_all(args.scenarios)
    except (OSError, ValueError, KeyError) as e:
        return _usage(f"the scenario files in {args.scenarios} cannot be read: {e}")
    known = {scn.project.name for scn in loaded}
    asked = {p for p in args.projects.split(",") if p}
    if asked - known:
        return _usage(
            f"no such project: {', '.join(sorted(asked - known))} (known: {', '.join(sorted(known))})"
        )
    if args.write_docs:
        try:
            import matplotlib  # noqa: F401  (the plot is written with the table and the JSON)
        except ImportError:
            return _usage(
                "--write-docs draws docs/codemem.png with matplotlib: pip install matplotlib"
            )
    work = agentrun.scratch_dir(args.work)
    # a kill ends the run as Ctrl-C does: through the `finally` that removes the scratch folder
    killed = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return measure(args, [s for s in loaded if not asked or s.project.name in asked], work)
    except KeyboardInterrupt:
        print("bench/codemem/run.py: interrupted", file=sys.stderr)
        return 130
    except (projects.HashMismatch, subprocess.CalledProcessError) as e:
        said = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) and e.stderr else ""
        print(f"bench/codemem/run.py: {e}" + (f": {said}" if said else ""), file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, killed)
        if args.work is None:  # a folder of our own: nothing in it is kept
            shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, chosen: list[scenarios.Scenario], work: Path) -> int:
    """Runs A and B of the `chosen` projects in `work`; the table (or the JSON) printed."""
    start = time.monotonic()
    sizes = [int(s) for s in args.sizes.split(",")]
    agentrun.isolate(work)
    embedder = WordLlamaEmbedder()
    outcomes: list[pairs_b.Outcome] = []
    failed: list[str] = []
    lacking: list[str] = []
    n_pairs = 0
    for scn in chosen:
        if args.quick:
            scn = scenarios.Scenario(
                **{
                    **scn.__dict__,
                    "pairs": tuple(p for p in scn.pairs if p.id.endswith(QUICK_KINDS)),
                }
            )
        say(args, f"{scn.project.name}: {len(scn.pairs)} runs A")
        learned = learn.learn_cached(scn, args.cache, work, args.fresh)
        failed += learned.failed
        for line in learned.failed:
            say(args, f"run A failed: {line}")
        for kind in learned.lacking({p.need for p in scn.pairs}):
            lacking.append(f"{scn.project.name}: the runs A learned nothing of kind {kind}")
            say(args, lacking[-1])
        n_pairs += len(scn.pairs)
        say(args, f"{scn.project.name}: runs B at sizes {sizes} ({time.monotonic() - start:.0f} s)")
        outcomes += pairs_b.evaluate(learned, sizes, work, embedder)
    result = report.summary(outcomes, sizes, n_pairs)
    result["failed_runs_a"] = failed
    result["learned_nothing"] = lacking
    result["seconds"] = round(time.monotonic() - start, 1)
    result["command"] = "python bench/codemem/run.py" + (" --quick" if args.quick else "")
    if args.out:
        args.out.write_text(
            json.dumps({**result, "outcomes": [o.to_dict() for o in outcomes]}, indent=1)
        )
    if args.write_docs:
        report.write_docs(result, outcomes, sizes)
    if args.json:
        keys = ("systems", "pairs", "store_sizes", "failed_runs_a", "learned_nothing")
        print(json.dumps({k: result[k] for k in keys}))
    else:
        print(report.table(result))
        print(f"\n{n_pairs} pairs, sizes {sizes}, {result['seconds']} s")
        for line in failed:  # their pairs count as misses of every system
            print(f"run A failed: {line}")
        for line in lacking:
            print(line)
        for line in report.failures(outcomes):
            print(line)
    return 0


def _usage(message: str) -> int:
    print(f"bench/codemem/run.py: {message}", file=sys.stderr)
    return 2


def rewrite(path: Path) -> int:
    """The docs again from a result written with --out, without running anything."""
    data = json.loads(path.read_text())
    outcomes = [pairs_b.Outcome(**o) for o in data.pop("outcomes")]
    report.write_docs(data, outcomes, data["store_sizes"])
    print(report.table(data))
    return 0


def say(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text, file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/codemem/run.py", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="five pairs per project, one of each kind")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--sizes", default="10,100,1000", help="store sizes, comma-separated")
    p.add_argument("--projects", default="", help="only these projects, comma-separated")
    p.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "agent-codemem", help="sdist cache"
    )
    p.add_argument(
        "--from-json", type=Path, default=None, help="rewrite the docs from --out's file"
    )
    p.add_argument("--fresh", action="store_true", help="redo runs A even when cached")
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the repositories and stores here (without it they go in a temporary "
        "folder, removed at the end)",
    )
    p.add_argument(
        "--scenarios",
        type=Path,
        default=scenarios.HERE / "scenarios",
        help="the folder of scenario files (*.toml)",
    )
    p.add_argument("--out", type=Path, default=None, help="write the full result (JSON) here")
    p.add_argument(
        "--write-docs", action="store_true", help="write the table, JSON and plot under docs/"
    )
    return p


if __name__ == "__main__":
    sys.exit(main())
