"""The benchmark's numbers: per system and store size, the headline, the table, the plot."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pairs_b import MEASURED, SYSTEMS, Outcome

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
START, END = "<!-- codemem-table -->", "<!-- /codemem-table -->"


def at(outcomes: list[Outcome], system: str, size: int) -> dict[str, Any]:
    """One system's measures at one store size. Latency only for the systems that are runs
    (`MEASURED`): the median of the pairs' samples, with its quartiles and their number."""
    rows = [o for o in outcomes if o.system == system and o.size == size]
    items = sum(o.items for o in rows)
    got: dict[str, Any] = {
        "recall": round(sum(o.recalled for o in rows) / max(len(rows), 1), 3),
        "precision": round(sum(o.own_items for o in rows) / items, 3) if items else 0.0,
        "memory_tokens": round(statistics.mean(o.memory_tokens for o in rows), 1) if rows else 0.0,
        "stale_sent": sum(o.stale_sent for o in rows),
        "poison_unfenced": sum(o.poison_unfenced for o in rows),
        "latency_s": None,
    }
    samples = sorted(o.latency_s for o in rows if o.latency_s is not None)
    if system in MEASURED and samples:
        # the median: one run B on a loaded machine can wait for the CPU far longer than any
        # recall; the quartiles say how far the samples spread
        q1, _, q3 = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
        got.update(
            latency_s=round(statistics.median(samples), 3),
            latency_q1_s=round(q1, 3),
            latency_q3_s=round(q3, 3),
            latency_samples=len(samples),
        )
    return got


def summary(outcomes: list[Outcome], sizes: list[int], pairs: int) -> dict[str, Any]:
    """The issue's JSON object: per system the worst store size for each measure, and the
    measures at every size. A simulated system's latency is null: it is no run."""
    systems: dict[str, Any] = {}
    for s in SYSTEMS:
        per = {size: at(outcomes, s, size) for size in sizes}
        latencies = [p["latency_s"] for p in per.values() if p["latency_s"] is not None]
        systems[s] = {
            "recall": min(p["recall"] for p in per.values()),
            "precision": min(p["precision"] for p in per.values()),
            "memory_tokens": max(p["memory_tokens"] for p in per.values()),
            "stale_sent": max(p["stale_sent"] for p in per.values()),
            "poison_unfenced": max(p["poison_unfenced"] for p in per.values()),
            "latency_s": max(latencies) if latencies else None,
            "by_size": {str(k): v for k, v in per.items()},
        }
    return {"systems": systems, "pairs": pairs, "store_sizes": sizes}


def table(result: dict[str, Any]) -> str:
    """The Markdown tables: rows the systems, the worst store size for each measure; then
    every size; then the added latency of `agent`, measured in runs."""
    lines = [
        "| system | recall | precision | memory tokens/request | stale sent | poisoned outside a fence |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in SYSTEMS:
        v = result["systems"][s]
        lines.append(
            f"| {s} | {v['recall']:.0%} | {v['precision']:.0%} | {v['memory_tokens']:.0f} | "
            f"{v['stale_sent']} | {v['poison_unfenced']} |"
        )
    lines += ["", "By store size (recall / precision / memory tokens per request):", ""]
    sizes = result["store_sizes"]
    lines.append("| system | " + " | ".join(f"{n} items" for n in sizes) + " |")
    lines.append("|---|" + "---:|" * len(sizes))
    for s in SYSTEMS:
        cells = []
        for n in sizes:
            v = result["systems"][s]["by_size"][str(n)]
            cells.append(f"{v['recall']:.0%} / {v['precision']:.0%} / {v['memory_tokens']:.0f}")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Added latency of `agent`: its first request's arrival minus that of the same pair's "
        "run without memory (`none`), the two run back to back at each size; the median of "
        "the pairs' samples (quartiles):",
        "",
        "| store size | " + " | ".join(f"{n} items" for n in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    cells = []
    for n in sizes:
        v = result["systems"]["agent"]["by_size"][str(n)]
        if v.get("latency_s") is None:
            cells.append("-")
            continue
        cells.append(
            f"{v['latency_s'] * 1000:.0f} ms ({v['latency_q1_s'] * 1000:.0f} to "
            f"{v['latency_q3_s'] * 1000:.0f}; {v['latency_samples']} samples)"
        )
    lines.append("| agent | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def by_need(outcomes: list[Outcome], sizes: list[int]) -> str:
    """Each system's recall per kind of need and store size."""
    needs = sorted({o.need for o in outcomes})
    lines = [
        "| system | need | " + " | ".join(f"{n} items" for n in sizes) + " |",
        "|---|---|" + "---:|" * len(sizes),
    ]
    for s in SYSTEMS:
        for need in needs:
            cells = []
            for n in sizes:
                rows = [o for o in outcomes if o.system == s and o.size == n and o.need == need]
                cells.append(f"{sum(o.recalled for o in rows)}/{len(rows)}")
            lines.append(f"| {s} | {need} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failures(outcomes: list[Outcome]) -> list[str]:
    """One line per pair and size where `agent` did not recall what B needed."""
    return [
        f"agent missed {o.pair} ({o.need}) at {o.size} items: {o.items} items recalled, "
        f"{o.own_items} of the pair's; {o.detail}"
        for o in outcomes
        if o.system == "agent" and not o.recalled
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Recall against memory tokens per request, one line per system through the store sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in SYSTEMS:
        per = result["systems"][s]["by_size"]
        xs = [per[str(n)]["memory_tokens"] for n in result["store_sizes"]]
        ys = [per[str(n)]["recall"] * 100 for n in result["store_sizes"]]
        ax.plot(xs, ys, marker="o", label=s)
        for x, y, n in zip(xs, ys, result["store_sizes"], strict=True):
            ax.annotate(f"{n}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.fill_between([0, 1500], 95, 105, color="0.85", label="goal: recall >= 95%, <= 1,500 tokens")
    ax.set_xlabel("memory tokens per request")
    ax.set_ylabel("recall (%)")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_ylim(-5, 105)
    ax.set_title("Recall vs memory tokens per request (labels: store size)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_docs(result: dict[str, Any], outcomes: list[Outcome], sizes: list[int]) -> None:
    """docs/codemem.json, docs/codemem.png and the table in docs/codemem.md."""
    rows = ",\n".join("  " + json.dumps(o.to_dict()) for o in outcomes)  # one outcome a line
    head = json.dumps(result, indent=1)[:-2]
    (DOCS / "codemem.json").write_text(f'{head},\n "outcomes": [\n{rows}\n ]\n}}\n')
    plot(result, DOCS / "codemem.png")
    md = DOCS / "codemem.md"
    text = md.read_text() if md.exists() else f"{START}\n{END}\n"
    body = (
        f"`{result['command']}` ({result['pairs']} pairs, {result['seconds']} s):\n\n"
        f"{table(result)}\n\nRecall by need (pairs recalled / pairs):\n\n"
        f"{by_need(outcomes, sizes)}\n\n`agent`'s misses:\n\n"
        + "".join(f"- {line}\n" for line in failures(outcomes))
        + "".join(
            f"- run A failed (its pair is a miss of every system): {line}\n"
            for line in result.get("failed_runs_a", [])
        )
        + "".join(f"- {line}\n" for line in result.get("learned_nothing", []))
    )
    head, rest = text.split(START, 1)
    md.write_text(f"{head}{START}\n{body}{END}{rest.split(END, 1)[1]}")
