import json

import pytest

from agent_cli.core.errors import ConfigError, MalformedReply, ModelError
from agent_cli.core.protocols import ChatModel
from agent_cli.llm.base import force, function_tool
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.llm.openai.embedder import OpenAIEmbedder
from agent_cli.llm.record import RecordingModel, ReplayModel

TOOLS = [function_tool("read_file", "Read a file.", {"path": {"type": "string"}})]


def chat_model(server, **kw):
    kw = {
        "model": "fake-model",
        "base_url": server.url,
        "api_key": "sk-test-000000000000000000",
        "backoff_s": 0.01,
        "price_in": 1.0,
        "price_out": 2.0,
        **kw,
    }
    return OpenAIChat(**kw)


def test_tool_call_round_trip_and_usage(fake_server):
    srv = fake_server(
        [
            {
                "tool": "read_file",
                "args": {"path": "a.py"},
                "usage": {"prompt_tokens": 1000, "completion_tokens": 500},
            },
            {"content": "done", "usage": {"prompt_tokens": 3000, "completion_tokens": 0}},
        ]
    )
    m = chat_model(srv)
    r1 = m.chat([{"role": "user", "content": "hi"}], TOOLS, force("read_file"))
    assert r1.tool_calls[0].name == "read_file"
    assert json.loads(r1.tool_calls[0].arguments) == {"path": "a.py"}
    r2 = m.chat([{"role": "user", "content": "again"}], TOOLS)
    assert r2.content == "done" and not r2.tool_calls
    assert (m.usage.prompt_tokens, m.usage.completion_tokens, m.usage.calls) == (4000, 500, 2)
    assert m.usage.cost_usd == pytest.approx((4000 * 1.0 + 500 * 2.0) / 1e6)
    sent = srv.chat_requests[0]
    assert sent["tools"][0]["function"]["name"] == "read_file"
    assert sent["tool_choice"] == "required"  # one tool offered and forced: the portable form
    assert {k.lower(): v for k, v in srv.requests[0]["headers"].items()}[
        "authorization"
    ] == "Bearer sk-test-000000000000000000"


def test_retries_429_and_5xx_then_succeeds(fake_server):
    srv = fake_server(
        [
            {"status": 429, "body": "{}"},
            {"status": 503, "body": "{}"},
            {"status": 502, "body": "{}"},
            {"content": "ok"},
        ]
    )
    retries = []
    m = chat_model(srv, on_retry=lambda n, of, delay, why: retries.append((n, of)))
    assert m.chat([{"role": "user", "content": "x"}]).content == "ok"
    assert retries == [(1, 4), (2, 4), (3, 4)] and len(srv.chat_requests) == 4


def test_retries_are_bounded_then_a_clear_error(fake_server):
    srv = fake_server([{"status": 502, "body": "{}"}] * 10)
    with pytest.raises(ModelError, match="kept failing with 502"):
        chat_model(srv, max_retries=2).chat([{"role": "user", "content": "x"}])
    assert len(srv.chat_requests) == 3


def test_timeout_is_retried_then_reported(fake_server):
    srv = fake_server([{"delay": 1.0, "content": "late"}, {"content": "fast"}])
    m = chat_model(srv, timeout_s=0.3, max_retries=1)
    assert m.chat([{"role": "user", "content": "x"}]).content == "fast"
    srv2 = fake_server([{"delay": 1.0, "content": "late"}] * 2)
    with pytest.raises(ModelError, match="did not answer in time"):
        chat_model(srv2, timeout_s=0.3, max_retries=1).chat([{"role": "user", "content": "x"}])


def test_https_to_a_silent_local_server_suggests_plain_http():
    """llama.cpp and its kind speak plain http: asked over https, such a server waits on the
    TLS greeting, and the fix is the scheme, not a longer timeout."""
    import socket

    with socket.socket() as listener:  # accepts, then says nothing, as such a server does
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        m = OpenAIChat(
            model="m",
            base_url=f"https://127.0.0.1:{port}/v1",
            api_key=None,
            timeout_s=0.3,
            max_retries=0,
        )
        with pytest.raises(ModelError, match="did not answer in time") as err:
            m.chat([{"role": "user", "content": "x"}])
    assert f"try http://127.0.0.1:{port}/v1" in (err.value.hint or "")


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1", "http://no-such-host.invalid/v1"])
def test_refused_connection_and_unknown_host_fail_at_once(url):
    retries = []
    m = OpenAIChat(
        model="m",
        base_url=url,
        api_key=None,
        max_retries=4,
        backoff_s=5.0,
        on_retry=lambda *a: retries.append(a),
    )
    with pytest.raises(ModelError, match="cannot reach the model endpoint") as e:
        m.chat([{"role": "user", "content": "x"}])
    assert "--base-url" in e.value.hint
    assert retries == []  # no retry: a backoff of 5 s would have been announced here


