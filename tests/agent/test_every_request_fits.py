"""Every request the harness sends fits the model's window, whatever its role, and nothing the
model sent comes back to it unbounded."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agent.test_loop import run_in_process
from agent_cli.agent.ask.structured import Form, with_error
from agent_cli.agent.ask.window import (
    NOTE,
    Window,
    fit_messages,
    request_tokens,
    send,
    stub_arguments,
)
from agent_cli.agent.judge.verifier import verify
from agent_cli.core.errors import AgentError
from agent_cli.core.models import Task
from agent_cli.llm.fake.replies import prompt_tokens
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.workspace.shell.runner import run_command
from reliability.relkit import call, finish, plan, repo_with, roles_env, task

AGENT = Path(__file__).resolve().parents[2] / "agent_cli" / "agent"
WINDOW = 4096


class ChatCalls(ast.NodeVisitor):
    """Every `X.chat(...)` call of one module, with the function it is in."""

    def __init__(self, module: str) -> None:
        self.module, self.where, self.found = module, ["<module>"], []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "chat":
            self.found.append((self.module, self.where[-1]))
        self.generic_visit(node)


def chat_calls() -> list[tuple[str, str]]:
    """(module, enclosing function) of every `X.chat(...)` call in agent_cli/agent."""
    found: list[tuple[str, str]] = []
    for path in sorted(AGENT.rglob("*.py")):
        visitor = ChatCalls(path.relative_to(AGENT).as_posix())
        visitor.visit(ast.parse(path.read_text(), str(path)))
        found += visitor.found
    return found


def test_the_only_request_to_the_model_is_the_one_that_fits_it():
    # Planner, executor, verifier, re-plan, facts and the closing summary all ask through
    # `window.send`; a request built anywhere else and sent with `.chat(` fails this.
    assert set(chat_calls()) == {("ask/window.py", "send")}
    users = {
        path.relative_to(AGENT).as_posix()
        for path in AGENT.rglob("*.py")
        if "send(" in path.read_text() and path.name != "window.py"
    }
    assert {
        "ask/structured.py",
        "ask/closing.py",
        "attempt/executor.py",
    } <= users


def test_echoed_arguments_become_a_stub_that_is_still_json():
    args = json.dumps({"path": "big.txt", "content": "x" * 12_345})
    stub = json.loads(stub_arguments("write_file", args))
    assert stub == {"path": "big.txt", "content": "[12,345 characters, written]"}
    assert stub_arguments("write_file", '{"path": "a", "content": "short"}') == (
        '{"path": "a", "content": "short"}'
    )
    broken = stub_arguments("run", "{" * 5000)
    assert json.loads(broken) == {"arguments": "[5,000 characters, cut]"}


def test_any_message_list_is_cut_but_never_its_system_prompt_or_goal():
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "Changes:\n" + "+line of the diff\n" * 3000},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": "a", "content": "y" * 50_000}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "wrote a"},
        {"role": "user", "content": "GOAL:\nthe goal"},
    ]
    window = Window(4096, 1024)
    fitted = fit_messages(messages, None, window)
    assert request_tokens(fitted, None) <= window.limit
    assert fitted[0] == messages[0] and fitted[-1] == messages[-1]
    assert NOTE in fitted[1]["content"]
    echoed = json.loads(fitted[2]["tool_calls"][0]["function"]["arguments"])
    assert echoed == {"path": "a", "content": "[50,000 characters, written]"}
    with pytest.raises(AgentError, match="context window"):
        fit_messages([messages[0], {"role": "user", "content": "z " * 20_000}], None, window)


def test_a_request_is_fitted_to_the_window_the_server_reports(fake_server):
    srv = fake_server([{"content": "ok"}], n_ctx=WINDOW)
    model = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01)
    big = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "word " * 20_000},
        {"role": "user", "content": "GOAL:\ng"},
    ]
    assert send(model, big, None, None).content == "ok"  # no window given: the model's
    assert prompt_tokens(srv.chat_requests[-1]) <= WINDOW


def test_a_model_verdict_on_a_3000_line_diff_fits_a_4096_token_window(tmp_path, fake_server):
    srv = fake_server(
        [{"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "it is there"}}],
        n_ctx=WINDOW,
    )
    model = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01)
    diff = "".join(f"+value_{i} = {i} * 2  # a line of the change\n" for i in range(3000))
    judged = Task(goal="add the values", acceptance="values.py defines value_0 .. value_2999")

    def run(argv: list[str]):
        return run_command(argv, cwd=tmp_path, timeout_s=10)

    verdict = verify(judged, [], run, model, lambda: diff, "the goal")
    assert verdict.passed, verdict.reason
    assert all(prompt_tokens(r) <= WINDOW for r in srv.chat_requests)


def _fits(srv) -> None:
    sizes = [prompt_tokens(r) for r in srv.chat_requests]
    assert sizes and max(sizes) <= WINDOW, sizes


def test_a_model_judged_task_with_a_3000_line_diff_is_verified(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    body = "".join(f"value_{i} = {i} * 2  # a line of the change\n" for i in range(3000))
    judged = {"goal": "Write values.py", "acceptance": "values.py defines 3000 values"}
    srv = fake_server(
        [
            plan(judged),
            call("write_file", path="values.py", content=body),
            finish("wrote values.py"),
            {"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "all 3000"}},
        ],
        n_ctx=WINDOW,
    )
    ran = run_in_process(repo, srv.url, "Write values.py")
    assert ran.code == 0, ran.text
    assert ran.of("run_done")[0]["status"] == "verified"
    assert [e["passed"] for e in ran.of("verify")] == [True]
    _fits(srv)


def test_a_200_kb_write_file_ends_verified_within_a_4096_token_window(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    content = "".join(f"row {i}: {'data ' * 6}\n" for i in range(5600))
    assert len(content) > 200_000
    srv = fake_server(
        [
            plan(task("Write big.txt", "test -s big.txt")),
            call("write_file", path="big.txt", content=content),
            call("read_file", path="big.txt", start_line=1, end_line=3),
            finish("wrote big.txt"),
        ],
        n_ctx=WINDOW,
    )
    ran = run_in_process(repo, srv.url, "Write big.txt")
    assert ran.code == 0, ran.text
    assert (repo / "big.txt").read_text() == content
    _fits(srv)
    echoes = [
        c["function"]["arguments"]
        for r in srv.chat_requests
        for m in r["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "write_file"
    ]
    assert echoes and all(len(e) < 2000 for e in echoes)
    assert json.loads(echoes[0])["content"] == f"[{len(content):,} characters, written]"


def test_a_megabyte_tool_name_is_a_malformed_reply_never_echoed_back(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    name = "n" * 1_000_000
    srv = fake_server(
        [
            plan(task()),
            call(name, path="x"),
            call("write_file", path="done.txt", content="done\n"),
            finish(),
        ],
        n_ctx=WINDOW * 4,
    )
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    later = srv.chat_requests[2:]
    assert later and all(len(json.dumps(r)) < 100_000 for r in later)
    ran_tools = [e for e in ran.of("tool_result") if e["name"].startswith("nnn")]
    assert ran_tools and not ran_tools[0]["ok"] and len(ran_tools[0]["name"]) < 100


def test_the_reason_an_answer_was_refused_goes_back_bounded():
    form = Form("submit_x", "x", Task, "answer")
    asked = with_error([{"role": "user", "content": "GOAL:\ng"}], form, "bad key " + "k" * 10**6)
    assert len(asked[0]["content"]) < 2200 and asked[-1]["content"] == "GOAL:\ng"


def test_a_verdict_request_over_a_window_the_server_hides_is_cut_and_asked_again(
    tmp_path, fake_server
):
    # A proxy in front of the server enforces 3,000 tokens without saying so: the model
    # believes the 128,000 of the setting, the overflow error names the real window.
    srv = fake_server(
        [{"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "it is there"}}],
        n_ctx=3000,
        hide_window=True,
    )
    model = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01)
    diff = "".join(f"+value_{i} = {i} * 2  # a line of the change\n" for i in range(3000))
    judged = Task(goal="add the values", acceptance="values.py defines value_0 .. value_2999")

    def run(argv: list[str]):
        return run_command(argv, cwd=tmp_path, timeout_s=10)

    verdict = verify(judged, [], run, model, lambda: diff, "the goal")
    assert verdict.passed, verdict.reason
    sizes = [prompt_tokens(r) for r in srv.chat_requests]
    assert len(sizes) == 2 and sizes[0] > 3000 >= sizes[1]


def test_the_verdict_request_fits_the_smallest_window_of_the_roles(
    agent_in_process, fake_server, tmp_path
):
    # The planner's server says 4,096 tokens; the verifier's says nothing (128,000 by the
    # setting): its verdict on a long diff is fitted to the planner's window all the same.
    repo = repo_with(tmp_path / "repo")
    body = "".join(f"value_{i} = {i} * 2  # a line of the change\n" for i in range(3000))
    judged = {"goal": "Write values.py", "acceptance": "values.py defines 3000 values"}
    planner = fake_server([plan(judged)], models=("plan-model",), n_ctx=WINDOW)
    executor = fake_server(
        [call("write_file", path="values.py", content=body), finish("wrote values.py")],
        models=("exec-model",),
    )
    verdict = {"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "all 3000"}}
    verifier = fake_server([verdict], models=("verify-model",))
    env = roles_env(planner, executor, verifier)
    proc = agent_in_process("run", "Write values.py", "--yes", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # whose window it is: the planner's alone, the smallest of the roles'
    assert "the planner's context window is 4,096 tokens, the smallest of the roles'" in (
        " ".join(proc.stdout.split())
    ), proc.stdout
    (asked,) = verifier.chat_requests
    assert prompt_tokens(asked) <= WINDOW
    changes = next(m["content"] for m in asked["messages"] if "Changes:" in str(m["content"]))
    assert "value_0 = 0" in changes and changes.endswith(NOTE)  # the diff's head, cut, said
    _fits(planner)
    _fits(executor)
