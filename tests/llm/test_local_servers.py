"""The client against the loopback server behaving like llama.cpp, vLLM and Ollama."""

import json
import threading

import pytest

from agent_cli.core.errors import ContextOverflow, ModelError
from agent_cli.llm.base import force, function_tool
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.llm.wire.forcing import schema_format

PLAN = function_tool(
    "submit_plan", "Plan.", {"goal": {"type": "string"}, "tasks": {"type": "array"}}
)
READ = function_tool("read_file", "Read.", {"path": {"type": "string"}})
ASK = [{"role": "user", "content": "plan it"}]
PLAN_ARGS = {"goal": "g", "tasks": [{"goal": "t"}]}


def chat_model(server, **kw):
    return OpenAIChat(
        **{"model": "fake-model", "base_url": server.url, "api_key": None, "backoff_s": 0.01, **kw}
    )


# -- forcing one tool -------------------------------------------------------------------------
def test_a_forced_single_tool_is_sent_as_required_which_llama_cpp_honours(fake_server):
    # Like llama.cpp: the object form is ignored ("Wrong type supplied ...", then auto).
    srv = fake_server([{"tool": "submit_plan", "args": PLAN_ARGS}], object_choice="ignore")
    reply = chat_model(srv).chat(ASK, [PLAN], force("submit_plan"))
    assert reply.tool_calls[0].name == "submit_plan"
    assert srv.chat_requests[0]["tool_choice"] == "required"


def test_a_refused_required_falls_back_to_the_object_form_for_the_run(fake_server):
    srv = fake_server([{"tool": "submit_plan", "args": PLAN_ARGS}] * 2, required_choice="refuse")
    m = chat_model(srv)
    assert m.chat(ASK, [PLAN], force("submit_plan")).tool_calls
    assert m.chat(ASK, [PLAN], force("submit_plan")).tool_calls
    choices = [r["tool_choice"] for r in srv.chat_requests]
    named = {"type": "function", "function": {"name": "submit_plan"}}
    assert choices == ["required", named, named]  # refused once, then remembered


def test_an_ignored_form_is_switched_at_once_and_kept(fake_server):
    srv = fake_server([{"tool": "submit_plan", "args": PLAN_ARGS}] * 2, required_choice="ignore")
    m = chat_model(srv)
    reply = m.chat(ASK, [PLAN], force("submit_plan"))  # "required" answered as if auto
    assert reply.tool_calls and reply.usage.calls == 2  # the wasted reply is counted too
    assert m.chat(ASK, [PLAN], force("submit_plan")).tool_calls
    named = {"type": "function", "function": {"name": "submit_plan"}}
    assert [r["tool_choice"] for r in srv.chat_requests] == ["required", named, named]


def test_when_no_tool_choice_form_gets_the_call_the_arguments_come_as_structured_output(
    fake_server,
):
    # Like llama.cpp with a small model: "required" lets it write text until the reply ends,
    # the object form is ignored; a json_schema response_format leaves it only the arguments.
    srv = fake_server(
        [{"tool": "submit_plan", "args": PLAN_ARGS}] * 2,
        required_choice="ignore",
        object_choice="ignore",
    )
    m = chat_model(srv)
    reply = m.chat(ASK, [PLAN], force("submit_plan"))
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("submit_plan", PLAN_ARGS)
    ]
    assert reply.content is None
    assert m.chat(ASK, [PLAN], force("submit_plan")).tool_calls  # remembered: one request
    third, fourth = srv.chat_requests[2:]
    assert third == fourth and third["tools"] == [PLAN] and third["tool_choice"] == "none"
    assert third["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "submit_plan", "schema": PLAN["function"]["parameters"]},
    }


def test_a_server_that_refuses_tool_choice_none_gets_the_schema_without_the_tools(fake_server):
    srv = fake_server(
        [{"tool": "submit_plan", "args": PLAN_ARGS}],
        required_choice="ignore",
        object_choice="ignore",
        none_choice="refuse",
    )
    assert chat_model(srv).chat(ASK, [PLAN], force("submit_plan")).tool_calls
    refused, bare = srv.chat_requests[2:]
    assert refused["tool_choice"] == "none" and "tools" not in bare and "tool_choice" not in bare
    assert bare["response_format"] == refused["response_format"]


