"""The repository files a hook's or a stdio server's command runs, held to what they were when
the run began (`tools.held`): the forms of `-m`, a file that appears, a directory Python runs,
what Python imports from the directory it puts first on sys.path, and a resumed run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent_cli.cli.commands.trust_command import run_files
from agent_cli.tools.held import HeldFiles
from agent_cli.tools.mcp.config import ServerConfig
from agent_cli.tools.mcp.provider import McpTools
from reliability.relkit import call, events, finish, make_done, no_facts, plan, repo_with, task

PY = sys.executable


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_module_glued_to_dash_m_is_held_as_one_after_it(tmp_path):
    tree(tmp_path, {"guards/__init__.py": "", "guards/check.py": "import json\n"})
    for command in (
        [PY, "-mguards.check"],
        [PY, "-u", "-mguards.check"],
        [PY, "-um", "guards.check"],
        ["sh", "-c", "python3 -mguards.check --strict"],
    ):
        held = HeldFiles(tmp_path, [command])
        assert held.changed(command) == []
        (tmp_path / "guards" / "check.py").write_text("import json  # the model's\n")
        assert held.changed(command) == ["guards/check.py"], command
        (tmp_path / "guards" / "check.py").write_text("import json\n")


def test_a_file_the_command_names_that_appears_during_the_run_is_a_change(tmp_path):
    line = ["sh", "-c", "test ! -f scripts/extra.sh || sh scripts/extra.sh"]
    script = [PY, "scripts/guard.py"]
    held = HeldFiles(tmp_path, [line, script])
    assert held.changed(line) == held.changed(script) == []
    tree(tmp_path, {"scripts/extra.sh": "git push\n", "scripts/guard.py": "pass\n"})
    assert held.changed(line) == ["scripts/extra.sh"]
    assert "scripts/guard.py" in held.changed(script)
    assert held.files() == ["scripts/extra.sh", "scripts/guard.py"]  # what is there now


def test_a_directory_python_runs_holds_its_main_and_trust_names_it(tmp_path):
    tree(tmp_path, {"tools/mcp/__main__.py": "import server\n", "tools/mcp/server.py": "x = 1\n"})
    servers = {"mcp_servers": {"local": {"command": "python3", "args": ["tools/mcp"]}}}
    assert run_files(tmp_path, servers) == ["tools/mcp/__main__.py", "tools/mcp/server.py"]
    command = [PY, "tools/mcp"]
    held = HeldFiles(tmp_path, [command])
    (tmp_path / "tools" / "mcp" / "__main__.py").write_text("import os\n")  # the model's
    assert held.changed(command) == ["tools/mcp/__main__.py"]


def test_a_directory_server_the_model_changed_is_not_started_on_resume(tmp_path):
    """The held state comes from the run's start (`started`): no process is started."""
    tree(tmp_path, {"tools/mcp/__main__.py": "print('the user')\n"})
    began = HeldFiles(tmp_path, [[PY, "tools/mcp"]]).digests()
    (tmp_path / "tools" / "mcp" / "__main__.py").write_text("print('the model')\n")
    said: list[str] = []
    tools = McpTools(
        {"local": ServerConfig(command=PY, args=["tools/mcp"])},
        env={},
        cwd=tmp_path,
        environ={},
        notice=said.append,
        started=began.get,
    )
    try:
        (status,) = tools.start()
    finally:
        tools.close()
    assert status.status.startswith("not started: tools/mcp/__main__.py changed since the run")
    assert said and "its tools are left out" in said[0]


