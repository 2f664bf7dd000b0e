"""One fake server for many runs: each request answered from the script of the goal it ends with."""

from __future__ import annotations

import json

from agent_cli.llm.fake.routes import ByGoal


def request(*contents: str) -> dict:
    return {"messages": [{"role": "user", "content": c} for c in contents]}


def test_each_run_gets_its_own_replies_in_order():
    router = ByGoal(
        {
            "Create a.txt": [{"content": "a1"}, {"content": "a2"}],
            "Create b.txt": [{"content": "b1"}],
        }
    )
    assert router(request("GOAL:\nCreate a.txt"))["content"] == "a1"
    assert router(request("GOAL:\nCreate b.txt"))["content"] == "b1"
    assert router(request("GOAL:\nCreate a.txt"))["content"] == "a2"


def test_the_goal_that_comes_last_wins_over_one_recalled_earlier():
    router = ByGoal({"Create a.txt": [{"content": "a"}], "Create b.txt": [{"content": "b"}]})
    text = "<retrieved_memory>an earlier run: Create a.txt</retrieved_memory>\nGOAL:\nCreate b.txt"
    assert router(request(text))["content"] == "b"


def test_a_finished_script_and_an_unknown_goal_answer_500():
    router = ByGoal({"Create a.txt": [{"content": "a"}]})
    router(request("Create a.txt"))
    assert router(request("Create a.txt"))["status"] == 500
    assert "no script" in json.loads(router(request("something else"))["body"])["error"]["message"]


def test_a_delay_range_is_drawn_for_each_reply_and_a_step_keeps_its_own():
    router = ByGoal(
        {"g": [{"content": "x"}, {"content": "y", "delay": 0.0}, {"content": "z"}]},
        delay=(1.0, 2.0),
    )
    first, second, third = (router(request("g")) for _ in range(3))
    assert 1.0 <= first["delay"] <= 2.0 and 1.0 <= third["delay"] <= 2.0
    assert second["delay"] == 0.0
