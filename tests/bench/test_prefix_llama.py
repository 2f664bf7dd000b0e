"""bench/prefix_llama.py: a request laid out as SmolLM2's ChatML template lays it out, tools and
tool calls included; without a llama.cpp server the bench says it is skipped."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "bench" / "prefix_llama.py"
_SPEC = importlib.util.spec_from_file_location("bench_prefix_llama", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
llama = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(llama)

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_a_request_is_rendered_in_chatml_with_its_tools_and_tool_calls():
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "run", "arguments": '{"cmd": "ls"}'},
    }
    tools = [{"type": "function", "function": {"name": "run", "parameters": {}}}]
    body = {
        "tools": tools,
        "messages": [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "WORKING MEMORY:\n[log m1] x"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            {"role": "user", "content": "GOAL"},
        ],
    }
    line = json.dumps({"name": "run", "arguments": '{"cmd": "ls"}'})
    assert llama.render(body) == (
        f"<|im_start|>system\nrules\n\n<tools>\n{json.dumps(tools, sort_keys=True)}\n</tools>"
        "<|im_end|>\n"
        "<|im_start|>user\nWORKING MEMORY:\n[log m1] x<|im_end|>\n"
        f"<|im_start|>assistant\n<tool_call>{line}</tool_call><|im_end|>\n"
        "<|im_start|>tool\na.py<|im_end|>\n"
        "<|im_start|>user\nGOAL<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_only_a_chatml_template_is_measured():
    assert llama.chatml({"chat_template": SMOLLM2_TEMPLATE})
    assert not llama.chatml({"chat_template": "{{ messages[0]['content'] }}[INST]"})


def test_without_a_server_the_bench_is_skipped(tmp_path, capsys):
    absent = tmp_path / "llama-server"
    assert llama.main(["--server", str(absent), "--model", str(tmp_path / "m.gguf")]) == 0
    assert capsys.readouterr().out.startswith("skipped: ")


def test_shares_are_the_median_of_each_tasks_steps_after_its_first(capsys):
    rows = [((1, 1), 0, 100), ((1, 1), 90, 10), ((1, 1), 50, 50), ((2, 1), 0, 80), ((2, 1), 70, 30)]
    assert llama.report(rows) == 0.7
    out = capsys.readouterr().out
    assert "task 1: 2 steps, median 70.0%" in out and "task 2: 1 steps, median 70.0%" in out


def test_cache_reuse_takes_back_what_follows_a_removed_part_but_not_what_follows_an_insert():
    cache = list(range(100))
    removed = cache[:40] + cache[60:] + [999]  # 20 tokens taken out, one new at the end
    assert llama.reused(cache, removed) == 40  # without --cache-reuse
    assert llama.reused(cache, removed, chunk=16) == 80  # the last 40 shifted into place
    assert llama.reused(cache, cache[:40] + cache[90:], chunk=16) == 40  # too short a run
    inserted = cache[:40] + [500, 501] + cache[40:]
    assert llama.reused(cache, inserted, chunk=16) == 40  # new tokens first: nothing after them
    assert llama.reused(cache, cache, chunk=16) == 99  # at least one token is evaluated