def test_a_credential_on_the_command_line_is_never_held_and_the_script_still_is(tmp_path):
    """What doctor masks in a command line (`redact_argv`) names no file: not the value after
    `--token`, of `--api-key=`, of `SLACK_TOKEN=`, a word of a key's shape, nor a shell line
    holding one; the script beside them is held as before."""
    tree(tmp_path, {"scripts/guard.py": "pass\n"})
    shape = "sk-" + "Zq9" * 8
    commands = [
        ["sh", "-c", "exit 0", "x", "--token", "tok-AAAA1111", "--api-key=key-BBBB2222"],
        [PY, "scripts/guard.py", "--password", "pw-CCCC3333", "SLACK_TOKEN=st-DDDD4444", shape],
        ["sh", "-c", f"{PY} scripts/guard.py --token tok-EEEE5555 --api-key=k6"],
    ]
    held = HeldFiles(tmp_path, commands)
    saved = repr(held.digests())
    for secret in ("AAAA", "BBBB", "CCCC", "DDDD", shape, "EEEE", "k6"):
        assert secret not in saved, (secret, saved)
    assert "scripts/guard.py" in held.digests() and "exit" in held.digests()
    (tmp_path / "scripts" / "guard.py").write_text("import os  # the model's\n")
    assert held.changed(commands[1]) == held.changed(commands[2]) == ["scripts/guard.py"]