def test_a_call_of_any_tool_goes_through_the_form_the_run_learned(fake_server):
    srv = fake_server(
        [
            {"tool": "submit_plan", "args": PLAN_ARGS},
            {"tool": "read_file", "args": {"path": "a.py"}},
        ],
        required_choice="ignore",
        object_choice="ignore",
    )
    m = chat_model(srv)
    assert m.chat(ASK, [PLAN], force("submit_plan")).tool_calls  # learns the schema form
    reply = m.chat(ASK, [PLAN, READ], "required")
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("read_file", {"path": "a.py"})
    ]
    sent = srv.chat_requests[-1]
    assert sent["tools"] == [PLAN, READ] and sent["tool_choice"] == "none"  # the same prompt
    assert [
        option["properties"]["name"]
        for option in sent["response_format"]["json_schema"]["schema"]["anyOf"]
    ] == [{"const": "submit_plan"}, {"const": "read_file"}]


def test_required_among_several_tools_is_sent_as_is_and_as_auto_when_refused(fake_server):
    srv = fake_server([{"tool": "read_file", "args": {"path": "a.py"}}] * 2)
    assert chat_model(srv).chat(ASK, [PLAN, READ], "required").tool_calls
    assert srv.chat_requests[0]["tool_choice"] == "required"
    refusing = fake_server(
        [{"tool": "read_file", "args": {"path": "a.py"}}], required_choice="refuse"
    )
    assert chat_model(refusing).chat(ASK, [PLAN, READ], "required").tool_calls
    assert [r["tool_choice"] for r in refusing.chat_requests] == ["required", "auto"]


def test_structured_output_is_not_shown_as_the_models_words(fake_server):
    srv = fake_server(
        [{"tool": "submit_plan", "args": PLAN_ARGS}],
        required_choice="ignore",
        object_choice="ignore",
    )
    shown: list[str] = []
    reply = chat_model(srv, on_text=shown.append).chat(ASK, [PLAN], force("submit_plan"))
    assert reply.tool_calls and srv.chat_requests[-1]["stream"] is True
    assert "Sure, here is" in "".join(shown) and '"tasks"' not in "".join(shown)


def test_a_refused_json_schema_after_two_ignored_forms_leaves_the_reply_without_a_call(fake_server):
    srv = fake_server(
        [{"tool": "submit_plan", "args": PLAN_ARGS}],
        required_choice="ignore",
        object_choice="ignore",
        schema_choice="refuse",
    )
    m = chat_model(srv)
    reply = m.chat(ASK, [PLAN], force("submit_plan"))
    assert not reply.tool_calls and reply.content  # the text stands; no error, no loop
    assert [r.get("response_format", r["tool_choice"]) for r in srv.chat_requests[:3]] == [
        "required",
        {"type": "function", "function": {"name": "submit_plan"}},
        schema_format([PLAN], "submit_plan"),
    ]  # each form once, then the first for the run
    assert srv.chat_requests[3]["tool_choice"] == "required"
    assert not m.chat(ASK, [PLAN], force("submit_plan")).tool_calls
    assert srv.chat_requests[-1]["tool_choice"] == "required" and len(srv.chat_requests) == 5


def test_several_tools_with_auto_are_sent_as_given(fake_server):
    srv = fake_server([{"content": "hm"}])
    chat_model(srv).chat(ASK, [PLAN, READ], "auto")
    assert srv.chat_requests[0]["tool_choice"] == "auto"


# -- calls written as text --------------------------------------------------------------------
@pytest.mark.parametrize(
    "content",
    [
        'Let me read it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
        '{"name": "read_file", "arguments": {"path": "a.py"}}',
        '```json\n{"name": "read_file", "parameters": {"path": "a.py"}}\n```',
        '[{"function": {"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}}]',
    ],
)
def test_a_call_written_in_content_is_parsed_as_the_call(fake_server, content):
    srv = fake_server([{"content": content}])
    reply = chat_model(srv).chat(ASK, [PLAN, READ], "auto")
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("read_file", {"path": "a.py"})
    ]
    assert reply.content == ("Let me read it." if content.startswith("Let") else None)


def test_text_naming_no_offered_tool_stays_text(fake_server):
    srv = fake_server(
        [
            {"content": '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'},
            {"content": '{"path": "a.py"}'},
        ]
    )
    m = chat_model(srv)
    assert not m.chat(ASK, [PLAN, READ], "auto").tool_calls
    assert not m.chat(ASK, [PLAN, READ], "auto").tool_calls  # bare arguments need a forced tool


