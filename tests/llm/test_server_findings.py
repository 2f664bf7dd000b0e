"""Probes only where a server can answer: a local server's findings kept a day, a hosted API
never probed before its first chat reply."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from agent_cli.cli.wiring import server_cache_dir
from agent_cli.core.errors import ContextOverflow
from agent_cli.llm.base import function_tool
from agent_cli.llm.openai.chat import PROBE_ROUNDS, OpenAIChat
from agent_cli.llm.server.findings import FILE_NAME, MAX_AGE_S, MAX_BYTES, Findings
from agent_cli.llm.server.locality import is_local
from httpkit import loopback, send

__all__ = ["loopback"]

PLAN = function_tool("submit_plan", "Plan.", {"goal": {"type": "string"}})
ASK = [{"role": "user", "content": "plan it"}]
CALL = {"tool": "submit_plan", "args": {"goal": "g"}}


def chat_model(server, cache_dir: Path | None, **kw) -> OpenAIChat:
    kw = {"backoff_s": 0.01, "max_tokens": 512, **kw}
    return OpenAIChat(
        model="fake-model", base_url=server.url, api_key=None, cache_dir=cache_dir, **kw
    )


def probes(server) -> list[str]:
    """The paths of every request that was not a chat request."""
    return [r["path"] for r in server.requests if not r["path"].endswith("/chat/completions")]


# -- which hosts are local ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434/v1",
        "http://LOCALHOST.:8000/v1",
        "http://[::1]:8000/v1",
        "http://[::ffff:127.0.0.1]:8000/v1",
        "http://10.1.2.3:8000/v1",
        "http://172.16.0.9/v1",
        "http://192.168.1.20:8080/v1",
        "http://169.254.3.4/v1",
        "http://[fe80::1%25eth0]:8000/v1",
        "http://[fd12:3456::1]:8000/v1",
        "http://gpu-box.local:8080/v1",
    ],
)
def test_loopback_private_link_local_and_mdns_hosts_are_local(url):
    assert is_local(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://openrouter.ai/api/v1",
        "http://8.8.8.8/v1",
        "http://172.32.0.1/v1",
        "http://[2001:db8::1]/v1",
        "http://localhost.example.com/v1",
        "http://my-gpu-box:8000/v1",  # a bare name is decided without resolving it
        "",
    ],
)
def test_any_other_host_is_hosted(url):
    assert not is_local(url)


# -- a local server: probed once a day ---------------------------------------------------------
def test_a_loopback_server_is_probed_only_by_the_first_run(fake_server, tmp_path):
    srv = fake_server([{"content": "a"}, {"content": "b"}], n_ctx=4096)
    first = chat_model(srv, tmp_path)
    assert (first.context_window, first.context_source) == (4096, "llama.cpp /props")
    first.chat(ASK)
    for thread in threading.enumerate():  # probes still out are not waited for by the client
        if thread.name.startswith("probe-window"):
            thread.join(10)
    seen = probes(srv)
    assert "/props" in seen

    second = chat_model(srv, tmp_path)  # the next run, a new client
    assert second.context_window == 4096
    assert second.context_source.startswith("llama.cpp /props")
    second.chat(ASK)
    assert probes(srv) == seen  # nothing more was asked
    assert srv.chat_requests[1]["max_tokens"] == 512


def test_a_server_that_does_not_say_its_window_is_not_asked_again(fake_server, tmp_path):
    srv = fake_server([])
    assert chat_model(srv, tmp_path, context_window=32000).context_window == 32000
    seen = probes(srv)
    assert seen  # the window probes went out
    assert chat_model(srv, tmp_path, context_window=32000).context_window == 32000
    assert probes(srv) == seen


@pytest.mark.parametrize("status", [503, 429, 500])
def test_a_server_still_loading_its_model_is_asked_its_window_again(loopback, tmp_path, status):
    # llama.cpp answers 503 "Loading model" everywhere but /health while it loads: that says
    # nothing of its window, and was kept a day as "it does not say".
    loaded = threading.Event()

    def answer(handler) -> None:
        if not loaded.is_set():
            error = {"error": {"code": status, "message": "Loading model"}}
            send(handler, json.dumps(error), "application/json", status)
        elif handler.path == "/props":
            send(handler, json.dumps({"n_ctx": 4096}), "application/json")
        else:
            send(handler, "{}", "application/json", 404)

    url = loopback(answer)
    first = OpenAIChat(model="m", base_url=url, api_key=None, cache_dir=tmp_path)
    assert first.context_window == 128_000  # the default, for this run
    assert Findings(tmp_path, url, "m").get("window") == (False, None)
    loaded.set()
    second = OpenAIChat(model="m", base_url=url, api_key=None, cache_dir=tmp_path)
    assert (second.context_window, second.context_source) == (4096, "llama.cpp /props")


def test_a_run_uses_the_window_of_a_server_that_finished_loading(fake_server, tmp_path):
    # The run began while llama.cpp loaded its model: the window probes and the first chat
    # request met 503 "Loading model". The retried request is built with the window the
    # server says once loaded, not with the default for the rest of the run.
    srv = fake_server([{"content": "ok"}], n_ctx=4096, loading=True)

    def loaded(*_: object) -> None:
        srv.behaviour.loading = False  # by the time the client retries

    model = chat_model(srv, tmp_path, max_tokens=4096, backoff_s=0, on_retry=loaded)
    assert model.context_window == 128_000  # the setting while the server says nothing
    assert model.chat(ASK).content == "ok"
    assert (model.context_window, model.context_source) == (4096, "llama.cpp /props")
    first, retried = (r["max_tokens"] for r in srv.chat_requests)
    assert first == 4096 and retried <= 1024  # a quarter of the server's window at most
    assert Findings(tmp_path, srv.url, "fake-model").get("window") == (
        True,
        [4096, "llama.cpp /props"],
    )


def test_a_server_that_stays_loading_is_asked_its_window_a_bounded_number_of_times(
    fake_server, tmp_path
):
    srv = fake_server([], n_ctx=4096, loading=True)
    waiting = chat_model(srv, tmp_path, backoff_s=60)
    assert [waiting.context_window for _ in range(5)] == [128_000] * 5
    assert probes(srv).count("/props") == 1  # not again before the backoff has passed

    eager = chat_model(srv, tmp_path, backoff_s=0)
    assert [eager.context_window for _ in range(10)] == [128_000] * 10
    assert probes(srv).count("/props") == 1 + PROBE_ROUNDS
    assert Findings(tmp_path, srv.url, "fake-model").get("window") == (False, None)


def test_without_a_cache_directory_every_client_probes(fake_server):
    srv = fake_server([], n_ctx=4096)
    assert chat_model(srv, None).context_window == 4096
    assert chat_model(srv, None).context_window == 4096
    assert probes(srv).count("/props") == 2


def test_the_forcing_form_that_worked_goes_first_in_the_next_run(fake_server, tmp_path):
    # llama.cpp-like: "required" and the object form are ignored, the schema form works.
    srv = fake_server([CALL, CALL], required_choice="ignore", object_choice="ignore", n_ctx=8192)
    chat_model(srv, tmp_path).chat(ASK, [PLAN], "required")
    assert len(srv.chat_requests) == 3  # required, object, schema
    assert "response_format" in srv.chat_requests[2]

    again = chat_model(srv, tmp_path)
    reply = again.chat(ASK, [PLAN], "required")
    assert [c.name for c in reply.tool_calls] == ["submit_plan"]
    assert len(srv.chat_requests) == 4  # the schema form at once
    assert "response_format" in srv.chat_requests[3]


def test_findings_expire_after_a_day(fake_server, tmp_path):
    srv = fake_server([], n_ctx=4096)
    assert chat_model(srv, tmp_path).context_window == 4096
    path = tmp_path / FILE_NAME
    data = json.loads(path.read_text())
    for entry in data["servers"].values():
        for finding in entry.values():
            finding["at"] -= MAX_AGE_S + 1
    path.write_text(json.dumps(data))
    before = len(probes(srv))
    assert chat_model(srv, tmp_path).context_window == 4096
    assert len(probes(srv)) > before  # asked again


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2]", b'{"version": 1, "servers": {"x": 3}}', b"\xff\xfe", None],
)
def test_a_corrupt_or_oversized_cache_file_is_ignored_and_replaced(fake_server, tmp_path, content):
    path = tmp_path / FILE_NAME
    path.write_bytes(content if content is not None else b" " * (MAX_BYTES + 1))
    srv = fake_server([], n_ctx=4096)
    assert chat_model(srv, tmp_path).context_window == 4096
    assert json.loads(path.read_text())["version"] == 1  # rewritten whole
    assert chat_model(srv, tmp_path).context_source.startswith("llama.cpp /props")


def test_an_unwritable_cache_directory_is_no_error(fake_server, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    srv = fake_server([{"content": "ok"}], n_ctx=4096)
    model = chat_model(srv, blocked / "agent")
    assert model.context_window == 4096 and model.chat(ASK).content == "ok"


def test_a_write_keeps_the_other_servers_findings(tmp_path):
    now = [1000.0]
    a = Findings(tmp_path, "http://127.0.0.1:1/v1", "m", clock=lambda: now[0])
    b = Findings(tmp_path, "http://127.0.0.1:2/v1", "m", clock=lambda: now[0])
    a.put("window", [4096, "llama.cpp /props"])
    b.put("forcing", "schema")
    assert a.get("window") == (True, [4096, "llama.cpp /props"])
    assert b.get("forcing") == (True, "schema") and b.get("window") == (False, None)
    assert not list(tmp_path.glob(".*.tmp"))  # written through a renamed temporary file


def test_an_overflow_corrects_a_remembered_window(fake_server, tmp_path):
    """A local server restarted with a smaller context: its error wins over what was kept."""
    srv = fake_server([{"content": "ok"}], n_ctx=300, hide_window=True)
    Findings(tmp_path, srv.url, "fake-model").put("window", [100_000, "llama.cpp /props"])
    model = chat_model(srv, tmp_path)
    assert model.context_window == 100_000
    with pytest.raises(ContextOverflow):
        model.chat([{"role": "user", "content": "x" * 4000}])
    assert model.context_window == 300
    assert Findings(tmp_path, srv.url, "fake-model").get("window") == (
        True,
        [300, "the server's overflow error"],
    )


# -- a hosted API: not probed before it answers --------------------------------------------------
def test_a_hosted_api_gets_no_probe_before_its_first_chat_reply(fake_server, tmp_path):
    srv = fake_server([{"content": "a"}, {"content": "b"}], n_ctx=4096)
    model = chat_model(srv, tmp_path, context_window=32000, local=False)
    assert (model.context_window, model.context_source) == (32000, "the context_window setting")
    model.chat(ASK)
    assert probes(srv) == []  # the first request went out without one
    assert not (tmp_path / FILE_NAME).exists()  # and a hosted API's findings are not kept
    assert model.context_window == 4096  # once it has answered, it may say its window
    assert "/props" in probes(srv) and not (tmp_path / FILE_NAME).exists()


def _loopback_name() -> str | None:
    """This machine's own name when it is not classed local yet reaches 127.0.0.1."""
    name = socket.gethostname()
    try:
        addresses = {a[4][0] for a in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)}
    except OSError:
        return None
    return name if "127.0.0.1" in addresses and not is_local(f"http://{name}/v1") else None


