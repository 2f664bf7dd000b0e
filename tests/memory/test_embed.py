"""The offline WordLlama embedder, the endpoint embedder, and lazy imports."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from agent_cli.cli.config.settings import load_settings
from agent_cli.cli.shared import make_embedder
from agent_cli.memory.embed import WordLlamaEmbedder

NO_NETWORK = """
import socket
def refuse(*a, **k):
    raise OSError("network is off in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
"""


@pytest.fixture(scope="session")
def wordllama():
    """One WordLlama embedder; the model itself is loaded once per process."""
    return WordLlamaEmbedder()


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=False))


def test_wordllama_gives_unit_vectors_of_its_dimension(wordllama):
    vecs = wordllama.embed(["fix the failing parser test", "update the README"])
    assert wordllama.dim == 256 and wordllama.name == "wordllama:l2_supercat-256"
    assert [len(v) for v in vecs] == [256, 256]
    assert all(math.isclose(math.sqrt(_cos(v, v)), 1.0, rel_tol=1e-4) for v in vecs)


def test_wordllama_puts_related_texts_closer_than_unrelated(wordllama):
    q, near, far = wordllama.embed(
        ["database session handling", "refactor the database layer", "pizza recipe with tomatoes"]
    )
    assert _cos(q, near) > _cos(q, far) + 0.2


def test_text_without_words_embeds_as_zeros_not_nan(wordllama):
    (vec,) = wordllama.embed([""])
    assert all(v == 0.0 for v in vec)
    assert wordllama.embed([]) == []


@pytest.mark.slow
def test_wordllama_loads_and_embeds_with_the_network_off(tmp_path):
    code = NO_NETWORK + (
        "from agent_cli.memory.embed import WordLlamaEmbedder\n"
        "print(len(WordLlamaEmbedder().embed(['offline'])[0]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "256"


@pytest.mark.slow
def test_importing_memory_modules_loads_no_heavy_library():
    code = (
        "import sys\n"
        "import agent_cli.memory.embed, agent_cli.memory.longterm.chroma, agent_cli.memory.longterm.signatures\n"
        "import agent_cli.cli.commands.memory_commands\n"
        "print(json.dumps(sorted(m for m in ('chromadb', 'wordllama', 'numpy', 'openai')"
        " if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_factory_picks_wordllama_without_an_embedding_model(tmp_path):
    settings = load_settings(tmp_path, {}, env={}, user_rc=tmp_path / "none")
    assert isinstance(make_embedder(settings), WordLlamaEmbedder)


def test_factory_uses_the_configured_endpoint_for_an_embedding_model(tmp_path):
    from agent_cli.llm.fake.server import FakeOpenAIServer, fake_embedding

    with FakeOpenAIServer() as server:
        settings = load_settings(
            tmp_path,
            {"base_url": server.url, "embedding_model": "emb-small"},
            env={},
            user_rc=tmp_path / "none",
        )
        embedder = make_embedder(settings)
        vecs = embedder.embed(["tests failed", "docs"])
    assert embedder.name == "openai:emb-small" and embedder.dim == 64
    assert vecs[0] == pytest.approx(fake_embedding("tests failed"))


LOGS_WHILE_LOADING = """
import logging, sys, threading
from agent_cli.memory.embed import WordLlamaEmbedder

done = threading.Event()
def chatter():  # another thread's library logging INFO, as httpx does for each request
    while not done.is_set():
        logging.getLogger("httpx").info("HTTP Request: GET /props")
thread = threading.Thread(target=chatter)
thread.start()
WordLlamaEmbedder().embed(["warm up"])
done.set()
thread.join()
print(len(logging.getLogger().handlers), logging.getLevelName(logging.getLogger().level))
"""


def test_loading_the_embedder_never_turns_on_info_logging_for_other_threads():
    # wordllama calls logging.basicConfig(level=INFO) on import; while that held, every INFO
    # record of every library reached stderr, from whatever thread logged it.
    proc = subprocess.run(
        [sys.executable, "-c", LOGS_WHILE_LOADING], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "WARNING"]
    assert "INFO" not in proc.stderr


def test_only_the_opening_of_a_very_long_text_is_embedded():
    """WordLlama holds every token of a text at once: a text of megabytes is cut first."""
    from agent_cli.memory.embed import EMBED_CHARS

    embedder = WordLlamaEmbedder()
    opening = "the scheduler retries failed jobs with backoff " * (EMBED_CHARS // 40)
    long = opening[:EMBED_CHARS] + " unrelated tail words about gardening" * 5000
    assert embedder.embed([long]) == embedder.embed([opening[:EMBED_CHARS]])