def test_bare_arguments_of_the_forced_tool_are_taken_as_its_call(fake_server):
    srv = fake_server([{"content": json.dumps(PLAN_ARGS)}])
    reply = chat_model(srv).chat(ASK, [PLAN], force("submit_plan"))
    assert reply.tool_calls[0].name == "submit_plan"
    assert json.loads(reply.tool_calls[0].arguments) == PLAN_ARGS


# -- echoed broken calls and fast failures ----------------------------------------------------
def _sent_after_one_call(fake_server, name: str, arguments: str, result: str) -> list[dict]:
    """The messages a llama.cpp-like server (500 on a broken echo) got after one call of
    `name` with `arguments` that answered `result`; the reply is read as it should be."""
    srv = fake_server([{"content": "fine"}], strict_echo=True)
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]
    assert chat_model(srv).chat(messages, [READ]).content == "fine"
    sent: list[dict] = srv.chat_requests[0]["messages"]
    return sent


def test_broken_echoed_arguments_are_sent_as_empty_json_with_the_raw_text_in_the_result(
    fake_server,
):
    srv = fake_server([{"content": "fine"}], strict_echo=True)  # llama.cpp: 500 on broken echoes
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"pattern":'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "error: not valid JSON"},
        {"role": "tool", "tool_call_id": "c2", "content": "1: a"},
    ]
    assert chat_model(srv).chat(messages, [READ]).content == "fine"
    sent = srv.chat_requests[0]["messages"]
    assert [c["function"]["arguments"] for c in sent[1]["tool_calls"]] == ["{}", '{"path": "a"}']
    assert '{"pattern":' in sent[2]["content"] and sent[3]["content"] == "1: a"
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"pattern":'  # caller's copy


@pytest.mark.parametrize("arguments", ['["a.py"]', '"a.py"', "null", "42"])
def test_echoed_arguments_that_are_json_but_no_object_are_sent_as_an_empty_object(
    fake_server, arguments
):
    # A chat template reads the arguments' items: llama.cpp answers 500 to a list or a string.
    error = "error: the arguments must be an object"
    sent = _sent_after_one_call(fake_server, "read_file", arguments, error)
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert f"not a valid JSON object: {arguments}" in sent[2]["content"]


def test_echoed_empty_arguments_are_an_empty_object_without_a_note(fake_server):
    # A call without arguments (a stream that sent none) is no mistake to point out.
    sent = _sent_after_one_call(fake_server, "list_dir", "", "a.py 10")
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert sent[2]["content"] == "a.py 10"


def test_a_fast_500_is_not_sent_again_as_it_was(fake_server):
    body = json.dumps({"error": {"message": "Failed to parse tool call arguments as JSON"}})
    srv = fake_server([{"status": 500, "body": body}] * 5)
    retries: list[tuple[int, int]] = []
    model = chat_model(srv, max_retries=4, on_retry=lambda n, of, d, why: retries.append((n, of)))
    with pytest.raises(ModelError, match="kept failing with 500.*not sent again") as e:
        model.chat(ASK)
    assert "agent run --resume" in e.value.hint
    streamed = [bool(r.get("stream")) for r in srv.chat_requests]
    assert streamed == [True, False]  # tried once whole (what some servers fail on), then stop
    assert retries == [(1, 1)]  # and the notice said it was the one retry, not 1 of 4


@pytest.mark.parametrize("status", [529, 520, 521, 522, 523, 524])
def test_an_overloaded_or_cloudflare_status_is_retried_however_fast(fake_server, status):
    # 529 "overloaded" and Cloudflare's 52x say the server is busy or down, not that the
    # request is wrong: retried with backoff like a 503, not judged by how fast they came.
    busy = {"status": status, "body": json.dumps({"error": {"message": "Overloaded"}})}
    srv = fake_server([busy, busy, busy, {"content": "done"}])
    assert chat_model(srv, max_retries=4).chat(ASK).content == "done"
    assert len(srv.chat_requests) == 4


def test_streamed_requests_rescued_twice_by_whole_ones_stop_streaming(fake_server):
    fail = {"status": 500, "body": "{}"}
    srv = fake_server([fail, {"content": "a"}, fail, {"content": "b"}, {"content": "c"}])
    m = chat_model(srv)
    assert [m.chat(ASK).content for _ in range(3)] == ["a", "b", "c"]
    assert [bool(r.get("stream")) for r in srv.chat_requests] == [True, False, True, False, False]


