"""submit_facts arguments: what is kept, and that anything malformed keeps nothing."""

import pytest

from agent_cli.agent.ask.facts import FACTS, ask_facts
from agent_cli.agent.ask.structured import Invalid, read
from agent_cli.agent.learn.learning import Learned
from agent_cli.core.errors import AgentError
from agent_cli.core.models import MAX_FACTS, ChatReply, Fact, Facts, ToolCall
from agent_cli.llm.openai.chat import OpenAIChat


def parsed(arguments: str) -> list[Fact] | Invalid:
    reply = ChatReply(tool_calls=[ToolCall(id="c", name="submit_facts", arguments=arguments)])
    got = read(reply, FACTS)
    return got.facts if isinstance(got, Facts) else got


def test_well_formed_facts_are_kept_with_their_repository_files():
    found = parsed(
        '{"facts": [{"text": " Tests  run with\\nmake check ", '
        '"files": ["Makefile", "/etc/passwd", "../x", ".git/config"]}]}'
    )
    assert isinstance(found, list)
    assert [(f.text, f.files) for f in found] == [("Tests run with make check", ["Makefile"])]


def test_malformed_replies_are_invalid():
    for bad in (
        "not json",
        "[]",
        '{"facts": "x"}',
        '{"facts": [{"files": []}]}',
        '{"facts": [{"text": ""}]}',
        '{"facts": [{"text": 3}]}',
        '{"facts": [{"text": "t", "files": [3]}]}',
    ):
        assert isinstance(parsed(bad), Invalid), bad


def test_more_than_ten_facts_are_invalid():
    many = (
        '{"facts": [' + ",".join(f'{{"text": "fact {i}", "files": []}}' for i in range(30)) + "]}"
    )
    got = parsed(many)
    assert isinstance(got, Invalid) and f"at most {MAX_FACTS} items" in got.reason


def test_a_second_malformed_reply_is_an_error_that_names_it(fake_server):
    bad = {"tool_calls": [{"name": "submit_facts", "arguments": '{"facts": "x"}'}]}
    srv = fake_server([bad, bad])
    model = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01)
    logged: list[dict] = []
    ask = [{"role": "system", "content": "s"}, {"role": "user", "content": "goal"}]
    with pytest.raises(AgentError, match="submit_facts was not valid"):
        ask_facts(model, ask, logged.append)
    assert len(srv.chat_requests) == 2
    assert [r["type"] for r in logged] == ["request", "reply", "request", "reply"]


def test_a_fix_is_what_a_task_that_had_failed_passed_with():
    learned = Learned()
    learned.passed(0, "first task", "nothing failed")
    learned.failed(1, ["tests/t.py::test_a failed"])
    learned.failed(1, ["tests/t.py::test_a failed", "tests/t.py::test_b failed"])
    learned.passed(1, "second task", "fixed both")
    assert [(f.task, f.signatures, f.summary) for f in learned.fixes] == [
        ("second task", ["tests/t.py::test_a failed", "tests/t.py::test_b failed"], "fixed both")
    ]
    assert Learned.from_dict(learned.to_dict()).to_dict() == learned.to_dict()
