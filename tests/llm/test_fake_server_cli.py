"""`python -m agent_cli.llm.fake_server`: its options, its URL line, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from agent_cli.llm.fake.server import main


def test_help_lists_the_script_and_the_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "SCRIPT.json" in out and "--port" in out and "--host" in out


@pytest.mark.parametrize(
    "content, said",
    [(None, "cannot read the script"), ("{not json", "is not JSON"), ('{"a": 1}', "JSON list")],
)
def test_a_missing_or_invalid_script_is_one_line_and_exit_2(tmp_path, capsys, content, said):
    script = tmp_path / "script.json"
    if content is not None:
        script.write_text(content)
    assert main([str(script)]) == 2
    err = capsys.readouterr().err
    assert said in err and str(script) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_port_in_use_is_one_line_and_exit_2(fake_server, capsys):
    taken = fake_server([])
    assert main(["--port", str(taken.port)]) == 2
    assert "cannot listen on 127.0.0.1:" in capsys.readouterr().err


@pytest.mark.slow
def test_the_module_serves_the_script_on_the_port_asked_for(tmp_path, fake_server):
    probe = fake_server([])  # a free port: taken, then let go for the module to use
    port = probe.port
    probe.stop()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "hello"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_cli.llm.fake_server", str(script), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port}/v1"
        request = urllib.request.Request(
            url + "/chat/completions",
            data=json.dumps({"model": "fake-model", "messages": []}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            reply = json.load(response)
        assert reply["choices"][0]["message"]["content"] == "hello"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