# -- the context window -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "behaviour, source",
    [
        ({"n_ctx": 4096}, "llama.cpp /props"),
        ({"max_model_len": 8192}, "vLLM /v1/models"),
        ({"ollama_ctx": 16384}, "Ollama /api/show"),
        ({}, "the context_window setting"),
    ],
)
def test_the_context_window_is_learned_from_the_server(fake_server, behaviour, source):
    srv = fake_server([], **behaviour)
    m = chat_model(srv, context_window=32000)
    expected = next(iter(behaviour.values()), 32000)
    assert (m.context_window, m.context_source) == (expected, source)


def test_the_window_probes_go_out_at_once_and_the_first_in_order_wins():
    from agent_cli.llm.server.info import Unreachable, learn_context_window

    together = threading.Barrier(3, timeout=10)  # passed only if all three are out at once

    def fetch(url: str, body: dict | None, timeout: float):
        if not url.endswith("/api/show"):
            together.wait()
        if url.endswith("/v1/models"):
            return {"data": [{"id": "m", "max_model_len": 8192}]}
        if url.endswith("/api/ps"):
            return {"models": [{"name": "m", "context_length": 2048}]}
        return None  # /props: not llama.cpp

    assert learn_context_window(fetch, "http://10.1.2.3:8000/v1", "m") == (8192, "vLLM /v1/models")

    def unreachable(url: str, body: dict | None, timeout: float):
        raise Unreachable("refused")

    assert learn_context_window(unreachable, "http://10.1.2.3:8000/v1", "m") is None


def test_max_tokens_fits_a_small_window(fake_server):
    srv = fake_server([{"content": "ok"}], n_ctx=4096)
    chat_model(srv, max_tokens=4096).chat(ASK)
    assert srv.chat_requests[0]["max_tokens"] == 1024  # a quarter of the window, not 4096


def test_a_context_overflow_is_a_typed_error_with_the_numbers(fake_server):
    srv = fake_server([{"content": "never"}], n_ctx=1024)
    big = [{"role": "user", "content": "x " * 3000}]
    with pytest.raises(ContextOverflow) as e:
        chat_model(srv, max_tokens=256).chat(big)
    assert e.value.window == 1024 and e.value.prompt_tokens > 1024
    assert "does not fit the context window of 1024 tokens" in e.value.message
    assert "-c N" in e.value.hint and len(srv.chat_requests) == 1  # not retried as it was


# Newer llama.cpp builds give the numbers only in the error object's fields.
FIELDS_ONLY = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4114,
        "n_ctx": 4096,
    }
}


@pytest.mark.parametrize("status", [400, 200])  # 200: an error object in place of a reply
def test_an_overflow_with_its_numbers_only_in_the_error_fields_gives_them(
    fake_server, tmp_path, status
):
    from agent_cli.llm.server.findings import Findings

    srv = fake_server([{"status": status, "body": json.dumps(FIELDS_ONLY)}], hide_window=True)
    Findings(tmp_path, srv.url, "fake-model").put("window", [32768, "llama.cpp /props"])
    m = chat_model(srv, max_tokens=256, cache_dir=tmp_path, stream=False)
    with pytest.raises(ContextOverflow) as e:
        m.chat(ASK)
    assert (e.value.prompt_tokens, e.value.window) == (4114, 4096)
    assert "(4114 tokens) does not fit the context window of 4096 tokens" in e.value.message
    assert m.context_window == 4096  # the server's window replaces the remembered one
    assert Findings(tmp_path, srv.url, "fake-model").get("window") == (
        True,
        [4096, "the server's overflow error"],
    )


def test_the_same_prompt_after_an_overflow_is_not_sent_again_as_if_cut(fake_server):
    # The error names no window, so a caller that fits to a guessed, smaller one may cut
    # nothing: the same request was sent again and ended "even after it was cut to fit".
    no_numbers = {"status": 400, "body": json.dumps({"error": {"message": "prompt is too long"}})}
    srv = fake_server([no_numbers, {"content": "ok"}])
    m = chat_model(srv, max_tokens=256)
    big = [{"role": "user", "content": "x " * 3000}]
    with pytest.raises(ContextOverflow):
        m.chat(big)
    with pytest.raises(ModelError) as e:
        m.chat(big)
    assert not isinstance(e.value, ContextOverflow)
    assert "could not be cut to fit" in e.value.message and "not sent again" in e.value.message
    assert "context_window" in e.value.hint
    assert len(srv.chat_requests) == 1
    assert m.chat(ASK).content == "ok"  # a prompt that was cut is sent


