"""Answers no model wrote: a page (a proxy's or a captive portal's sign-in, a web UI at the
base URL) answering a chat request with HTTP 200, and a reply the provider's content filter
left empty. Each is asked once more, then ends the command with its own fix (the endpoint's
address, the filter), at planning and mid-run; never "try a clearer goal", "malformed replies"
or "no tool call"."""

from __future__ import annotations

import pytest

from agent_cli.core.errors import MalformedReply, ModelError
from agent_cli.llm.openai.chat import OpenAIChat
from reliability.relkit import GOAL, events, finish, make_done, no_facts, plan, read_state, task
from reliability.relkit import repo_with as make_repo

ASK = [{"role": "user", "content": "go"}]
SIGN_IN = (
    "<!doctype html><html><head><title>Proxy</title><style>body { color: red }</style>"
    "<script>var next = 1 < 2;</script></head><body><h1>Please sign in to the proxy</h1>"
    "</body></html>"
)
PAGE = {"raw": SIGN_IN, "headers": {"Content-Type": "text/html"}}
FILTERED = {"finish_reason": "content_filter"}  # no text, no tool call
SAID = {
    "page": "answered with a page or text, not a chat completion: 'Proxy Please sign in to the proxy'",
    "filter": "the provider's content filter at",
}
FIX = {
    "page": "check that --base-url points at a Chat Completions API",
    "filter": "reword the goal, or ask the provider about its filter",
}
STEPS = {"page": PAGE, "filter": FILTERED}


def _model(srv, **kw) -> OpenAIChat:
    return OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01, **kw)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("kind", list(STEPS))
def test_it_is_asked_once_more_then_the_endpoints_error_stands(fake_server, kind, stream):
    srv = fake_server([STEPS[kind]] * 4)
    retries: list[tuple[int, int]] = []
    model = _model(srv, stream=stream, on_retry=lambda n, of, d, why: retries.append((n, of)))
    with pytest.raises(ModelError) as caught:
        model.chat(ASK)
    assert not isinstance(caught.value, MalformedReply)  # not the model's: nothing counts it
    assert SAID[kind] in caught.value.message and FIX[kind] in caught.value.hint
    # once more only, and the notice says so: retry 1 of 1, not of the run's four
    assert len(srv.chat_requests) == 2 and retries == [(1, 1)]


@pytest.mark.parametrize("kind", list(STEPS))
def test_a_passing_one_is_followed_by_the_reply(fake_server, kind):
    srv = fake_server([STEPS[kind], {"content": "fine"}])
    assert _model(srv).chat(ASK).content == "fine"


def test_a_filtered_reply_that_holds_text_is_that_text(fake_server):
    srv = fake_server([{"content": "partial", "finish_reason": "content_filter"}])
    reply = _model(srv).chat(ASK)
    assert (reply.content, reply.finish_reason) == ("partial", "content_filter")


@pytest.mark.parametrize("kind", list(STEPS))
def test_at_planning_it_ends_the_run_with_its_own_fix(
    agent_in_process, fake_server, tmp_path, kind
):
    repo = make_repo(tmp_path / "repo")
    srv = fake_server([STEPS[kind]] * 4)
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    done = events(proc.stdout)[-1]["message"]
    assert SAID[kind] in done and FIX[kind] in done, done
    assert "clearer goal" not in done and "function tools" not in done
    assert len(srv.chat_requests) == 2


@pytest.mark.parametrize("kind", list(STEPS))
def test_mid_run_it_ends_the_run_with_its_own_fix(agent_in_process, fake_server, tmp_path, kind):
    repo = make_repo(tmp_path / "repo")
    srv = fake_server([plan(task())] + [STEPS[kind]] * 10)
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    done = events(proc.stdout)[-1]["message"]
    assert SAID[kind] in done and FIX[kind] in done and "agent run --resume" in done, done
    assert "malformed" not in done and "no tool call" not in proc.stdout
    assert len(srv.chat_requests) == 3  # the plan, then the one asked once more
    assert read_state(repo)["status"] == "failed"


def test_mid_run_a_passing_page_costs_no_step(agent_in_process, fake_server, tmp_path):
    repo = make_repo(tmp_path / "repo")
    srv = fake_server([plan(task()), PAGE, make_done(), finish(), no_facts()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_state(repo)["steps"] == 2
    assert "Please sign in to the proxy" in proc.stderr  # the retry's notice