def test_no_key_for_openai_is_a_config_error():
    with pytest.raises(ConfigError, match="no API key"):
        OpenAIChat(model="gpt-4o-mini", base_url="https://api.openai.com/v1", api_key=None)


def test_bad_key_and_unknown_model(fake_server):
    srv = fake_server([{"content": "never"}], api_key="sk-right-key-0000000000")
    with pytest.raises(ModelError, match="refused the API key"):
        chat_model(srv, api_key="sk-wrong-key-0000000000").chat([{"role": "user", "content": "x"}])
    with pytest.raises(ModelError, match="'nope' was not found") as e:
        chat_model(srv, model="nope", api_key="sk-right-key-0000000000").chat(
            [{"role": "user", "content": "x"}]
        )
    assert "agent doctor" in e.value.hint


def test_garbage_body_and_empty_choices(fake_server):
    # JSON of another shape (a page, no JSON at all, is the endpoint's: test_pages_and_filters.py)
    srv = fake_server([{"raw": '{"choices": "a string"}'}, {"no_choices": True}])
    m = chat_model(srv)
    with pytest.raises(MalformedReply):
        m.chat([{"role": "user", "content": "x"}])
    reply = m.chat([{"role": "user", "content": "x"}])
    assert reply.finish_reason == "no_choices" and not reply.tool_calls


def test_list_models(fake_server):
    srv = fake_server([], models=("a", "b"))
    assert chat_model(srv).list_models() == ["a", "b"]


def test_record_then_replay_without_network(fake_server, tmp_path):
    key = "sk-live-abcdefghijklmnopqrstuvwxyz"
    srv = fake_server([{"tool": "read_file", "args": {"path": "x"}}, {"content": "bye"}])
    path = tmp_path / "rec.jsonl"
    rec = RecordingModel(chat_model(srv, api_key=key), path, secrets=(key,))
    rec.chat([{"role": "user", "content": f"my key is {key}"}], TOOLS)
    rec.chat([{"role": "user", "content": "next"}], TOOLS)
    text = path.read_text()
    assert key not in text and len(text.splitlines()) == 2
    srv.stop()
    replay = ReplayModel(path, price_in=1.0, price_out=2.0)
    assert replay.chat([], TOOLS).tool_calls[0].name == "read_file"
    assert replay.chat([], TOOLS).content == "bye"
    assert replay.usage.calls == 2 and replay.usage.cost_usd > 0
    with pytest.raises(ModelError, match="no reply left"):
        replay.chat([], TOOLS)


def test_every_chat_model_says_its_context_window_as_the_protocol_declares(fake_server, tmp_path):
    srv = fake_server([{"content": "hi"}], n_ctx=4096)
    path = tmp_path / "rec.jsonl"
    recording = RecordingModel(chat_model(srv), path)
    assert recording.chat([{"role": "user", "content": "hi"}]).content == "hi"
    replay = ReplayModel(path)
    models = [chat_model(srv), recording, replay]
    assert all(isinstance(m, ChatModel) for m in models)
    assert [m.context_window for m in models] == [4096, 4096, None]  # a recording does not know


def test_replay_of_a_bad_file_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"reply": {}}\nnot json\n')
    with pytest.raises(ConfigError, match="bad.jsonl:2"):
        ReplayModel(path)


def test_endpoint_embedder(fake_server):
    srv = fake_server([])
    emb = OpenAIEmbedder(base_url=srv.url, api_key=None, model="emb")
    vecs = emb.embed(["hello world", "hello world", "something else entirely"])
    assert len(vecs) == 3 and vecs[0] == vecs[1] and vecs[0] != vecs[2]
    assert emb.dim == len(vecs[0]) and emb.name == "openai:emb"
