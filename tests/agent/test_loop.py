"""The run loop in process: Session, dispatch, planner and learn over real parts, no patching.

The objects are the ones `agent run` builds (the wiring's workspace, kit and model client)
talking to the shipped loopback server over real HTTP, in a real git repository, with real
SQLite and Chroma; only the embedder is the tests' deterministic one.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from runkit import brief_text, last_text

from agent_cli.agent.adapt.escalate import Answer
from agent_cli.agent.attempt.runtime import Limits
from agent_cli.agent.run.session import RunConfig, Services, Session
from agent_cli.agent.run.store import RunStore
from agent_cli.cli.config.settings import load_settings
from agent_cli.cli.wiring import RunKit, RunOptions, build_model, open_workspace
from agent_cli.core.errors import AgentError
from agent_cli.core.protocols import ChatModel
from agent_cli.llm.fake.replies import prompt_tokens
from agent_cli.llm.server.info import fit_window
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.ui.console import make_console
from conftest import git
from embedkit import HashEmbedder
from reliability.relkit import call, commit_count, finish, make_done, plan, repo_with, task

CHECK = "test -f done.txt"


@dataclass
class Ran:
    code: int
    events: list[dict]
    text: str
    memory: dict[str, int] = field(default_factory=dict)  # its stats and budget at the end

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]


def run_in_process(
    repo: Path,
    url: str,
    goal: str | None = None,
    *,
    mode: str = "json",
    max_steps: int = 200,
    task_max_steps: int = 30,
    answer: Answer | None = None,
    store: type[RunStore] = RunStore,
    accept: tuple[str, ...] = (),
    built: Callable[[ChatModel], None] = lambda model: None,
    **flags: object,
) -> Ran:
    """One session of `agent run GOAL` (or `--resume [--hint|--skip|--replan]` when goal is
    None: `answer`), approved, in process; `store` keeps the run's state; `accept`: the
    `--accept` commands given; `built` is called with the model client before the run;
    `flags`: more settings."""
    settings = load_settings(
        repo,
        {"base_url": url, "approval": "auto", "max_retries": 0, **flags},
        env={},
        user_rc=repo.parent / "no-agentrc",
    )
    out = io.StringIO()
    console = make_console(mode, out=out, err=out)
    state_dir = settings.state_dir(repo)
    workspace, policy = open_workspace(settings, repo, state_dir, console)
    embedder = HashEmbedder()
    with workspace, LazyLongTermMemory(state_dir / "chroma", embedder) as longterm:
        workspace.git.exclude_state(state_dir)
        kit = RunKit(settings, workspace, state_dir, policy, embedder, longterm)
        model = build_model(settings, RunOptions(goal=goal, repo=repo), console)
        built(model)
        config = RunConfig(
            limits=Limits(max_steps, task_max_steps, 5.0, 3000), accept_cmds=list(accept)
        )
        session = Session(
            Services(
                workspace=workspace,
                model=model,
                console=console,
                longterm=longterm,
                parts=kit,
                store=store(state_dir),
            ),
            config,
        )
        memory: dict[str, int] = {}
        try:
            code = session.start(goal) if goal else session.resume(None, answer)
            if session.rt is not None:
                memory = {**session.rt.memory.stats(), "budget": session.rt.memory.max_tokens}
        finally:
            kit.close()
    console.close()
    text = out.getvalue()
    events = [json.loads(line) for line in text.splitlines()] if mode == "json" else []
    return Ran(code, events, text, memory)


def test_a_verified_task_is_committed_with_its_trailer(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), make_done(), finish("made done.txt")])
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0
    done = ran.of("run_done")[0]
    assert done["status"] == "verified" and done["tasks"][0]["commit"]
    assert commit_count(repo) == 2
    assert f"Agent-Run: {done['run_id']}" in git(repo, "log", "-1", "--format=%B")
    assert git(repo, "status", "--porcelain") == ""
    names = [e["event"] for e in ran.events]
    assert names.index("plan") < names.index("run_started") < names.index("task_started")


def test_a_task_that_fails_twice_is_rejected_and_left_uncommitted(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            plan(task()),
            make_done("other.txt"),
            finish(),
            make_done("other.txt", "again\n"),
            finish(),
        ]
    )
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 3
    assert [e["passed"] for e in ran.of("verify")] == [False, False]
    assert ran.of("task_done")[0]["status"] == "rejected"
    assert "other.txt" in git(repo, "status", "--porcelain") and commit_count(repo) == 1
    retry = srv.chat_requests[3]
    assert "attempt 2 of 2" in last_text(retry)
    assert "attempt 2 of 2" in brief_text(retry) and "`test -f done.txt` exited 1" in brief_text(
        retry
    )


def test_a_re_plan_to_no_tasks_says_so_and_claims_no_check_passed(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), finish(), finish()])
    assert run_in_process(repo, srv.url, "Create done.txt").code == 3
    drop = call("revise_plan", keep=False, tasks=[], reason="nothing left to do")
    srv = fake_server([drop])
    ran = run_in_process(repo, srv.url, answer=Answer("replan", "drop it"))
    done = ran.of("run_done")[0]
    assert done["status"] == "nothing_to_do" and done["tasks"] == []
    assert "the re-plan removed every task" in done["message"]
    assert "passed before it started" not in done["message"]


def test_an_invalid_plan_is_asked_for_once_more_with_the_reason(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    empty = {"tool": "submit_plan", "args": {"goal": "g", "tasks": [], "success_criteria": ""}}
    srv = fake_server([empty, plan(task()), make_done(), finish()])
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0
    assert "Your previous plan was rejected" in json.dumps(srv.chat_requests[1]["messages"])


def test_the_step_budget_stops_the_run_with_a_line_that_says_how_much(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task())] + [call("read_file", path="README.md")] * 5)
    ran = run_in_process(repo, srv.url, "Create done.txt", mode="plain", max_steps=2)
    assert ran.code == 4
    assert (
        "budget ran out: 2 of 2 tool calls used (raise --max-steps, then `agent run --resume`)"
    ) in ran.text.splitlines()


def test_what_a_run_learned_is_recalled_by_the_next_plan(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    first = fake_server([plan(task()), make_done(), finish()])
    assert run_in_process(repo, first.url, "Create done.txt").code == 0
    assert (repo / ".agent" / "chroma").is_dir()  # created by the first run's learning
    second = fake_server([plan(task())] + [finish()] * 3)
    run_in_process(repo, second.url, "Create done.txt again")
    planning = json.dumps(second.chat_requests[0]["messages"])
    assert "<retrieved_memory>" in planning and "test -f done.txt" in planning


def test_a_first_run_opens_no_long_term_memory_before_its_plan(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    seen: list[bool] = []
    replies = [plan(task()), {"status": 500, "body": "{}"}]

    def reply(body: dict) -> dict:
        seen.append((repo / ".agent" / "chroma").exists())
        return replies[len(seen) - 1]

    ran = run_in_process(repo, fake_server(reply).url, "Create done.txt")
    assert ran.code == 1
    assert seen == [False, False]  # no store was created to find it empty
    assert (repo / ".agent" / "chroma").is_dir()  # the failed run's episode is kept


def test_a_failed_session_is_resumed_where_it_stopped(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    broken = fake_server([plan(task()), {"status": 500, "body": "{}"}])
    assert run_in_process(repo, broken.url, "Create done.txt").code == 1
    rest = fake_server([make_done(), finish()])
    ran = run_in_process(repo, rest.url)
    assert ran.code == 0 and ran.of("run_started")[0]["resumed"] is True
    assert not any("submit_plan" in json.dumps(r.get("tools", [])) for r in rest.chat_requests)
    assert commit_count(repo) == 2


def test_a_request_over_the_servers_window_is_cut_to_fit_and_asked_once_more(fake_server, tmp_path):
    # The server enforces a 3,000-token window without saying so (a proxy in front of it), so
    # the run starts out fitting requests to the 128,000 of the setting.
    big = "".join(f"def helper_{i}(value):\n    return value * {i} + {i}\n\n" for i in range(700))
    repo = repo_with(tmp_path / "repo", {"big.py": big})
    srv = fake_server(
        [plan(task()), call("read_file", path="big.py"), make_done(), finish("made done.txt")],
        n_ctx=3000,
        hide_window=True,
    )
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    notices = [e["text"] for e in ran.of("notice") if "did not fit" in e["text"]]
    assert notices == [
        "the request did not fit the server's context window; asking once more "
        "within 3,000 tokens (was 128,000)"
    ]
    overflowed = [
        r
        for r in srv.requests
        if r["path"].endswith("/chat/completions") and prompt_tokens(r["body"]) > 3000
    ]
    assert len(overflowed) == 1  # asked once too big; every later request was cut to fit
    # and working memory keeps to what fits the window the error named (a quarter for the reply)
    assert ran.memory["budget"] == fit_window(3000, 8000, 3000, 750)[0] < 8000


def test_a_window_the_server_says_only_once_loaded_narrows_working_memory(fake_server, tmp_path):
    # llama.cpp was loading its model as the run began: the window probes met 503 "Loading
    # model", so working memory got the budget of the setting's 128,000 tokens. The server
    # says its 4,096 once loaded, at the plan's request: from then on working memory keeps
    # to what fits that window, as the run would have begun had the server said it then.
    files = {f"part{n}.py": f"# part {n}\n" + "x = 1  # filler\n" * 260 for n in range(3)}
    repo = repo_with(tmp_path / "repo", files)
    reads = [call("read_file", path=name) for name in files]
    srv = fake_server([plan(task()), *reads, make_done(), finish()], n_ctx=4096, loading=True)

    def loaded(model: ChatModel) -> None:
        assert model.context_window == 128_000  # the setting, while the server says nothing
        srv.behaviour.loading = False  # it says its window when it is asked again

    # asked again with the first request built after it: no backoff to wait
    ran = run_in_process(repo, srv.url, "Create done.txt", built=loaded, retry_backoff_s=0)
    assert ran.code == 0, ran.text
    memory, tool_output, _ = fit_window(4096, 8000, 3000, 4096)
    assert ran.memory["budget"] == memory  # not the 8,000 it began with
    assert ran.memory["tokens"] <= memory and ran.memory["evictions"] > 0
    assert not [r for r in srv.chat_requests if "cut to fit" in json.dumps(r["messages"])]


def test_after_a_reply_without_a_tool_call_the_next_request_requires_one(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            plan(task()),
            {"content": "I will now create the file."},
            make_done(),
            finish("made done.txt"),
        ]
    )
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    executing = [r for r in srv.chat_requests if len(r.get("tools") or []) > 1]
    assert [r["tool_choice"] for r in executing[:3]] == ["auto", "required", "auto"]
    assert "your last reply had no tool call" in executing[1]["messages"][-1]["content"]


def test_a_call_cut_at_the_output_limit_tells_the_model_to_send_less(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    cut = {
        "tool_calls": [{"name": "write_file", "arguments": '{"path": "done.txt", "conte'}],
        "finish_reason": "length",
    }
    srv = fake_server([plan(task()), cut, make_done(), finish("made done.txt")])
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    said = json.dumps(srv.chat_requests[2]["messages"])
    assert "cut at the server's output token limit" in said and "send less" in said
    (first,) = [e for e in ran.of("tool_result") if not e["ok"]]
    assert first["summary"].startswith("cut at the output limit: ")


def test_a_plan_cut_at_the_length_limit_is_asked_for_again_saying_so(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    cut = {
        "content": '{"goal": "g", "tasks": [{"goal": "make done.txt", "accep',
        "finish_reason": "length",
    }
    srv = fake_server([cut] * 4)  # three forms of forcing tried on the first, then the retry
    with pytest.raises(
        AgentError,
        match="valid plan twice: the reply was cut at the length "
        "limit before it called submit_plan",
    ) as e:
        run_in_process(repo, srv.url, "Create done.txt")
    assert "raise reserved_output_tokens" in e.value.hint and "function tools" not in e.value.hint
    assert len(srv.chat_requests) == 4
    said = json.dumps(srv.chat_requests[3]["messages"])
    assert "the reply was cut at the length limit before it called submit_plan" in said


def test_a_plan_cut_inside_its_arguments_says_it_needs_more_room(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    cut = {
        "tool_calls": [{"name": "submit_plan", "arguments": '{"goal": "g", "tasks": [{"go'}],
        "finish_reason": "length",
    }
    srv = fake_server([cut] * 2)
    with pytest.raises(AgentError, match="cut at the length limit inside submit_plan") as e:
        run_in_process(repo, srv.url, "Create done.txt")
    assert "raise reserved_output_tokens" in e.value.hint
