"""`agent --help`, `--version` and `agent doctor` as real processes."""

import re
import subprocess
import sys

from agent_cli import __version__
from conftest import DOCTOR_REPLIES


def test_help_lists_commands_and_imports_nothing_heavy():
    code = (
        "import sys; from agent_cli import cli; "
        "heavy = {'openai', 'chromadb', 'git', 'tiktoken', 'pydantic_settings', 'numpy'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_version_and_help(run_agent):
    assert run_agent("--version").stdout.strip() == f"agent {__version__}"
    helped = run_agent("--help")
    assert helped.returncode == 0 and "doctor" in helped.stdout


def test_doctor_passes_against_the_loopback_server(run_agent, fake_server, scratch_repo):
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    env = {"OPENAI_API_KEY": "sk-doctor-test-key-1234567890"}
    proc = run_agent("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sk-doctor-test-key-1234567890" not in proc.stdout
    assert "base_url" in proc.stdout and "(flag)" in proc.stdout
    assert "env OPENAI_API_KEY" in proc.stdout
    assert "[24912, 2375]" in proc.stdout
    assert f"embedded Chroma at {scratch_repo / '.agent' / 'chroma'}" in proc.stdout
    assert any(r["path"].endswith("/models") for r in srv.requests)


def _fail_lines(proc):
    return [line for line in proc.stdout.splitlines() if "FAIL" in line]


def test_doctor_unreachable_endpoint(run_agent, scratch_repo):
    proc = run_agent("doctor", "--base-url", "http://127.0.0.1:9/v1", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    fails = _fail_lines(proc)
    assert len(fails) == 1 and "cannot reach the model endpoint" in fails[0]


def test_doctor_without_api_key(run_agent, scratch_repo):
    proc = run_agent("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    fails = _fail_lines(proc)
    assert len(fails) == 1 and "no API key" in fails[0] and "OPENAI_API_KEY" in fails[0]


def test_doctor_with_broken_agentrc(run_agent, scratch_repo):
    (scratch_repo / ".agentrc").write_text("max_steps = 'lots'\n")
    proc = run_agent("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and proc.stderr == ""
    fails = _fail_lines(proc)
    assert len(fails) == 1 and ".agentrc" in fails[0] and "max_steps" in fails[0]
    assert re.search(r"max_steps +200 ", proc.stdout)  # the keys, with their defaults


def test_doctor_reports_a_model_the_endpoint_does_not_serve(run_agent, fake_server, scratch_repo):
    srv = fake_server([], models=("llama3",))
    proc = run_agent("doctor", "--base-url", srv.url, "--model", "gpt-x", cwd=scratch_repo)
    assert proc.returncode == 1 and "llama3" in _fail_lines(proc)[0]


def test_doctor_outside_a_repository(run_agent, fake_server, tmp_path):
    srv = fake_server([])
    proc = run_agent("doctor", "--base-url", srv.url, cwd=tmp_path)
    assert proc.returncode == 1
    assert any("not inside a git repository" in line for line in _fail_lines(proc))


def test_doctor_lists_every_key_and_says_not_set_rather_than_none(run_agent, scratch_repo):
    from agent_cli.cli.config.settings import FIELDS

    proc = run_agent("doctor", "--base-url", "http://127.0.0.1:9/v1", cwd=scratch_repo)
    listed = [
        line.split()[0]
        for line in proc.stdout.splitlines()
        if line.startswith("  ") and len(line.split()) > 1 and line.split()[0] in FIELDS
    ]
    assert listed == FIELDS
    assert "None" not in proc.stdout
    for key in ("api_key", "embedding_model", "home"):
        line = next(ln for ln in proc.stdout.splitlines() if ln.split()[:1] == [key])
        assert "(not set)" in line
    assert re.search(r"deny_commands +\(none\) ", proc.stdout)


def test_doctor_with_a_misspelt_key_still_lists_the_keys(run_agent, scratch_repo):
    (scratch_repo / ".agentrc").write_text('modle = "gpt-4o"\n')
    proc = run_agent("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert "  model " in proc.stdout and "  approval " in proc.stdout
    fails = _fail_lines(proc)
    assert len(fails) == 1 and "unknown key 'modle'" in fails[0]
    assert "did you mean `model`?" in fails[0]