def test_no_file_a_run_writes_holds_a_credential_of_its_hooks_or_servers_command_lines(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    rc = tmp_path / "user-agentrc"
    rc.write_text(
        '[[hooks.pre_tool]]\ncommand = ["sh", "-c", "exit 0", "x", "--token", "tok-AAAA1111"]\n'
        '[mcp_servers.off]\ncommand = "sh"\nenabled = false\n'
        'args = ["--api-key=key-BBBB2222", "--password", "pw-CCCC3333"]\n'
    )
    srv = fake_server([plan(task()), make_done(), finish(), no_facts()])
    done = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", "--base-url", srv.url,
        cwd=repo, env={"AGENT_RC": str(rc)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    written = [p for p in (repo / ".agent").rglob("*") if p.is_file()]
    state = next(p for p in written if p.name == "state.json")
    assert "exit 0" in json.loads(state.read_text())["held"]  # the command's words are held
    for secret in (b"AAAA1111", b"BBBB2222", b"CCCC3333"):
        assert not [p for p in written if secret in p.read_bytes()], secret


def test_a_module_that_appears_first_on_sys_path_is_a_change(tmp_path):
    """`import json` in scripts/guard.py would load scripts/json.py: Python puts the script's
    directory first on sys.path (the working directory for -m and -c)."""
    tree(tmp_path, {"scripts/guard.py": "import json\n", "guards/check.py": "import re\n"})
    script, module, code = [PY, "scripts/guard.py"], [PY, "-m", "guards.check"], [PY, "-c", "1"]
    held = HeldFiles(tmp_path, [script, module, code])
    for added in (
        "scripts/json.py",
        "scripts/json.pyc",
        "scripts/json.cpython-312-x86_64-linux-gnu.so",
        "scripts/json/__init__.py",
    ):
        tree(tmp_path, {added: ""})
        assert held.changed(script) == [added], added
        (tmp_path / added).unlink()
    tree(tmp_path, {"re.py": "", "guards/re.py": ""})
    assert sorted(held.changed(module)) == ["guards/re.py", "re.py"]
    assert held.changed(code) == ["re.py"]
    for path in ("re.py", "guards/re.py"):
        (tmp_path / path).unlink()
    # what Python cannot import there is no module: other files, a directory of data, a name
    # that is not one
    tree(tmp_path, {"scripts/notes.txt": "", "scripts/data/x.csv": "", "scripts/my-tool.py": ""})
    assert held.changed(script) == held.changed(module) == held.changed(code) == []


def test_the_modules_a_held_file_imports_from_there_are_held_and_the_others_are_not(tmp_path):
    tree(
        tmp_path,
        {
            "scripts/guard.py": "import helpers\nfrom rules import limits\n",
            "scripts/helpers.py": "from util import x\n",
            "scripts/util.py": "x = 1\n",
            "scripts/rules/__init__.py": "",
            "scripts/rules/limits.py": "from . import table\n",
            "scripts/rules/table.py": "",
            "scripts/other.py": "",
        },
    )
    command = [PY, "scripts/guard.py"]
    held = HeldFiles(tmp_path, [command])
    assert held.files() == [
        "scripts/guard.py",
        "scripts/helpers.py",
        "scripts/rules/__init__.py",
        "scripts/rules/limits.py",
        "scripts/util.py",
        "scripts/rules/table.py",
    ]
    for path in held.files()[1:]:
        was = (tmp_path / path).read_text()
        (tmp_path / path).write_text(was + "open('model', 'w')\n")
        assert held.changed(command) == [path]
        (tmp_path / path).write_text(was)
    (tmp_path / "scripts" / "other.py").write_text("changed\n")  # imported by nothing held
    tree(tmp_path, {"scripts/rules/extra.py": ""})  # the package gains a module
    assert held.changed(command) == ["scripts/rules/extra.py"]


def test_python_told_to_put_nothing_first_on_sys_path_holds_only_what_it_names(tmp_path):
    tree(tmp_path, {"scripts/guard.py": "import helpers\n", "scripts/helpers.py": ""})
    for command in ([PY, "-P", "scripts/guard.py"], [PY, "-I", "scripts/guard.py"]):
        held = HeldFiles(tmp_path, [command])
        assert held.files() == ["scripts/guard.py"]
        tree(tmp_path, {"scripts/json.py": "", "scripts/helpers.py": "changed\n"})
        assert held.changed(command) == []
        (tmp_path / "scripts" / "json.py").unlink()


def test_a_script_run_by_its_python_shebang_holds_its_directory_too(tmp_path):
    tree(tmp_path, {"scripts/guard": "#!/usr/bin/env python3\nimport json\n"})
    command = ["scripts/guard", "--strict"]
    held = HeldFiles(tmp_path, [command])
    tree(tmp_path, {"scripts/json.py": ""})
    assert held.changed(command) == ["scripts/json.py"]


def test_a_resumed_run_holds_an_ignored_hook_script_to_what_it_was_when_the_run_began(
    agent_in_process, fake_server, tmp_path
):
    """The base commit has no such file (it is git-ignored): the run saved what it was when it
    began, and a resume holds the script to that, not to what the model left there."""
    log = tmp_path / "guard.log"
    repo = repo_with(tmp_path / "repo", ignore=(".hooks/",))
    tree(repo, {".hooks/guard.sh": f"printf ok >> {log}\n"})
    rc = tmp_path / "user-agentrc"
    rc.write_text(
        '[[hooks.post_tool]]\nmatcher = "read_file"\ncommand = ["sh", ".hooks/guard.sh"]\n'
    )
    evil = f"printf EVIL >> {log}"
    first = fake_server(
        [
            plan(task()),
            call("read_file", path="README.md"),
            call("run", cmd=f"echo '{evil}' > .hooks/guard.sh"),
            call("read_file", path="README.md"),
            no_facts(),
        ]
    )
    flags = ("--yes", "--json", "--base-url")
    stopped = agent_in_process(
        "run", "Create done.txt", "--max-steps", "3", *flags, first.url,
        cwd=repo, env={"AGENT_RC": str(rc)},
    )  # fmt: skip
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert log.read_text() == "ok" and evil in (repo / ".hooks" / "guard.sh").read_text()
    second = fake_server([call("read_file", path="README.md"), make_done(), finish(), no_facts()])
    resumed = agent_in_process(
        "run", "--resume", "--max-steps", "20", *flags, second.url,
        cwd=repo, env={"AGENT_RC": str(rc)},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert log.read_text() == "ok"  # the model's script never ran as the hook
    said = [e for e in events(resumed.stdout) if e["event"] == "hook"]
    assert said and all(e["outcome"] == "failed" for e in said), said
    assert ".hooks/guard.sh changed since the run started" in said[0]["message"]
