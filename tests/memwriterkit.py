"""One process writing long-term memory as a run does, for the concurrency tests.

`python tests/memwriterkit.py SPEC.json` reads what to write from SPEC (the store: a
directory or a server URL and database; this writer's number; how many items; a file to
wait for, so that every writer starts at once), writes through the run's own stack
(FallbackLongTerm over LazyLongTermMemory, with the outbox), and prints one JSON line:
the errors it met and what it was told.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from agent_cli.memory.longterm.write.outbox import Outbox
from embedkit import HashEmbedder
from episodekit import episode

TOPIC = "rootcommit0123 github.com/team/shared"


def word(n: int) -> str:
    """A word of letters only for `n` (HashEmbedder reads letters): distinct numbers, distinct words."""
    out, n = "", n + 26 * 27
    while n:
        n, r = divmod(n, 26)
        out += "abcdefghijklmnopqrstuvwxyz"[r]
    return out


def shared_fact(n: int) -> str:
    return f"The {word(n)} module is built with make {word(n)}"


def own_fact(me: int, n: int) -> str:
    return f"Writer {word(me)} learned that {word(1000 + n)} needs the {word(2000 + me)} flag"


def shared_note(n: int) -> str:
    return f"Keep the {word(3000 + n)} fixtures small"


def shared_command(n: int) -> str:
    return f"pytest -q tests/test_{word(4000 + n)}.py"


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    me, items = int(spec["writer"]), int(spec["items"])
    place: Path | ChromaServer = (
        ChromaServer(spec["url"], database=spec["database"])
        if spec.get("url")
        else Path(spec["path"])
    )
    notices: list[str] = []
    errors: list[str] = []
    start = Path(spec["start"])
    while not start.exists():
        time.sleep(0.005)
    lazy = LazyLongTermMemory(place, HashEmbedder())
    memory = FallbackLongTerm(
        lambda: lazy,
        notice=notices.append,
        outbox=Outbox(Path(spec["outbox"]), str(place)),
    )
    try:
        memory.prepare()
        for n in range(items):
            try:
                memory.recall(shared_fact(n), k=3, topics=[TOPIC])
                memory.add_fact(
                    shared_fact(n), f"run w{me}", trust=0.5, topic=TOPIC, run_id=f"w{me}"
                )
                memory.add_fact(
                    own_fact(me, n), f"run w{me}", trust=0.5, topic=TOPIC, run_id=f"w{me}"
                )
                memory.curate(
                    shared_note(n), topic=TOPIC, origin_event_id=f"w{me}/{n}", run_id=f"w{me}"
                )
                memory.add_procedure(
                    shared_command(n), "the tests pass", topic=TOPIC, run_id=f"w{me}"
                )
                found = memory.associate(shared_fact(n), k=2, topics=[TOPIC])
                memory.count_hits(found)
            except Exception as e:  # the test fails on any, naming it
                errors.append(f"{type(e).__name__}: {e}")
        memory.add_episode(
            episode(f"20250314-0900{me:02d}-w{me}", f"writer {word(me)} goal", topic=TOPIC)
        )
    finally:
        lazy.close()
    print(json.dumps({"writer": me, "errors": errors, "notices": notices}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
