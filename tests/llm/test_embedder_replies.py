"""What an /embeddings endpoint sends is checked before memory uses it: an empty list, nulls,
NaN, an HTML page, an error object, too few vectors or a changed dimension are one ModelError
naming the endpoint, never an internal error in memory later."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest

from agent_cli.cli.config.settings import Settings
from agent_cli.cli.shared import make_embedder
from agent_cli.core.errors import ModelError
from agent_cli.llm.openai.embedder import OpenAIEmbedder
from httpkit import Answer, loopback, send, trickled

__all__ = ["loopback"]


def _rows(*vectors: object) -> str:
    return json.dumps(
        {"object": "list", "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}
    )


ODD = {
    "an empty list": (json.dumps({"object": "list", "data": []}), "0 vectors for 2 texts"),
    "nulls": (_rows(None, None), "not a list of finite numbers"),
    "NaN": (_rows([0.1, 0.2], [0.3, 0.4]).replace("0.1", "NaN"), "not usable JSON"),
    "an HTML page": ("<html><body>Bad gateway</body></html>", "not usable JSON"),
    "an error in a 200": (
        json.dumps({"error": {"message": "model not loaded"}}),
        "model not loaded",
    ),
    "too few vectors": (_rows([0.1, 0.2]), "1 vector for 2 texts"),
    "text in a vector": (_rows([0.1, "x"], [0.3, 0.4]), "not a list of finite numbers"),
    "two lengths": (_rows([0.1, 0.2], [0.3]), "vectors of 1, 2 dimensions"),
    "Ollama's native shape": (json.dumps({"embeddings": [[0.1], [0.2]]}), "no list of vectors"),
}


@pytest.mark.parametrize("case", list(ODD))
def test_an_odd_embeddings_answer_is_a_model_error(loopback: Callable[[Answer], str], case: str):
    body, said = ODD[case]
    url = loopback(lambda h: send(h, body, "application/json"))
    embedder = OpenAIEmbedder(base_url=url, api_key=None, model="emb", timeout_s=5)
    with pytest.raises(ModelError, match="/embeddings answered with") as raised:
        embedder.embed(["one", "two"])
    assert said in str(raised.value)


def test_vectors_come_back_in_input_order_and_a_changed_dimension_is_refused(
    loopback: Callable[[Answer], str],
):
    answers = [
        json.dumps(
            {"data": [{"index": 1, "embedding": [0, 1]}, {"index": 0, "embedding": [1, 0]}]}
        ),
        _rows([0.5, 0.5, 0.5]),
    ]

    def answer(handler: BaseHTTPRequestHandler) -> None:
        send(handler, answers.pop(0), "application/json")

    url = loopback(answer)
    embedder = OpenAIEmbedder(base_url=url, api_key=None, model="emb", timeout_s=5)
    assert embedder.embed(["a", "b"]) == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ModelError, match=r"3 dimensions \(it gave 2 before\)"):
        embedder.embed(["c"])


def test_a_busy_embeddings_endpoint_is_asked_again_and_a_refusal_is_not(
    loopback: Callable[[Answer], str],
):
    busy = json.dumps({"error": {"message": "busy, try later"}})
    answers = [(503, busy), (429, busy), (200, _rows([0.6, 0.8])), (400, busy)]
    asked = []

    def answer(handler: BaseHTTPRequestHandler) -> None:
        status, body = answers.pop(0)
        asked.append(status)
        send(handler, body, "application/json", status)

    url = loopback(answer)
    embedder = OpenAIEmbedder(base_url=url, api_key=None, model="emb", timeout_s=5, backoff_s=0.01)
    assert embedder.embed(["a"]) == [[0.6, 0.8]]
    with pytest.raises(ModelError, match="rejected the request"):
        embedder.embed(["b"])
    assert asked == [503, 429, 200, 400]


def test_the_embedders_timeout_is_the_request_timeout_setting(loopback: Callable[[Answer], str]):
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(1.5)
        send(h, _rows([0.1, 0.2]), "application/json")

    url = loopback(slow)
    settings = Settings(base_url=url, embedding_model="emb", request_timeout_s=0.5, max_retries=0)
    with pytest.raises(ModelError, match=r"did not answer in time \(nothing for 0.5 s\)"):
        make_embedder(settings).embed(["one"])


def test_an_answer_trickled_a_byte_at_a_time_is_ended_at_the_whole_exchange_bound(
    loopback: Callable[[Answer], str],
):
    # Each byte starts the read timeout again: only the bound on the whole answer ends it.
    body = (" " * 40 + _rows([0.1, 0.2])).encode()

    url = loopback(trickled(body, 0.1))
    embedder = OpenAIEmbedder(
        base_url=url, api_key=None, model="emb", timeout_s=0.5, total_timeout_s=1.0, max_retries=0
    )
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"/embeddings: the answer went on for over 1 s"):
        embedder.embed(["one"])
    assert time.monotonic() - started < 3


def test_an_answer_far_larger_than_its_vectors_is_ended(loopback: Callable[[Answer], str]):
    # Valid JSON, but 3 MB for one vector: no embedding answer is that large.
    padded = _rows([0.1, 0.2]).replace(",", "," + " " * 3 * 2**20, 1)
    url = loopback(lambda h: send(h, padded, "application/json"))
    embedder = OpenAIEmbedder(base_url=url, api_key=None, model="emb", timeout_s=5)
    with pytest.raises(ModelError, match="answered with more than 1 MB"):
        embedder.embed(["one"])


def test_an_answer_broken_off_mid_body_is_asked_again(loopback: Callable[[Answer], str]):
    answers = []

    def once_cut(h: BaseHTTPRequestHandler) -> None:
        answers.append(1)
        body = _rows([0.1, 0.2])
        if len(answers) > 1:
            return send(h, body, "application/json")
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(body[:10].encode())  # then the connection closes

    url = loopback(once_cut)
    embedder = OpenAIEmbedder(
        base_url=url, api_key=None, model="emb", timeout_s=5, max_retries=1, backoff_s=0.01
    )
    assert embedder.embed(["one"]) == [[0.1, 0.2]] and len(answers) == 2