@pytest.mark.skipif(_loopback_name() is None, reason="the host name does not reach 127.0.0.1")
def test_a_public_host_name_sends_no_probe_before_the_first_chat_request(fake_server, tmp_path):
    srv = fake_server([{"content": "a"}], n_ctx=4096)
    url = srv.url.replace("127.0.0.1", str(_loopback_name()))
    model = OpenAIChat(
        model="fake-model", base_url=url, api_key=None, max_tokens=512, cache_dir=tmp_path
    )
    assert not model.local
    assert model.context_window == 128_000  # the default: nothing was asked
    assert model.chat(ASK).content == "a"
    assert [r["path"] for r in srv.requests] == ["/v1/chat/completions"]


def test_the_wiring_keeps_findings_in_the_user_cache_directory(tmp_path):
    assert server_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "agent"
    assert server_cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "agent"


def test_two_runs_built_by_the_wiring_probe_a_loopback_server_once(fake_server, tmp_path):
    import io

    from agent_cli.cli.config.settings import load_settings
    from agent_cli.cli.wiring import RunOptions, build_model
    from agent_cli.ui.console import make_console

    srv = fake_server([], n_ctx=4096)
    settings = load_settings(None, {"base_url": srv.url}, env={}, user_rc=tmp_path / "none")
    console = make_console("json", out=io.StringIO(), err=io.StringIO())
    windows = []
    for _ in range(2):
        model = build_model(settings, RunOptions(goal="g", repo=tmp_path), console)
        windows.append(model.context_window)
    assert windows == [4096, 4096]
    assert probes(srv).count("/props") == 1
    # kept in $XDG_CACHE_HOME/agent, which conftest points into this test's tmp_path
    assert (tmp_path / "user-cache" / "agent" / FILE_NAME).is_file()
