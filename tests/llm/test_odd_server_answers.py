"""Answers of a shape no server should send, read without an internal error: a Retry-After that
is negative or no number, a local server's window probes answered with JSON of any shape or
absurd sizes, a model listing nested past any parser's recursion, an error that is only text or
an HTML page."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest

from agent_cli.core.errors import ContextOverflow, ModelError
from agent_cli.llm.openai.chat import OpenAIChat
from httpkit import Answer, loopback, send, send_pieces, trickled

ASK = [{"role": "user", "content": "go"}]
REPLY = {"choices": [{"index": 0, "message": {"content": "fine"}, "finish_reason": "stop"}]}
SETTING = 8192

__all__ = ["loopback"]


@pytest.mark.parametrize(
    "retry_after", ["-5", "nan", "inf", "-inf", "Wed, 21 Oct 2015 07:28:00 GMT"]
)
def test_a_strange_retry_after_is_waited_sanely(fake_server, retry_after):
    busy = {"status": 429, "headers": {"Retry-After": retry_after}, "body": "{}"}
    srv = fake_server([busy, {"content": "fine"}])
    model = OpenAIChat(
        model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01, max_retries=1
    )
    assert model.chat(ASK).content == "fine"


@pytest.fixture
def routed_server(loopback: Callable[[Answer], str]) -> Callable[[dict[str, str]], str]:
    """A loopback server answering each path (GET or POST) with its body; chat replies whole."""

    def start(routes: dict[str, str]) -> str:
        def answer(handler: BaseHTTPRequestHandler) -> None:
            path = handler.path.rstrip("/")
            if path.endswith("/chat/completions"):
                send(handler, json.dumps(REPLY), "application/json")
            elif path in routes:
                send(handler, routes[path], "application/json")
            else:
                send(handler, '{"error": {"message": "not found"}}', "application/json", 404)

        return loopback(answer)

    return start


ODD_PROBES = {
    "vLLM ids that are lists": {"/v1/models": {"data": [{"id": ["m"]}]}},
    "vLLM data that is a number": {"/v1/models": {"data": 5}},
    "Ollama models that is a number": {"/api/ps": {"models": 5}},
    "Ollama num_ctx a superscript digit": {"/api/show": {"parameters": "num_ctx \u00b2"}},
    "Ollama num_ctx of 5,000 digits": {"/api/show": {"parameters": "num_ctx " + "9" * 5000}},
    "Ollama model_info a list": {"/api/show": {"model_info": [1, 2]}},
    "llama.cpp n_ctx of 500 digits": {"/props": '{"n_ctx": 1' + "0" * 500 + "}"},
    "llama.cpp settings a list": {"/props": {"default_generation_settings": [1]}},
}


@pytest.mark.parametrize("name", list(ODD_PROBES))
def test_window_probes_answered_in_odd_shapes_say_nothing(routed_server, name):
    routes = {p: b if isinstance(b, str) else json.dumps(b) for p, b in ODD_PROBES[name].items()}
    model = OpenAIChat(
        model="m",
        base_url=routed_server(routes),
        api_key=None,
        context_window=SETTING,
        max_tokens=100,
    )
    assert model.chat(ASK).content == "fine"
    assert (model.context_window, model.context_source) == (SETTING, "the context_window setting")


def test_a_sane_probe_answer_still_counts_beside_odd_ones(routed_server):
    url = routed_server(
        {
            "/api/ps": json.dumps({"models": 5}),
            "/v1/models": json.dumps({"data": [{"id": ["m"]}, {"id": "m", "max_model_len": 3000}]}),
        }
    )
    model = OpenAIChat(model="m", base_url=url, api_key=None, context_window=SETTING)
    assert (model.context_window, model.context_source) == (3000, "vLLM /v1/models")


def test_a_model_listing_nested_past_recursion_is_no_list_of_models(routed_server):
    url = routed_server({"/v1/models": "[" * 100_000 + "]" * 100_000})
    with pytest.raises(ModelError, match="did not answer with a list of models"):
        OpenAIChat(model="m", base_url=url, api_key=None).list_models()


@pytest.mark.parametrize(
    "where, said",
    [
        ("/v1/chat/completions", "redirects the request in a loop"),
        ("file:///etc/passwd", "to an address that is not http(s)"),
    ],
)
def test_an_endpoint_that_sends_the_request_elsewhere_is_said_at_once(loopback, where, said):
    asked = []

    def answer(handler: BaseHTTPRequestHandler) -> None:
        asked.append(handler.path)
        handler.send_response(307)
        handler.send_header("Location", where)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    model = OpenAIChat(
        model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01, max_retries=3
    )
    with pytest.raises(ModelError) as err:
        model.chat(ASK)
    assert said in err.value.message and "answers" in err.value.message
    assert "is the server running" not in err.value.one_line()
    assert len(asked) <= 30  # one request's redirects; no retry of the whole


LM_STUDIO_OVERFLOW = (
    "Trying to keep the first 5012 tokens when context the overflows. However, the model is "
    "loaded with context length of only 4096 tokens, which is not enough."
)


@pytest.mark.parametrize(
    ("status", "body", "kind", "said"),
    [
        (400, json.dumps({"error": LM_STUDIO_OVERFLOW}), ContextOverflow, "does not fit"),
        (400, json.dumps({"error": "model is loading"}), ModelError, "400: model is loading"),
        (404, json.dumps({"detail": "Not Found"}), ModelError, "(404: Not Found)"),
        (
            500,
            "<html><head><title>500 Internal Server Error</title></head><body>nginx</body></html>",
            ModelError,
            "(500 Internal Server Error nginx)",
        ),
    ],
)
def test_an_error_as_text_or_a_page_is_said_in_the_servers_words(
    loopback: Callable[[Answer], str], status: int, body: str, kind: type, said: str
):
    url = loopback(
        lambda h: send(h, body, "text/html" if "<" in body else "application/json", status)
    )
    model = OpenAIChat(model="m", base_url=url, api_key=None, max_retries=0, stream=False)
    with pytest.raises(kind) as raised:
        model.chat(ASK)
    assert said in str(raised.value) and "<" not in str(raised.value)


@pytest.mark.parametrize(
    ("body", "said", "fix"),
    [
        (json.dumps({"detail": "Not Found"}), "/chat/completions was not found", "base URL"),
        ("404 page not found", "/chat/completions was not found", "base URL"),
        (
            json.dumps({"error": {"message": 'model "qwen" not found, try pulling it first'}}),
            "model 'qwen' was not found",
            "set --model",
        ),
    ],
)
def test_a_404_names_the_address_unless_it_names_the_model(
    loopback: Callable[[Answer], str], body: str, said: str, fix: str
):
    # A base URL without its /v1 reaches no route at all: the model is not what is wrong.
    url = loopback(lambda h: send(h, body, "application/json", 404))
    model = OpenAIChat(model="qwen", base_url=url, api_key=None, max_retries=0, stream=False)
    with pytest.raises(ModelError) as raised:
        model.chat(ASK)
    assert said in raised.value.message and fix in raised.value.hint


def test_a_retry_after_given_as_an_http_date_is_waited_for(loopback: Callable[[Answer], str]):
    # RFC 9110: Retry-After is seconds or an HTTP date; until then the server keeps refusing.
    until = time.time() + 1.0

    def answer(handler: BaseHTTPRequestHandler) -> None:
        if time.time() < until:
            date = email.utils.formatdate(until + 1, usegmt=True)
            handler.send_response(429)
            handler.send_header("Retry-After", date)
            handler.send_header("Content-Length", "2")
            handler.end_headers()
            handler.wfile.write(b"{}")
            return
        send(handler, json.dumps(REPLY), "application/json")

    url = loopback(answer)
    model = OpenAIChat(model="m", base_url=url, api_key=None, backoff_s=0.01, max_retries=1)
    assert model.chat(ASK).content == "fine"


def test_a_model_listing_trickled_a_byte_at_a_time_is_ended(loopback: Callable[[Answer], str]):
    # The read timeout starts again with every byte: `agent doctor` would wait without end.
    body = (" " * 300 + json.dumps({"object": "list", "data": [{"id": "m"}]})).encode()

    model = OpenAIChat(
        model="m", base_url=loopback(trickled(body, 0.05)), api_key=None, timeout_s=0.3
    )
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"/models: the answer went on for over 0.6 s"):
        model.list_models()
    assert time.monotonic() - started < 3


def test_a_whole_reply_cut_short_in_good_order_is_asked_again(loopback: Callable[[Answer], str]):
    # No length given and the body ends (to its EOF) in the middle of the JSON: it was cut,
    # so the request is sent again rather than the model told its reply was malformed.
    whole = json.dumps(REPLY)
    answers: list[str] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(whole if answers else whole[: len(whole) // 2])
        send_pieces(h, [answers[-1].encode()], "application/json")

    model = OpenAIChat(
        model="m", base_url=loopback(answer), api_key=None, stream=False, backoff_s=0.01
    )
    assert model.chat(ASK).content == "fine" and len(answers) == 2


def test_a_request_refused_as_too_large_names_the_body_limit(loopback: Callable[[Answer], str]):
    # nginx refuses bodies over 1 MB unless raised: the fix is the limit, not the model.
    page = "<html><body><h1>413 Request Entity Too Large</h1><hr>nginx</body></html>"
    url = loopback(lambda h: send(h, page, "text/html", status=413))
    with pytest.raises(ModelError) as caught:
        OpenAIChat(model="m", base_url=url, api_key=None).chat(ASK)
    assert "refused a request of" in caught.value.message
    assert "bytes as too large (413: 413 Request Entity Too Large nginx)" in caught.value.message
    assert "client_max_body_size" in caught.value.hint


def test_an_empty_answer_is_asked_again_not_called_malformed(loopback: Callable[[Answer], str]):
    # An empty 200 is an answer lost on the way (a proxy), not a reply the model wrote badly.
    answers: list[str] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(json.dumps(REPLY) if answers else "")
        send(h, answers[-1], "application/json")

    model = OpenAIChat(model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01)
    assert model.chat(ASK).content == "fine" and len(answers) == 2


@pytest.mark.parametrize("code", [400, None])
def test_an_overflow_told_in_an_error_object_is_a_context_overflow(
    loopback: Callable[[Answer], str], code: int | None
):
    # A gateway that relays the provider's overflow in an error object (HTTP 200): the
    # caller can fit the request to the window it names, as after a 400 that says so.
    said = (
        "This model's maximum context length is 8192 tokens. However, you requested 9000 "
        "tokens (8000 in the messages, 1000 in the completion)"
    )
    body = json.dumps({"error": {"message": said, "code": code}})
    answers: list[int] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(1)
        send(h, body, "application/json")

    model = OpenAIChat(model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01)
    with pytest.raises(ContextOverflow) as caught:
        model.chat(ASK)
    assert caught.value.window == 8192 and len(answers) == 1


def test_a_quota_used_up_is_said_at_once_not_waited_on(loopback: Callable[[Answer], str]):
    # OpenAI answers 429 insufficient_quota when the account has no credit: no wait helps.
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details.",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    answers: list[int] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(1)
        send(h, json.dumps(body), "application/json", status=429)

    model = OpenAIChat(model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01)
    with pytest.raises(ModelError, match="quota of the key sent is used up") as caught:
        model.chat(ASK)
    assert len(answers) == 1 and "billing" in caught.value.hint
