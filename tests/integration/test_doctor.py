"""`agent --help` and `--version` as real processes, and `agent doctor` through the same entry
point in the test's process (on a terminal, as a real process)."""

import re
import subprocess
import sys

import pytest
from ptykit import pty_agent  # noqa: F401 (fixture)

from agent_cli import __version__
from conftest import DOCTOR_REPLIES, make_repo
from ttykit import Screen


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


def test_doctor_passes_against_the_loopback_server(agent_in_process, fake_server, scratch_repo):
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    env = {"OPENAI_API_KEY": "sk-doctor-test-key-1234567890"}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sk-doctor-test-key-1234567890" not in proc.stdout
    assert "base_url" in proc.stdout and "(flag)" in proc.stdout
    assert "env OPENAI_API_KEY" in proc.stdout
    assert "[24912, 2375]" in proc.stdout
    assert f"embedded Chroma at {scratch_repo / '.agent' / 'chroma'}" in proc.stdout
    assert any(r["path"].endswith("/models") for r in srv.requests)


def _fail_lines(proc):
    return [line for line in proc.stdout.splitlines() if "FAIL" in line]


def test_doctor_unreachable_endpoint(agent_in_process, scratch_repo):
    proc = agent_in_process("doctor", "--base-url", "http://127.0.0.1:9/v1", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    fails = _fail_lines(proc)
    assert len(fails) == 1 and "cannot reach the model endpoint" in fails[0]
    assert "OPENAI_BASE_URL" in fails[0] and "agent doctor" not in fails[0], fails[0]


def test_doctor_without_api_key(agent_in_process, scratch_repo):
    proc = agent_in_process("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    fails = _fail_lines(proc)
    assert len(fails) == 1 and "no API key" in fails[0] and "OPENAI_API_KEY" in fails[0]


def test_doctor_with_broken_agentrc(agent_in_process, scratch_repo):
    (scratch_repo / ".agentrc").write_text("max_steps = 'lots'\n")
    proc = agent_in_process("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and proc.stderr == ""
    fails = _fail_lines(proc)
    assert len(fails) == 1 and ".agentrc" in fails[0] and "max_steps" in fails[0]
    assert re.search(r"max_steps +200 ", proc.stdout)  # the keys, with their defaults


def test_doctor_reports_a_model_the_endpoint_does_not_serve(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server([], models=("llama3",))
    proc = agent_in_process("doctor", "--base-url", srv.url, "--model", "gpt-x", cwd=scratch_repo)
    assert proc.returncode == 1 and "llama3" in _fail_lines(proc)[0]


def test_doctor_cuts_a_model_id_of_any_length_in_its_line(
    agent_in_process, fake_server, scratch_repo
):
    huge = "m" * 100_000
    srv = fake_server([], models=(huge, "llama3"))
    proc = agent_in_process("doctor", "--base-url", srv.url, "--model", "gpt-x", cwd=scratch_repo)
    (line,) = [line for line in _fail_lines(proc) if "endpoint" in line]
    assert "llama3" in line and "m" * 99 + "…" in line and len(line) < 500, len(line)


def test_doctor_outside_a_repository(agent_in_process, fake_server, tmp_path):
    srv = fake_server([])
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=tmp_path)
    assert proc.returncode == 1
    assert any("not inside a git repository" in line for line in _fail_lines(proc))


def test_doctor_names_a_bare_repository_and_a_git_directory_as_every_command_does(
    agent_in_process, fake_server, scratch_repo, tmp_path
):
    import subprocess

    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(scratch_repo), str(bare)], check=True)
    srv = fake_server([])
    for where, says in (
        (bare, "is a bare git repository"),
        (scratch_repo / ".git", f"is the git directory of {scratch_repo}"),
    ):
        proc = agent_in_process("doctor", "--base-url", srv.url, cwd=where)
        (line,) = [line for line in _fail_lines(proc) if " git " in line]
        assert says in line and "not inside a git repository" not in line, line


def test_doctor_says_a_file_error_in_one_check_and_goes_on_to_the_others(
    agent_in_process, scratch_repo
):
    home = "/tmp/" + "x" * 300  # a name the system refuses: OSError, not an AgentError
    proc = agent_in_process(
        "doctor", "--base-url", "http://127.0.0.1:9/v1", cwd=scratch_repo, env={"AGENT_HOME": home}
    )
    assert proc.returncode == 1 and "internal error" not in proc.stdout + proc.stderr
    state = next(line for line in _fail_lines(proc) if " state " in line)
    assert "File name too long" in state
    assert re.search(r"ok +git ", proc.stdout)  # the checks after it still ran


def test_doctor_lists_every_key_and_says_not_set_rather_than_none(agent_in_process, scratch_repo):
    from agent_cli.cli.config.settings import FIELDS

    proc = agent_in_process("doctor", "--base-url", "http://127.0.0.1:9/v1", cwd=scratch_repo)
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


def test_doctor_with_a_misspelt_key_still_lists_the_keys(agent_in_process, scratch_repo):
    (scratch_repo / ".agentrc").write_text('modle = "gpt-4o"\n')
    proc = agent_in_process("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert "  model " in proc.stdout and "  approval " in proc.stdout
    fails = _fail_lines(proc)
    assert len(fails) == 1 and "unknown key 'modle'" in fails[0]
    assert "did you mean `model`?" in fails[0]


def test_doctor_with_a_bad_value_does_not_call_the_keys_it_lists_the_settings(
    agent_in_process, scratch_repo
):
    (scratch_repo / ".agentrc").write_text('model = "gpt-4o"\nmax_steps = "lots"\n')
    proc = agent_in_process("doctor", cwd=scratch_repo)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "not read (see the settings check below)" in first and "defaults" in first
    assert "key 'max_steps'" in _fail_lines(proc)[0]


class _Odd:
    """A loopback HTTP server that answers every request with one fixed status and body."""

    def __init__(self, status: int, body: bytes, kind: str = "application/json") -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


KEY = "sk-proj-doctorechoesthekey0123456789"


def test_doctor_says_in_one_line_that_an_endpoint_serves_no_model_list(
    agent_in_process, scratch_repo
):
    for status, body, kind in (
        (200, b"<html><body>router login</body></html>", "text/html"),
        (200, b"\x00garbage{", "application/json"),
        (200, b'{"hello": "world"}', "application/json"),
    ):
        odd = _Odd(status, body, kind)
        try:
            proc = agent_in_process("doctor", "--base-url", odd.url, cwd=scratch_repo)
        finally:
            odd.close()
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, body
        assert "internal error" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        assert "git" in proc.stdout and "memory" in proc.stdout  # the later checks ran


def test_doctor_masks_a_key_the_endpoint_echoes_back(agent_in_process, scratch_repo):
    echo = f'{{"error": {{"message": "bad key: Bearer {KEY}"}}}}'.encode()
    odd = _Odd(401, echo)
    try:
        proc = agent_in_process(
            "doctor", "--base-url", odd.url, cwd=scratch_repo, env={"OPENAI_API_KEY": KEY}
        )
    finally:
        odd.close()
    assert proc.returncode == 1 and KEY not in proc.stdout + proc.stderr
    assert _fail_lines(proc), proc.stdout


def test_doctor_masks_a_token_in_a_hooks_command(agent_in_process, scratch_repo, tmp_path):
    user = tmp_path / "user.toml"
    user.write_text(
        '[[hooks.run_end]]\ncommand = ["curl", "-H", "Authorization: Bearer ghp_'
        + "a" * 36
        + '", "https://hooks.example/done", "token=sk-hookkey0123456789abcdef"]\n'
    )
    proc = agent_in_process("doctor", cwd=scratch_repo, env={"AGENT_RC": str(user)})
    assert "ghp_" + "a" * 36 not in proc.stdout and "sk-hookkey0123456789abcdef" not in proc.stdout
    assert "run_end: curl -H" in proc.stdout, proc.stdout


def test_doctor_masks_what_a_command_line_names_a_credential(
    agent_in_process, scratch_repo, tmp_path
):
    """A literal credential with no known key shape, in a hook's or an MCP server's argv, is
    masked where the option or variable before it says what it is; the rest stays readable."""
    secrets = ["xoxb-1234567890-abcdefghij", "hunter2hunter2", "abcd1234efgh5678", "zz99yy88xx77"]
    user = tmp_path / "user.toml"
    user.write_text(
        "[[hooks.pre_tool]]\n"
        f'command = ["no-such-notifier", "--token", "{secrets[0]}", "--password={secrets[1]}"]\n'
        "[mcp_servers.chat]\n"
        f'command = "no-such-server"\nargs = ["--api-key", "{secrets[2]}", '
        f'"SLACK_TOKEN={secrets[3]}", "--channel", "general"]\n'
    )
    proc = agent_in_process("doctor", cwd=scratch_repo, env={"AGENT_RC": str(user)})
    shown = proc.stdout + proc.stderr
    assert not [s for s in secrets if s in shown], shown
    assert "no-such-notifier --token [REDACTED] --password=[REDACTED]" in shown, shown
    assert "SLACK_TOKEN=[REDACTED]" in shown and "general" in shown, shown


def test_doctor_says_a_models_404_is_the_base_url_and_names_a_proxy(agent_in_process, scratch_repo):
    odd = _Odd(404, b'{"error": {"message": "no such path"}}')
    try:
        proc = agent_in_process(
            "doctor", "--base-url", odd.url.removesuffix("/v1"), cwd=scratch_repo
        )
    finally:
        odd.close()
    (line,) = _fail_lines(proc)
    assert "/models was not found (HTTP 404)" in line and "/v1" in line, line
    assert "model 'gpt-4o-mini'" not in line
    proxied = agent_in_process(
        "doctor", "--base-url", "http://192.0.2.10:8080/v1", cwd=scratch_repo,
        env={"HTTP_PROXY": "http://user:pw@127.0.0.1:9", "NO_PROXY": ""},
    )  # fmt: skip
    (line,) = _fail_lines(proxied)
    assert "through the proxy http://127.0.0.1:9" in line and "pw" not in line, line


def test_doctor_says_an_endpoint_lists_no_model(agent_in_process, scratch_repo):
    odd = _Odd(200, b'{"object": "list", "data": []}')
    try:
        proc = agent_in_process("doctor", "--base-url", odd.url, cwd=scratch_repo)
    finally:
        odd.close()
    assert "answers, but lists no model; requests name 'gpt-4o-mini'" in proc.stdout, proc.stdout
    assert "0 model(s)" not in proc.stdout


@pytest.mark.parametrize(
    "state, said",
    [
        ("no commit", "the repository has no commits yet"),
        ("detached", "HEAD is detached"),
        ("merging", "a merge is in progress"),
    ],
)
def test_doctor_fails_the_git_row_for_a_repository_every_run_refuses(
    agent_in_process, fake_server, tmp_path, state, said
):
    """A repository `agent run` would refuse is not passed as fine by doctor."""
    repo = tmp_path / "repo"
    if state == "no commit":
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "config", "user.email", "t@example.com"])
        subprocess.run(["git", "-C", str(repo), "config", "user.name", "T"])
    else:
        make_repo(repo)
        if state == "detached":
            subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach"], check=True)
        else:
            head = subprocess.run(
                ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
            ).stdout
            (repo / ".git" / "MERGE_HEAD").write_text(head)
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    env = {"OPENAI_API_KEY": "sk-doctor-test-key-1234567890"}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=repo, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = _fail_lines(proc)
    assert len(fails) == 1 and " git " in fails[0] and said in fails[0], fails


