"""Streamed replies over real SSE from the loopback server: assembly, fallbacks, cuts, silence."""

import json

import pytest

from agent_cli.core.errors import ModelError
from agent_cli.llm.base import function_tool
from agent_cli.llm.openai.chat import OpenAIChat

TOOLS = [
    function_tool(
        "write_file", "Write.", {"path": {"type": "string"}, "content": {"type": "string"}}
    )
]
ASK = [{"role": "user", "content": "go"}]


def chat_model(server, **kw):
    return OpenAIChat(
        **{"model": "fake-model", "base_url": server.url, "api_key": None, "backoff_s": 0.01, **kw}
    )


def test_text_and_tool_calls_are_assembled_from_streamed_deltas(fake_server):
    args = {"path": "a.py", "content": "def f():\n    return 'x' * 3\n"}
    srv = fake_server(
        [
            {
                "content": "I will write the file now.",
                "tool_calls": [
                    {"name": "write_file", "arguments": args},
                    {"name": "write_file", "arguments": {"path": "b", "content": ""}},
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7},
            }
        ]
    )
    deltas = []
    reply = chat_model(srv, on_text=deltas.append).chat(ASK, TOOLS)
    sent = srv.chat_requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert reply.content == "I will write the file now."
    assert len(deltas) > 1 and "".join(deltas) == reply.content
    assert [json.loads(c.arguments) for c in reply.tool_calls] == [
        args,
        {"path": "b", "content": ""},
    ]
    assert [c.id for c in reply.tool_calls] == ["call_100", "call_101"]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (50, 7)
    assert reply.finish_reason == "tool_calls"


@pytest.mark.parametrize("mode", ["whole", "refuse"])
def test_a_server_that_does_not_stream_gets_whole_requests_for_the_rest_of_the_run(
    fake_server, mode
):
    srv = fake_server([{"content": "one"}, {"content": "two"}], stream=mode)
    deltas = []
    m = chat_model(srv, on_text=deltas.append)
    assert m.chat(ASK).content == "one" and m.chat(ASK).content == "two"
    streamed = [bool(r.get("stream")) for r in srv.chat_requests]
    # "whole": the first streamed request is answered whole; "refuse": it is refused with a 400.
    assert streamed == ([True, False] if mode == "whole" else [True, False, False])
    assert m.streaming is False and deltas == []


def test_a_stream_cut_mid_reply_is_retried(fake_server):
    srv = fake_server(
        [
            {"tool": "write_file", "args": {"path": "a", "content": "x" * 50}, "cut": 3},
            {"tool": "write_file", "args": {"path": "a", "content": "ok"}},
        ]
    )
    retries = []
    reply = chat_model(srv, on_retry=lambda n, of, d, why: retries.append(why)).chat(ASK, TOOLS)
    assert json.loads(reply.tool_calls[0].arguments)["content"] == "ok"
    assert len(retries) == 1 and "broke mid-reply" in retries[0]


def test_streams_cut_every_time_end_in_a_clear_error(fake_server):
    srv = fake_server([{"content": "never finished", "cut": 2}] * 3)
    with pytest.raises(ModelError, match="kept breaking off its replies"):
        chat_model(srv, max_retries=2).chat(ASK)
    assert len(srv.chat_requests) == 3


def test_a_slow_stream_is_not_timed_out_while_chunks_keep_coming(fake_server):
    # 12 chunks 0.15 s apart: 1.8 s in all, far over the 0.6 s timeout, never silent that long.
    srv = fake_server([{"content": "a slow reply " * 4, "chunk_delay": 0.15}])
    retries = []
    reply = chat_model(srv, timeout_s=0.6, on_retry=lambda *a: retries.append(a)).chat(ASK)
    assert reply.content == "a slow reply " * 4 and retries == []


def test_silence_mid_stream_times_out_and_the_retry_waits_for_the_server(fake_server):
    srv = fake_server(
        [{"content": "stalls after the first words", "chunk_delay": 1.2}, {"content": "quick"}]
    )
    retries = []
    m = chat_model(srv, timeout_s=0.4, on_retry=lambda n, of, d, why: retries.append(why))
    assert m.chat(ASK).content == "quick"
    assert len(retries) == 1 and "timed out" in retries[0]
    assert srv.max_in_flight == 1  # the retry was not sent while the abandoned reply was running
    assert any(r["path"] == "/slots" for r in srv.requests)


def test_a_whole_reply_timeout_waits_until_the_server_is_idle(fake_server):
    srv = fake_server([{"delay": 1.0, "content": "late"}, {"content": "fast"}], stream="whole")
    m = chat_model(srv, timeout_s=0.3, stream=False)
    assert m.chat(ASK).content == "fast"
    assert srv.max_in_flight == 1


def test_a_server_refusing_stream_options_still_streams_without_them(fake_server):
    srv = fake_server([{"content": "one"}, {"content": "two"}], stream="no_usage")
    deltas = []
    m = chat_model(srv, on_text=deltas.append)
    assert m.chat(ASK).content == "one" and m.chat(ASK).content == "two"
    assert [("stream_options" in r, r.get("stream")) for r in srv.chat_requests] == [
        (True, True),
        (False, True),
        (False, True),
    ]
    assert m.streaming and "".join(deltas) == "onetwo"


def test_a_stream_that_keeps_ending_unfinished_is_asked_for_whole_after_one_retry(fake_server):
    # No finish_reason and no [DONE], in good order: a retry streamed once, then whole.
    srv = fake_server([{"content": "never said", "unfinished": True}] * 2 + [{"content": "whole"}])
    retries = []
    m = chat_model(srv, max_retries=4, on_retry=lambda n, of, d, why: retries.append(why))
    assert m.chat(ASK).content == "whole"
    assert [bool(r.get("stream")) for r in srv.chat_requests] == [True, True, False]
    assert len(retries) == 2


@pytest.mark.parametrize(
    "page",
    [
        {"raw": "<html><body>502 upstream busy</body></html>"},
        {"raw": json.dumps({"error": {"message": "overloaded", "code": 503}})},
    ],
)
def test_a_page_in_place_of_a_stream_does_not_turn_streaming_off(fake_server, page):
    # Only a whole completion shows that a server does not stream: a proxy's page or an
    # error object in a 200 says nothing of it, so the next request is streamed again.
    srv = fake_server([page, {"content": "streamed"}])
    deltas = []
    m = chat_model(srv, on_text=deltas.append, max_retries=0)
    with pytest.raises(ModelError, match="not a chat completion|overloaded"):
        m.chat(ASK)
    assert m.streaming and m.chat(ASK).content == "streamed"
    assert [bool(r.get("stream")) for r in srv.chat_requests] == [True, True] and deltas


def test_a_stream_dropped_after_its_finish_reason_is_not_asked_again(fake_server):
    # Dropped after the finish chunk, before its usage and [DONE]: the reply was whole.
    srv = fake_server([{"content": "all of it", "cut": 5}, {"content": "again"}])
    retries = []
    reply = chat_model(srv, on_retry=lambda *a: retries.append(a)).chat(ASK)
    assert (reply.content, reply.finish_reason) == ("all of it", "stop")
    assert retries == [] and len(srv.chat_requests) == 1


def test_a_stream_with_no_choices_is_a_reply_with_no_choices(fake_server):
    srv = fake_server([{"no_choices": True}])
    reply = chat_model(srv).chat(ASK, TOOLS)
    assert srv.chat_requests[0]["stream"] is True
    assert reply.finish_reason == "no_choices" and not reply.tool_calls
