"""How much of each step's prompt a real llama.cpp server reads from its cache, on bench/prefix.py's run.

Run: python bench/prefix_llama.py --server PATH/llama-server --model PATH/model.gguf
     python bench/prefix_llama.py --url http://127.0.0.1:8091   (a server already running)
     python bench/prefix_llama.py --requests requests.json ...   (replay a saved run)
     python bench/prefix_llama.py --steps 29 ...   (the first task only: 29 requests)
     python bench/prefix_llama.py --tokenize ...   (a quick estimate: no prompt is evaluated)

The requests are those bench/prefix.py's fake server records with `--window 4096` (the scripted
`agent run` against a server that says a 4,096-token window; `--save` writes them), replayed in
order to one llama.cpp slot: each step's share is `timings.cache_n / (cache_n + prompt_n)` of its
answer, and the printed figure is the median over the steps of each task (the first request of a
task or attempt, which shares nothing with the one before, is left out, as bench/prefix.py does).
`--tokenize` only asks the server to tokenize each prompt and counts the tokens it shares with
the previous one from the start, which is what one slot with `--cache-reuse 0` keeps; a
minute instead of the half hour two loaded CPU cores take per task to evaluate the prompts. On
the 29 requests of one run's task 1 it gave every step's cache_n exactly as the replay did; on
another's the server read more at one step, from an older prompt it keeps in memory, so the
replay stays the measure.

Getting llama.cpp and a model: build llama.cpp (https://github.com/ggml-org/llama.cpp,
`cmake -B build && cmake --build build --target llama-server`) and download SmolLM2-135M-Instruct
in GGUF (for instance `SmolLM2-135M-Instruct.Q4_1.gguf`), as in the README's local-model section.
Given `--server` and `--model`, the script starts `llama-server -c 4096 -np 1 --cache-reuse 0` on
a free loopback port and stops it at the end. Without a server (neither `--url` answering nor
both paths existing) it prints that it is skipped and exits 0. Only the cache shares matter:
the server answers one token per request, and its speed is not measured.

SmolLM2's chat template renders a message's role and content only: it has no place for a tools
schema or tool calls, and fails on an assistant message without content. So the requests are
rendered here and sent as raw prompts to `/completion`, in the template's own ChatML layout
(`<|im_start|>ROLE\\nCONTENT<|im_end|>\\n` per message, then `<|im_start|>assistant\\n`, as the
template gives with add_generation_prompt), the tools schema appended to the system message as
JSON (where tool-aware templates put it) and an assistant's tool calls as its content, one
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` line each. The script checks that the
server's template is that ChatML layout and refuses to measure otherwise.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

WINDOW = 4096
TARGET = 0.75


def render(body: dict) -> str:
    """The prompt SmolLM2's ChatML template would give for this request (see the docstring)."""
    parts = []
    tools = body.get("tools") or []
    for at, message in enumerate(body["messages"]):
        content = str(message.get("content") or "")
        if at == 0 and message["role"] == "system" and tools:
            content += "\n\n<tools>\n" + json.dumps(tools, sort_keys=True) + "\n</tools>"
        for call in message.get("tool_calls") or []:
            function = call["function"]
            line = json.dumps({"name": function["name"], "arguments": function["arguments"]})
            content += ("\n" if content else "") + f"<tool_call>{line}</tool_call>"
        parts.append(f"<|im_start|>{message['role']}\n{content}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def _post(url: str, data: dict, timeout: float = 1800) -> dict:
    request = urllib.request.Request(
        url, json.dumps(data).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.load(reply)


def _get(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return json.load(reply)


def answering(url: str) -> dict | None:
    """The server's /props, or None when nothing answers at `url`."""
    try:
        return _get(url + "/props")
    except (OSError, urllib.error.URLError, ValueError):
        return None


def chatml(props: dict) -> bool:
    """Whether the server's chat template is the ChatML layout render() reproduces."""
    template = str(props.get("chat_template") or "")
    return "<|im_start|>" in template and "message['content']" in template


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    server: Path, model: Path, log: Path, cache_reuse: int = 0
) -> tuple[subprocess.Popen, str]:
    """`llama-server` with one slot and a 4,096-token context on a free loopback port; with
    `cache_reuse` > 0, chunks of at least that many tokens of the previous prompt that come
    back later in the next one are shifted into place instead of evaluated again."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(server), "-m", str(model), "-c", str(WINDOW), "-np", "1"]
        + ["--cache-reuse", str(cache_reuse), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        props = answering(url)
        if props is not None and props.get("default_generation_settings"):
            return proc, url
        time.sleep(1)
    proc.kill()
    raise SystemExit(f"llama-server did not start; see {log}")


def recorded(path: Path | None) -> list[tuple[tuple[int, int] | None, dict]]:
    """The task requests of a saved run, or of a new bench/prefix.py run at a 4,096 window."""
    if path is None:
        import prefix  # bench/prefix.py, beside this script

        path = Path(tempfile.mkdtemp()) / "requests.json"
        if prefix.main(["--window", str(WINDOW), "--save", str(path)]) != 0:
            raise SystemExit("bench/prefix.py did not finish its run")
    steps = json.loads(path.read_text())
    return [(tuple(s["task"]) if s["task"] else None, s["body"]) for s in steps]  # type: ignore[misc]


def replay(url: str, steps) -> list[tuple[tuple[int, int] | None, int, int]]:
    """(task, cache_n, prompt_n) of each request, sent in order to one slot."""
    out = []
    for key, body in steps:
        answer = _post(
            url + "/completion",
            {
                "prompt": render(body),
                "n_predict": 1,
                "temperature": 0,
                "cache_prompt": True,
                "id_slot": 0,
            },
        )
        timings = answer["timings"]
        out.append((key, int(timings["cache_n"]), int(timings["prompt_n"])))
        print(
            f"  task {key}: prompt {timings['cache_n'] + timings['prompt_n']} tokens, "
            f"{timings['cache_n']} from the cache",
            flush=True,
        )
    return out


def reused(cache: list[int], prompt: list[int], chunk: int = 0) -> int:
    """How many of `prompt`'s tokens one llama.cpp slot holding `cache` takes from it: their
    common prefix, then, with `--cache-reuse chunk` (> 0), every later run of at least `chunk`
    tokens of the cache that comes next in the prompt, shifted into place. The same greedy walk
    as llama.cpp's server (tools/server/server-context.cpp, `n_cache_reuse`): a run that
    matches goes on from its end in both, anything else skips one token of the cache."""
    n = next(
        (at for at, (a, b) in enumerate(zip(cache, prompt, strict=False)) if a != b),
        min(len(cache), len(prompt)),
    )
    head_c = head_p = taken = n
    while chunk > 0 and head_c < len(cache) and head_p < len(prompt):
        match = 0
        while (
            head_c + match < len(cache)
            and head_p + match < len(prompt)
            and cache[head_c + match] == prompt[head_p + match]
        ):
            match += 1
        if match >= chunk:
            taken += match
            head_c += match
            head_p += match
        else:
            head_c += 1
    return min(taken, len(prompt) - 1)  # the server evaluates at least one token


def estimate(url: str, steps, chunk: int = 0) -> list[tuple[tuple[int, int] | None, int, int]]:
    """(task, shared, new) of each request, from the server's tokens of consecutive prompts
    (`reused()`, with `--cache-reuse chunk`)."""
    out = []
    prev: list[int] = []
    for key, body in steps:
        toks = [int(t) for t in _post(url + "/tokenize", {"content": render(body)})["tokens"]]
        common = reused(prev, toks, chunk)
        out.append((key, common, len(toks) - common))
        prev = toks
    return out


def report(rows) -> float:
    """Print each task's median cache share and return the median over all tasks' steps."""
    by_task: dict[int, list[float]] = {}
    prev = None
    for key, cache_n, prompt_n in rows:
        if key is not None and key == prev:
            by_task.setdefault(key[0], []).append(cache_n / (cache_n + prompt_n))
        prev = key
    for task, shares in sorted(by_task.items()):
        print(
            f"task {task}: {len(shares)} steps, median {statistics.median(shares):.1%} of the "
            f"prompt read from the server's cache (min {min(shares):.1%}, max {max(shares):.1%})"
        )
    every = [s for shares in by_task.values() for s in shares]
    median = statistics.median(every)
    print(
        f"all tasks: {len(every)} steps, median {median:.1%} from the cache, mean "
        f"{statistics.mean(every):.1%} (target: median >= {TARGET:.0%})"
    )
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", help="a llama.cpp server already running (one slot, -c 4096)")
    parser.add_argument("--server", type=Path, help="the llama-server binary to start")
    parser.add_argument("--model", type=Path, help="the GGUF model it serves")
    parser.add_argument("--requests", type=Path, help="requests saved by bench/prefix.py --save")
    parser.add_argument("--steps", type=int, help="replay only the first STEPS requests")
    parser.add_argument(
        "--tokenize", action="store_true", help="estimate from the server's tokens, no replay"
    )
    parser.add_argument(
        "--cache-reuse",
        type=int,
        default=0,
        metavar="N",
        help="start the server with --cache-reuse N (the README's local-model setting is 64)",
    )
    args = parser.parse_args(argv)
    proc = None
    url = args.url.rstrip("/") if args.url else None
    if url is None or answering(url) is None:
        if not (args.server and args.model and args.server.exists() and args.model.exists()):
            print("skipped: no llama.cpp server answers and no --server/--model to start one")
            return 0
        log = Path(tempfile.mkdtemp()) / "llama.log"
        proc, url = start_server(args.server, args.model, log, args.cache_reuse)
    try:
        props = answering(url) or {}
        n_ctx = props.get("default_generation_settings", {}).get("n_ctx")
        if not chatml(props) or n_ctx != WINDOW:
            print(f"refused: the server's template is not ChatML or its n_ctx ({n_ctx}) != 4096")
            return 1
        steps = recorded(args.requests)[: args.steps]
        print(f"replaying {len(steps)} task requests to {url}")
        report(estimate(url, steps, args.cache_reuse) if args.tokenize else replay(url, steps))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
