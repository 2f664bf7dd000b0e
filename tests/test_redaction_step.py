"""The redaction step: the same masks as the key-shape patterns, idempotent, JSON kept valid,
an unchanged value kept the same object, and cheap on a 200 KB request."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path

from agent_cli.core.events import FinalSummary, PlanMade
from agent_cli.core.models import MAX_VERDICT_REASON, ModelVerdict, ToolCall
from agent_cli.core.redact import (
    MASK,
    redact,
    redact_all,
    redact_argv,
    redact_json_text,
    redact_messages,
    redact_model,
)

SECRET = "plainsecret99"
# The shapes as plain patterns, each tried everywhere: what `redact` must mask, only faster.
REFERENCE = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"(?i)(?P<keep>authorization\s*[:=]\s*(?:bearer\s+|basic\s+|token\s+)?)[^\s\"']+"),
    re.compile(
        r"(?i)(?P<keep>\b(?:api[_-]?key|secret|password|token)\s*[:=]\s*[\"']?)[A-Za-z0-9_\-./+]{12,}"
    ),
]
PIECES = [
    *("sk-", "sk-proj-", "xsk-", "ghp_", "gho_", "github_pat_", "AKIA", "ASIA", "mytoken="),
    *("Authorization: Bearer ", "authorization=", "API_KEY=", "api-key: ", "secret: '"),
    *('Password="', "token=", "TOKEN:", " ", "\n", "x", "_", "-", "/", ".", "+", '"', "'"),
    *("\\", "=", ":", "İ", "é", "abcdefghijklmnop", "ABCDEFGHIJKLMNOP0123", "0123456789", SECRET),
]


def reference(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    for pattern in REFERENCE:
        text = pattern.sub(lambda m: (m.groupdict().get("keep") or "") + MASK, text)
    return text


def test_the_masks_are_the_patterns_and_masking_twice_changes_nothing():
    rng = random.Random(21)
    for i in range(5_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
        secrets = (SECRET,) if i % 2 else ()
        masked = redact(text, secrets)
        assert masked == reference(text, secrets), text
        assert redact(masked, secrets) == masked, text


def test_an_unchanged_value_is_the_same_object_and_a_masked_one_a_copy():
    value = {"a": ["plain", ("words", 1)], "b": {"c": None}}
    assert redact_all(value, (SECRET,)) is value
    messages = [{"role": "user", "content": "nothing here"}]
    assert redact_messages(messages, (SECRET,)) is messages
    event = FinalSummary(text="nothing here")
    assert redact_model(event, (SECRET,)) is event
    masked = redact_all({"a": ["plain", (f"x {SECRET}", 1)]}, (SECRET,))
    assert masked == {"a": ["plain", (f"x {MASK}", 1)]}
    assert value == {"a": ["plain", ("words", 1)], "b": {"c": None}}  # nothing changed in place


def test_a_model_is_masked_at_any_depth_and_stays_its_type():
    plan = PlanMade(
        goal="g",
        tasks=[{"goal": f"t {SECRET}", "acceptance": "a", "hints": [f"h {SECRET}"]}],
        accept_cmds=[f"c {SECRET}"],
    )
    masked = redact_model(plan, (SECRET,))
    assert isinstance(masked, PlanMade) and SECRET not in masked.model_dump_json()
    assert masked.tasks[0]["hints"] == [f"h {MASK}"]


def test_json_text_stays_valid_and_a_key_after_an_escape_is_found():
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    text = json.dumps({"auth": 'Authorization: x"y', "out": f"line\n{token}", SECRET: 1})
    masked = redact_json_text(text, (SECRET,))
    assert json.loads(masked) == {
        "auth": f'Authorization: {MASK}"y',
        "out": f"line\n{MASK}",
        MASK: 1,
    }
    assert redact_json_text('{"a": "plain"}') == '{"a": "plain"}'  # unchanged: byte for byte
    assert redact_json_text(f"not json {SECRET}", (SECRET,)) == f"not json {MASK}"


def test_a_200_kb_request_is_redacted_in_a_few_milliseconds():
    code = Path(__file__).resolve().parent.parent / "agent_cli" / "agent" / "run" / "session.py"
    text = (code.read_text() * 20)[:200_000]
    messages = [
        {"role": "user", "content": text[i : i + 10_000]} for i in range(0, 200_000, 10_000)
    ]
    best = min(
        _timed(lambda: redact_messages(messages, ("sk-test-SECRET123456789abcdef",)))
        for _ in range(5)
    )
    # about 8 ms here; each pattern tried at every character (REFERENCE) takes about 100 ms
    assert best < 0.06, f"{best * 1000:.1f} ms"


def _timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def test_a_mask_longer_than_the_secret_passes_no_length_check_and_nested_models_are_masked():
    short = "k3y9q7"  # six characters, masked by ten
    verdict = ModelVerdict(verdict="fail", reason=("x" * (MAX_VERDICT_REASON - 6)) + short)
    masked = redact_model(verdict, (short,))
    assert masked.reason.endswith(MASK) and len(masked.reason) > MAX_VERDICT_REASON
    nested = redact_all(
        {"calls": [ToolCall(id="c", name="run", arguments=f'{{"k": "{short}"}}')]}, (short,)
    )
    assert nested["calls"][0].arguments == f'{{"k": "{MASK}"}}'


def test_a_command_line_masks_what_its_own_words_call_a_credential():
    argv = ["notify", "--token", "t0ken-value", "--api-key=k3y-value", "DB_PASSWORD=pw-value"]
    argv += ["--no-keymap", "plain", "-u", "user", "PATH=/usr/bin", "--secret", SECRET, "x"]
    assert redact_argv(argv, [SECRET]) == [
        "notify", "--token", MASK, f"--api-key={MASK}", f"DB_PASSWORD={MASK}",
        "--no-keymap", "plain", "-u", "user", "PATH=/usr/bin", "--secret", MASK, "x",
    ]  # fmt: skip
    # the program is never taken for an option, and a lone option at the end masks nothing
    assert redact_argv(["--token", "--password"]) == ["--token", "--password"]
    assert redact_argv(["run", "--token="]) == ["run", "--token="]
