"""The one structured-answer helper: schema from the model, pick by name, one re-ask, typed result."""

from __future__ import annotations

import json

from agent_cli.agent.adapt.replan import REVISION
from agent_cli.agent.ask.facts import FACTS
from agent_cli.agent.ask.planner import PLAN
from agent_cli.agent.ask.structured import Answer, Failure, ask, schema
from agent_cli.agent.judge.verifier import VERDICT
from agent_cli.core.models import ModelVerdict, SubmittedPlan
from agent_cli.llm.openai.chat import OpenAIChat

ASK = [{"role": "system", "content": "rules"}, {"role": "user", "content": "GOAL:\nship it"}]
GOOD = {"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "done"}}
BAD = {"tool": "submit_verdict", "args": {"verdict": "maybe", "reason": "unsure"}}


def model_for(server) -> OpenAIChat:
    return OpenAIChat(model="fake-model", base_url=server.url, api_key=None, backoff_s=0.01)


def test_invalid_arguments_are_asked_for_once_more_with_the_error(fake_server):
    srv = fake_server([BAD, GOOD])
    logged: list[dict] = []
    got = ask(model_for(srv), ASK, VERDICT, log=logged.append)
    assert isinstance(got, Answer) and got.requests == 2
    assert got.value == ModelVerdict(verdict="pass", reason="done")
    first, second = srv.chat_requests
    assert first["messages"] == ASK
    again = second["messages"]
    assert again[-1] == ASK[-1]  # the goal stays last
    assert again[-2]["content"].startswith(
        "Your previous verdict was rejected: invalid verdict at verdict: Input should be "
    )
    assert [r["type"] for r in logged] == ["request", "reply", "request", "reply"]
    assert logged[2]["messages"] == again


def test_a_second_bad_reply_is_a_typed_failure(fake_server):
    srv = fake_server([BAD, BAD])
    got = ask(model_for(srv), ASK, VERDICT)
    assert isinstance(got, Failure) and got.requests == 2 and got.refused is None
    assert got.error.startswith("invalid verdict at verdict")
    assert len(srv.chat_requests) == 2


def test_a_call_of_another_tool_is_malformed(fake_server):
    other = {"tool_calls": [{"name": "write_file", "arguments": '{"verdict": "pass"}'}]}
    srv = fake_server([other, other])
    got = ask(model_for(srv), ASK, VERDICT)
    assert isinstance(got, Failure)
    assert got.error == "the reply called write_file instead of submit_verdict"
    assert "instead of submit_verdict" in srv.chat_requests[1]["messages"][-2]["content"]


def test_the_call_is_picked_by_name_not_position(fake_server):
    calls = [
        {"name": "write_file", "arguments": "{}"},
        {"name": "submit_verdict", "arguments": '{"verdict": "fail", "reason": "r"}'},
    ]
    srv = fake_server([{"tool_calls": calls}])
    got = ask(model_for(srv), ASK, VERDICT)
    assert isinstance(got, Answer) and got.value.verdict == "fail" and got.requests == 1


def test_a_check_refusal_is_asked_again_and_the_refused_value_kept(fake_server):
    srv = fake_server([GOOD, GOOD])
    got = ask(model_for(srv), ASK, VERDICT, check=lambda v: f"no {v.verdict} yet")
    assert isinstance(got, Failure) and got.error == "no pass yet"
    assert got.refused == ModelVerdict(verdict="pass", reason="done")
    assert "rejected: no pass yet" in srv.chat_requests[1]["messages"][-2]["content"]


def test_the_schema_sent_is_the_models_own(fake_server):
    srv = fake_server([GOOD])
    ask(model_for(srv), ASK, VERDICT)
    [tool] = srv.chat_requests[0]["tools"]
    assert tool["function"]["name"] == "submit_verdict"
    assert tool["function"]["parameters"] == schema(ModelVerdict)
    for form in (PLAN, REVISION, FACTS, VERDICT):
        assert form.tool()["function"]["parameters"] == schema(form.model)


def test_the_wire_schemas_are_plain_json_schema_with_their_bounds():
    texts = {name: json.dumps(schema(f.model)) for name, f in [("plan", PLAN), ("rev", REVISION)]}
    texts["facts"], texts["verdict"] = (
        json.dumps(schema(FACTS.model)),
        json.dumps(schema(VERDICT.model)),
    )
    for text in texts.values():
        assert "$ref" not in text and "$defs" not in text and '"title"' not in text
        assert '"default"' not in text and '"description"' not in text
    plan = schema(SubmittedPlan)
    assert plan["required"] == ["goal", "tasks", "success_criteria"]
    tasks = plan["properties"]["tasks"]
    assert (tasks["minItems"], tasks["maxItems"]) == (1, 30)
    item = tasks["items"]
    assert item["required"] == ["goal", "acceptance", "acceptance_cmd"]
    assert item["properties"]["goal"] == {"type": "string", "maxLength": 600}
    assert {"type": "null"} in item["properties"]["acceptance_cmd"]["anyOf"]
    revision = schema(REVISION.model)
    assert revision["required"] == ["keep"] and revision["properties"]["tasks"]["items"] == item
    assert revision["properties"]["tasks"]["maxItems"] == 30
    facts = schema(FACTS.model)["properties"]["facts"]
    assert facts["maxItems"] == 10 and facts["items"]["required"] == ["text", "files"]
    assert schema(VERDICT.model)["properties"]["verdict"] == {
        "type": "string",
        "enum": ["pass", "fail"],
    }


def test_a_server_held_to_the_schema_gets_the_same_schema(fake_server):
    # llama.cpp refuses the named tool_choice and answers "required" with text: structured output
    plan = {"goal": "g", "tasks": [{"goal": "t", "acceptance": "", "acceptance_cmd": None}]}
    srv = fake_server(
        [{"tool": "submit_plan", "args": plan}] * 3,
        required_choice="ignore",
        object_choice="refuse",
    )
    got = ask(model_for(srv), ASK, PLAN)
    assert isinstance(got, Answer) and got.value.tasks[0].goal == "t"
    formats = [r["response_format"] for r in srv.chat_requests if "response_format" in r]
    assert formats[0]["json_schema"]["schema"] == schema(SubmittedPlan)
