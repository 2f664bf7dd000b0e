"""The key leaves by no way out: one redaction step on each, tested one exit at a time.

One `agent run --json` (in process, through the real wiring, over the loopback server, in a
real git repository) whose plan, re-plan, summaries, verdict, closing summary, failing check
output and nested AGENTS.md all hold the key (`redactkit`); then each exit is searched: the
requests the server received, the events, the files of the state directory, the trajectory.
The console, the model client and the state store are also driven on their own.
"""

from __future__ import annotations

import io
import json
import unicodedata
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from agent_cli.agent.run.store import RunRecord, RunStore
from agent_cli.cli.commands.run_command import print_run_done
from agent_cli.cli.wiring import RetryNotice, RunOptions, execute
from agent_cli.core import events
from agent_cli.core.errors import AgentError
from agent_cli.llm.fake.server import FakeOpenAIServer
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.memory.working.store import SqliteStore
from agent_cli.ui.console import make_console
from redactkit import (
    KEY,
    MASK,
    TOKEN,
    env,
    files_holding,
    holding,
    repo_for,
    request_bodies,
    script,
)
from ttykit import Screen


@dataclass
class Run:
    code: int
    out: str
    err: str
    events: list[dict]
    srv: FakeOpenAIServer
    repo: Path

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    tmp = tmp_path_factory.mktemp("redaction")
    repo = repo_for(tmp)
    srv = FakeOpenAIServer(script()).start()
    out, err = io.StringIO(), io.StringIO()
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name in ("OPENAI_BASE_URL", "AGENT_REPLAN", "AGENT_FINAL_SUMMARY"):
                mp.delenv(name, raising=False)
            for name, value in {**env(tmp), "XDG_CACHE_HOME": str(tmp / "cache")}.items():
                mp.setenv(name, value)
            opts = RunOptions(
                goal="Create done.txt and sub/x.txt",
                repo=repo,
                yes=True,
                json_out=True,
                flags={"base_url": srv.url, "approval": "auto"},
            )
            with redirect_stdout(out), redirect_stderr(err):
                code = execute(opts)
    finally:
        srv.stop()
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return Run(code, out.getvalue(), err.getvalue(), lines, srv, repo)


def test_the_run_went_through_every_place_the_key_was_put(run):
    assert run.code == 0, run.out + run.err
    names = {e["event"] for e in run.events}
    assert {"plan", "plan_revised", "task_started", "verify", "final_summary", "run_done"} <= names
    failed = [e for e in run.of("verify") if not e["passed"]]
    assert failed and "exited 1" in failed[0]["reason"]
    assert any("sub/AGENTS.md" in body for body in request_bodies(run.srv))


def test_no_request_the_server_received_holds_the_key(run):
    bodies = request_bodies(run.srv)
    assert any('"input"' in b for b in bodies)  # the embedding requests are searched too
    assert [holding(b) for b in bodies if holding(b)] == []
    # what held the key reached the model masked: the failing check's output in the retry,
    # the nested AGENTS.md, the re-planned task, the verdict and the summaries told back
    retry = next(b for b in bodies if "attempt 2 of 2" in b)
    assert f"K={MASK}" in retry and f"T={MASK}" in retry
    agents = next(b for b in bodies if 'source=\\"sub/AGENTS.md\\"' in b)
    assert f"Deploy with {MASK} and {MASK}" in agents
    assert any(
        f"CURRENT TASK (2 of 2), attempt 1 of 2:\\nCreate sub/x.txt now {MASK}" in b for b in bodies
    )
    assert any(f"pass: sub/x.txt is there {MASK}" in b for b in bodies)
    assert any(f"its summary: wrote it again {MASK} {MASK}" in b for b in bodies)