def test_doctor_on_a_terminal_says_what_the_server_check_waits_for(
    pty_agent, fake_server, scratch_repo
):
    """A local model can take minutes over the plan-sized reply: while it writes, the terminal
    says so instead of showing nothing after the settings; the words go once the check ends."""
    slow = [{**reply, "delay": 2} for reply in DOCTOR_REPLIES]
    srv = fake_server(slow, models=("gpt-4o-mini",))
    env = {"OPENAI_API_KEY": "sk-doctor-test-key-1234567890"}
    agent = pty_agent("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    agent.expect("a plan-sized reply (minutes on a slow model)", timeout=30)
    assert "ok   server" not in agent.text  # said while the check waits
    assert agent.wait(60) == 0
    screen = Screen(columns=200).feed(agent.buffer.replace("\r\n", "\n")).text()
    assert "minutes on a slow model" not in screen and "ok   server" in screen


def test_doctor_says_a_hook_whose_program_cannot_be_run(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    (scratch_repo / "guard.sh").write_text("#!/bin/sh\nexit 0\n")  # not executable
    rc = scratch_repo.parent / "user-agentrc"
    rc.write_text(
        '[[hooks.pre_tool]]\ncommand = ["no-such-guard-program"]\n'
        '[[hooks.post_tool]]\ncommand = ["true"]\n'
        '[[hooks.run_end]]\ncommand = ["./guard.sh"]\n'
    )
    env = {"OPENAI_API_KEY": "sk-doctor-test-key-1234567890", "AGENT_RC": str(rc)}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [ln for ln in _fail_lines(proc) if "hooks" in ln]
    assert "pre_tool `no-such-guard-program`" in line and "run_end `./guard.sh`" in line
    assert "post_tool" not in line
    # a pre_tool hook that cannot run blocks; a task_verified one is only a notice
    assert "pre_tool hook that cannot run blocks every tool it matches" in proc.stdout
    assert "task_verified hook that cannot run blocks" not in proc.stdout
    rc.write_text('[[hooks.post_tool]]\ncommand = ["true"]\n')
    again = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    proc = agent_in_process("doctor", "--base-url", again.url, cwd=scratch_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"ok\s+hooks\s+post_tool: true", proc.stdout)


def test_doctor_says_a_hook_the_sandbox_hides_as_a_sandboxed_run_finds_it(
    agent_in_process, fake_server, scratch_repo, tmp_path
):
    """bubblewrap gives hooks a private /tmp: a guard under /tmp outside the repository runs
    without the sandbox but cannot in it, and doctor says so where the run would block."""
    from agent_cli.core.errors import WorkspaceError
    from agent_cli.workspace.shell.runner import check_sandbox

    try:
        check_sandbox("bwrap")
    except WorkspaceError as e:
        pytest.skip(f"no sandbox here: {e}")
    guard = tmp_path / "outside" / "guard.sh"
    guard.parent.mkdir()
    guard.write_text("#!/bin/sh\nexit 0\n")
    guard.chmod(0o755)
    rc = tmp_path / "user-agentrc"
    rc.write_text(f'[[hooks.pre_tool]]\ncommand = ["{guard}"]\n')
    env = {"OPENAI_API_KEY": "sk-doctor-test-key-1234567890", "AGENT_RC": str(rc)}
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    plain = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    again = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    proc = agent_in_process(
        "doctor", "--base-url", again.url, cwd=scratch_repo, env={**env, "AGENT_SANDBOX": "bwrap"}
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [ln for ln in _fail_lines(proc) if "hooks" in ln]
    assert "pre_tool `" in line and "private /tmp" in proc.stdout, proc.stdout


def _closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # bound, then closed: nothing listens there


def test_doctor_names_the_roles_own_setting_that_fixes_its_endpoint(
    agent_in_process, fake_server, scratch_repo
):
    """A role's own key, model or address that fails is said as a run says it: for that role,
    naming the role's setting, not the API key, `--model` or `--base-url` of the others."""
    good, bad = "sk-goodgoodgoodgoodgood1234", "zz-Qw3rtyUiop9876Asdf"
    srv = fake_server(DOCTOR_REPLIES * 2, api_key=good)
    env = {"OPENAI_API_KEY": good, "EXEC_KEY": bad, "AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY"}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    (line,) = _fail_lines(proc)
    assert "endpoint" in line and "for executor: " in line and "refused the API key" in line
    assert "check EXEC_KEY" in line and "OPENAI_API_KEY" not in line and bad not in line, line

    srv = fake_server(DOCTOR_REPLIES * 2)
    env = {"AGENT_EXECUTOR_MODEL": "nope-model"}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    (line,) = _fail_lines(proc)
    assert "for executor: model 'nope-model' is not served" in line, line
    assert "set executor_model to one of: gpt-4o-mini, fake-model" in line and "--model" not in line

    srv, down = fake_server(DOCTOR_REPLIES * 2), _closed_port_url()
    env = {"AGENT_VERIFIER_BASE_URL": down}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    (line,) = _fail_lines(proc)
    assert f"cannot reach the verifier model endpoint {down}" in line, line
    assert "check verifier_base_url" in line and "--base-url" not in line, line
    assert "agent doctor" not in line, line


def test_doctor_says_a_refused_role_key_on_the_server_line_for_its_role(
    agent_in_process, fake_server, scratch_repo
):
    refused = {"status": 401, "body": '{"error": {"message": "Incorrect API key provided"}}'}
    srv = fake_server([*DOCTOR_REPLIES, refused])  # models listed; the executor's chat refused
    env = {"EXEC_KEY": "zz-Qw3rtyUiop9876Asdf", "AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY"}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    (line,) = _fail_lines(proc)
    assert " server " in line and "for executor: " in line and "check EXEC_KEY" in line, line


def test_doctor_checks_the_model_every_role_is_set_to(agent_in_process, fake_server, scratch_repo):
    """Roles that all name one model of their own share one endpoint: doctor checks that
    model, as a run asks for it, not `model`, which no role uses."""
    srv = fake_server(DOCTOR_REPLIES, models=("fake-model",))
    env = {f"AGENT_{role}_MODEL": "fake-model" for role in ("PLANNER", "EXECUTOR", "VERIFIER")}
    proc = agent_in_process(
        "doctor", "--base-url", srv.url, "--model", "gpt-x", cwd=scratch_repo, env=env
    )
    assert proc.returncode == 0, proc.stdout
    assert "'fake-model' among them" in proc.stdout and "for planner" not in proc.stdout