def test_a_vllm_overflow_caused_by_max_tokens_is_retried_once_with_a_reply_that_fits(fake_server):
    srv = fake_server([{"content": "ok"}, {"content": "ok"}], max_model_len=2000, hide_window=True)
    m = chat_model(srv, max_tokens=4096, context_window=100_000)  # it does not say its size
    assert m.chat([{"role": "user", "content": "y " * 1500}]).content == "ok"
    first, second = (r["max_tokens"] for r in srv.chat_requests)
    assert first == 4096 and second < 2000 - 750
    assert m.context_window == 2000  # learned from the error, so the next request fits at once
    assert m.chat([{"role": "user", "content": "y " * 1500}]).content == "ok"
    assert len(srv.chat_requests) == 3


def test_newer_vllm_wording_of_a_max_tokens_overflow_is_retried_once_with_a_reply_that_fits(
    fake_server,
):
    too_large = (
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum "
        "context length is 2000 tokens and your request has 1200 input tokens "
        "(4096 > 2000 - 1200). None"
    )
    refused = {"status": 400, "body": json.dumps({"object": "error", "message": too_large})}
    srv = fake_server([refused, {"content": "ok"}])
    m = chat_model(srv, max_tokens=4096, context_window=100_000, local=False)
    assert m.chat(ASK).content == "ok"
    first, second = (r["max_tokens"] for r in srv.chat_requests)
    assert first == 4096 and second <= 2000 - 1200


def test_a_reply_cut_at_the_length_limit_says_so(fake_server):
    srv = fake_server([{"content": "I think the next step is", "finish_reason": "length"}])
    assert chat_model(srv).chat(ASK, [READ], "auto").finish_reason == "length"


# -- cached tokens ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "step",
    [
        {
            "usage": {
                "prompt_tokens": 1000,
                "completion_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 800},
            }
        },
        {
            "usage": {"prompt_tokens": 1000, "completion_tokens": 10},
            "timings": {"cache_n": 800, "prompt_n": 200},
        },
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_cached_prompt_tokens_are_counted_and_priced(fake_server, step, stream):
    srv = fake_server([{"content": "a", **step}, {"content": "b", **step}])
    m = chat_model(srv, price_in=2.0, price_out=10.0, stream=stream)
    m.chat(ASK)
    reply = m.chat(ASK)
    assert reply.usage.cached_tokens == 800 and m.usage.cached_tokens == 1600
    assert reply.usage.cost_usd == pytest.approx((200 * 2.0 + 800 * 1.0 + 10 * 10.0) / 1e6)
    priced = chat_model(
        fake_server([{"content": "a", **step}]), price_in=2.0, price_out=10.0, price_cached=0.2
    )
    assert priced.chat(ASK).usage.cost_usd == pytest.approx((200 * 2 + 800 * 0.2 + 100) / 1e6)


@pytest.mark.parametrize("choice", ["submit_plan", "any", 3])
def test_a_tool_choice_no_server_accepts_is_refused_as_servers_do(fake_server, choice):
    # OpenAI and llama.cpp answer 400 to a tool_choice that is neither "none", "auto",
    # "required" nor the function object: the loopback server does too, so a request built
    # that way fails in the tests as it would for a user.
    srv = fake_server([{"tool": "submit_plan", "args": PLAN_ARGS}])
    with pytest.raises(ModelError, match="tool_choice|Invalid value"):
        chat_model(srv, max_retries=0).chat(ASK, [PLAN], choice)


def test_a_tool_call_left_unanswered_is_refused_as_servers_do(fake_server):
    # OpenAI answers 400 when an assistant's tool call has no tool message right after it;
    # the loopback server does too, so a request built that way fails in the tests.
    srv = fake_server([{"content": "ok"}])
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]}, *ASK]
    with pytest.raises(ModelError, match="did not have response messages: c1"):
        chat_model(srv, max_retries=0).chat(messages, [READ], "auto")
    stray = [*ASK, {"role": "tool", "tool_call_id": "c9", "content": "x"}]
    with pytest.raises(ModelError, match="role 'tool'"):
        chat_model(srv, max_retries=0).chat(stray, [READ], "auto")


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([{"role": "user", "content": None}], "expected a string, got null"),
        ([{"role": "assistant", "content": None}, *ASK], "expected a string, got null"),
        ([{"role": "robot", "content": "hi"}], "Invalid value: 'robot'"),
    ],
)
def test_a_message_no_server_accepts_is_refused_as_servers_do(fake_server, messages, error):
    srv = fake_server([{"content": "ok"}])
    with pytest.raises(ModelError, match=error):
        chat_model(srv, max_retries=0).chat(messages, None, None)