def test_no_event_holds_the_key(run):
    assert [e["event"] for e in run.events if holding(json.dumps(e))] == []
    assert holding(run.out) == [] and holding(run.err) == []
    assert run.of("plan")[0]["goal"] == f"Create things {MASK}"
    assert f"folder named {MASK}" in run.of("plan_revised")[0]["reason"]
    assert run.of("task_started")[0]["goal"] == f"Create done.txt {MASK}"
    failed = next(e for e in run.of("verify") if not e["passed"])
    assert f"K={MASK}" in failed["reason"]
    assert run.of("final_summary")[0]["text"] == f"Both files are made. {MASK} {MASK}"
    assert all(MASK in t["goal"] for t in run.of("run_done")[0]["tasks"])


def test_no_file_in_the_state_directory_holds_the_key(run):
    state = run.repo / ".agent"
    assert (state / "runs").is_dir()
    assert files_holding(state) == []
    (path,) = state.rglob("state.json")
    plan = json.loads(path.read_text())["agent_state"]["plan"]
    assert [t["goal"] for t in plan] == [f"Create done.txt {MASK}", f"Create sub/x.txt now {MASK}"]


def test_the_trajectory_holds_the_masked_text_and_stays_json(run):
    paths = list((run.repo / ".agent").rglob("trajectory.jsonl"))
    assert paths
    records = [json.loads(line) for p in paths for line in p.read_text().splitlines()]
    text = json.dumps(records)
    assert holding(text) == []
    assert f"K={MASK}" in text and f"folder named {MASK}" in text


def test_the_console_masks_every_event_in_every_mode_and_a_key_still_streaming_in():
    plan = events.PlanMade(
        goal=f"g {KEY}",
        tasks=[{"goal": f"t {KEY}", "acceptance": TOKEN, "acceptance_cmd": f"echo {KEY}"}],
        success_criteria=KEY,
        accept_cmds=[f"check {KEY}"],
    )
    shown = [
        plan,
        events.TaskStarted(index=0, goal=f"t {KEY}", attempt=1),
        events.Verified(index=0, attempt=1, passed=False, judge="command", reason=f"out {KEY}"),
        events.FinalSummary(text=f"summary {KEY} {TOKEN}"),
    ]
    for mode in ("json", "plain"):
        out = io.StringIO()
        console = make_console(mode, out=out, err=out, secrets=(KEY,))
        for ev in shown:
            console.emit(ev)
        console.close()
        assert holding(out.getvalue()) == [] and MASK in out.getvalue(), mode
    screen = io.StringIO()
    live = make_console(
        "live",
        out=screen,
        err=screen,
        console=Console(file=screen, force_terminal=True, width=100),
        secrets=(KEY,),
    )
    live.stream_text(f"the key is {KEY[:12]}")  # not yet the whole key: not shown
    assert KEY[:12] not in screen.getvalue()
    live.stream_text(f"{KEY[12:]} and more ")
    live.emit(events.Notice(text="next"))
    live.close()
    assert holding(screen.getvalue()) == [] and KEY[:12] not in screen.getvalue()
    assert f"the key is {MASK}" in screen.getvalue()


def test_the_console_masks_a_key_that_shows_only_once_its_escapes_are_out_or_json_decoded():
    split = f"{KEY[:9]}\x1b[m{KEY[9:]}"  # an escape sequence inside: the key once it shows
    encoded = f"{KEY[:9]}\\u{ord(KEY[9]):04x}{KEY[10:]}"  # in JSON: the key once decoded
    shown = [
        events.TaskStarted(index=0, goal=f"t {split}", attempt=1),
        events.ToolCalled(index=0, step=1, name="run", arguments=json.dumps({"cmd": split})),
        events.ToolRan(index=0, step=1, name="run", ok=True, summary="exit 0"),
        events.Notice(text=f"notice {split}"),
        events.ToolCalled(
            index=0, step=2, name="finish", arguments=f'{{"summary": "fin {encoded} end"}}'
        ),
        events.ToolRan(index=0, step=2, name="finish", ok=True, summary="done"),
        events.FinalSummary(text=f"closing {split} end"),
    ]
    for mode in ("plain", "live"):
        out = io.StringIO()
        rich = Console(file=out, force_terminal=True, width=100) if mode == "live" else None
        console = make_console(mode, out=out, err=out, console=rich, secrets=(KEY,))
        console.emit(shown[0])
        console.stream_text(f"thinking {split} more ")
        for ev in shown[1:]:
            console.emit(ev)
        console.close()
        screen = Screen(100).feed(out.getvalue()).text()
        assert holding(screen) == [], (mode, screen)
        assert f"fin {MASK} end" in screen and f"closing {MASK} end" in screen, (mode, screen)
        assert f"run: {MASK}" in screen and f"notice {MASK}" in screen, (mode, screen)
        if mode == "live":
            assert f"thinking {MASK} more" in screen, screen


