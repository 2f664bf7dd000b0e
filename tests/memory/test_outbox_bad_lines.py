"""One unreadable outbox line never stops the others (issue 21, class 13).

Bad lines (deeply nested, not UTF-8, not a write, not JSON) are dropped from the outbox and
kept, byte for byte, in `<outbox>.rejected`; the good ones are sent to a real store.
"""

from __future__ import annotations

import json

from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.write.outbox import Outbox
from embedkit import HashEmbedder

BAD = [
    b"[" * 200_000 + b"]" * 200_000,
    b'{"op": "add_fact", "args": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"op": "add_fact", "args": ["caf\xe9", "h"]}',
    b'{"op": "rm_rf", "args": []}',
    b"not json at all",
    b'{"op": "add_fact", "args": {"a": 1}}',
]


def test_bad_lines_are_set_aside_and_every_good_one_is_sent(tmp_path):
    path = tmp_path / "memory-outbox.jsonl"
    box = Outbox(path, "store")
    box.keep("add_fact", ("First good fact about retries", "harness"), {})
    with path.open("ab") as f:
        f.write(b"\n".join(BAD) + b"\n")
    box.keep("add_fact", ("Second good fact about backoff", "harness"), {})
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        assert box.send(store).sent == 2
        assert store.counts()["facts"] == 2
    assert not path.exists()  # everything sent or set aside
    assert box.rejected_path.read_bytes().splitlines() == BAD
    # A later run finds nothing to resend and sets nothing aside twice.
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        assert Outbox(path, "store").send(store).sent == 0
    assert box.rejected_path.read_bytes().splitlines() == BAD


def test_bad_lines_are_set_aside_even_when_nothing_is_for_this_store(tmp_path):
    path = tmp_path / "memory-outbox.jsonl"
    Outbox(path, "elsewhere").keep("add_fact", ("Waits for its server", "harness"), {})
    with path.open("ab") as f:
        f.write(BAD[0] + b"\n")
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        assert Outbox(path, "store").send(store).sent == 0
    left = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["args"][0] for e in left] == ["Waits for its server"]
    assert Outbox(path, "store").rejected_path.read_bytes() == BAD[0] + b"\n"