def test_the_model_client_masks_every_request_whoever_built_it(fake_server):
    srv = fake_server([{"content": "ok"}])
    model = OpenAIChat(model="fake-model", base_url=srv.url, api_key=KEY, secrets=(KEY,))
    args = json.dumps(
        {"cmd": f"echo {KEY}", "note": f"line\n{TOKEN}", "auth": 'Authorization: x"y'}
    )
    model.chat(
        [
            {"role": "system", "content": f"rules {KEY}"},
            {"role": "user", "content": [{"type": "text", "text": f"parts {TOKEN}"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "run", "arguments": args}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": f"printed {KEY}"},
        ]
    )
    body = srv.chat_requests[0]
    assert holding(json.dumps(body)) == []
    echoed = json.loads(body["messages"][2]["tool_calls"][0]["function"]["arguments"])
    assert echoed == {
        "cmd": f"echo {MASK}",
        "note": f"line\n{MASK}",  # the token after an escaped newline is found too
        "auth": f"Authorization: {MASK}" + '"y',
    }
    assert srv.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"  # it authenticates


def test_state_journal_and_trajectory_stay_valid_json_when_a_value_is_masked(tmp_path):
    store = RunStore(tmp_path, secrets=(KEY,))
    run_id = "20260101-000000-abcd"
    goal = f'Authorization: x"y {KEY}\n{TOKEN}'
    record = RunRecord(run_id=run_id, goal=goal, branch=f"agent/{run_id}")
    store.save(record)
    store.log(record.run_id, {"type": "note", "text": f'authorization: a"b {KEY}'})
    store.journal(record.run_id, json.dumps({"step": 1, "note": f'authorization: q"r\n{TOKEN}'}))
    run_dir = store.run_dir(record.run_id)
    for name in ("state.json", "trajectory.jsonl", "journal.jsonl"):
        text = (run_dir / name).read_text()
        assert holding(text) == [] and MASK in text, name
        for line in [text] if name == "state.json" else text.splitlines():
            json.loads(line)
    assert store.load(run_id).goal == f'Authorization: {MASK}"y {MASK}\n{MASK}'


def test_the_cold_store_writes_what_it_keeps_masked(tmp_path):
    store = SqliteStore(tmp_path / "memory.db", secrets=(KEY,))
    record = {
        "id": "m1",
        "kind": "test_result",
        "text": f"`sh check.sh` exited 1\nK={KEY}\nT={TOKEN}",
        "summary": f"failed {KEY}",
        "symbols": [KEY, "check"],
        "step_evicted": 1,
        "vector": [0.5, 0.25],
    }
    store.put(record)
    kept = store.get("m1")
    store.close()
    assert kept is not None and kept["text"] == f"`sh check.sh` exited 1\nK={MASK}\nT={MASK}"
    assert kept["symbols"] == [MASK, "check"] and kept["vector"] == [0.5, 0.25]
    assert files_holding(tmp_path) == []


def test_an_error_that_quotes_the_key_is_masked_in_its_line_and_in_run_done(
    fake_server, tmp_path, monkeypatch, capsys
):
    echo = json.dumps({"error": {"message": f"a proxy refused the request holding {KEY}"}})
    srv = fake_server([{"status": 400, "body": echo}])
    for name, value in env(tmp_path).items():
        monkeypatch.setenv(name, value)
    opts = RunOptions(
        goal="Create done.txt",
        repo=repo_for(tmp_path),
        yes=True,
        json_out=True,
        flags={"base_url": srv.url, "approval": "auto", "max_retries": 0},
    )
    with pytest.raises(AgentError) as raised:
        execute(opts)
    assert holding(raised.value.one_line()) == [] and MASK in raised.value.one_line()
    out = capsys.readouterr().out
    assert holding(out) == [] and MASK in json.loads(out.splitlines()[-1])["message"]


def test_a_retry_notice_masks_what_the_server_said(capsys):
    RetryNotice((KEY,))(1, 2, 0.5, f"500: the proxy saw {KEY} and {TOKEN}")
    err = capsys.readouterr().err
    assert holding(err) == [] and f"the proxy saw {MASK} and {MASK}" in err


def test_the_run_done_of_a_refused_command_line_masks_key_shapes(capsys):
    print_run_done(2, f"no such option: --token {TOKEN}")
    done = json.loads(capsys.readouterr().out)
    assert holding(json.dumps(done)) == [] and done["message"].endswith(MASK)


@pytest.mark.parametrize("invisible", ["\u200b", "\u00ad", "\ufeff", "\u2060", "\u200d"])
def test_the_console_masks_a_key_split_by_a_character_that_shows_as_nothing(invisible):
    split = f"{KEY[:9]}{invisible}{KEY[9:]}"
    shown = [
        events.Notice(text=f"notice {split}"),
        events.ToolCalled(index=0, step=1, name="run", arguments=json.dumps({"cmd": split})),
        events.ToolRan(index=0, step=1, name="run", ok=True, summary="exit 0"),
        events.ToolCalled(index=0, step=2, name="run", arguments=f"not json {split}"),
        events.Notice(text="a developer \U0001f469\u200d\U0001f4bb kept whole"),
        events.FinalSummary(text=f"closing {split} end"),
    ]
    for mode in ("plain", "live"):
        out = io.StringIO()
        rich = Console(file=out, force_terminal=True, width=100) if mode == "live" else None
        console = make_console(mode, out=out, err=out, console=rich, secrets=(KEY,))
        console.stream_text(f"thinking {split} more ")
        for ev in shown:
            console.emit(ev)
        console.close()
        screen = Screen(100).feed(out.getvalue()).text()
        bare = "".join(ch for ch in screen if unicodedata.category(ch) != "Cf")
        assert holding(bare) == [], (mode, screen)
        assert f"notice {MASK}" in screen and f"closing {MASK} end" in screen, (mode, screen)
        assert "\U0001f469\u200d\U0001f4bb kept whole" in screen, (mode, screen)


def test_json_lines_carry_text_as_it_came_unless_a_terminal_would_show_a_key_in_it():
    split = f"{KEY[:9]}\x1b[m{KEY[9:]}"
    encoded = f"{KEY[:9]}\\u{ord(KEY[9]):04x}{KEY[10:]}"
    out = io.StringIO()
    console = make_console("json", out=out, err=out, secrets=(KEY,))
    console.emit(events.Notice(text=f"notice {split}\tend"))
    console.emit(events.Notice(text="kept as it came:\t\x1b[31mred\x1b[0m"))
    console.emit(
        events.ToolCalled(index=0, step=1, name="run", arguments=f'{{"cmd": "{encoded}"}}')
    )
    console.emit(events.ToolCalled(index=0, step=2, name="run", arguments='{"cmd": "\\u0041"}'))
    console.close()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["text"] == f"notice {MASK}    end"  # as a terminal shows it, masked
    assert lines[1]["text"] == "kept as it came:\t\x1b[31mred\x1b[0m"
    assert holding(json.loads(lines[2]["arguments"])["cmd"]) == []
    assert MASK in lines[2]["arguments"]
    assert lines[3]["arguments"] == '{"cmd": "\\u0041"}'
