"""The hook runner with real processes: stdin JSON, exits, timeouts, bounds, environment."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_cli.core.protocols import HookTask
from agent_cli.tools.hooks.config import HooksConfig, HookSpec, combined
from agent_cli.tools.hooks.process import HookPlace, run_hook
from agent_cli.tools.hooks.user import UserHooks
from agent_cli.workspace.shell.runner import scrub_env

PY = sys.executable
AT = HookTask(run_id="r1", goal="Create done.txt", index=0)


def place(root: Path, secrets: tuple[str, ...] = ()) -> HookPlace:
    return HookPlace(root=root, env=scrub_env(dict(os.environ), list(secrets)), secrets=secrets)


def hooks(root: Path, secrets: tuple[str, ...] = (), **events: list[dict]) -> UserHooks:
    return UserHooks(HooksConfig.model_validate(events), place(root, secrets))


def py(code: str, **spec) -> dict:
    return {"command": [PY, "-c", code], **spec}


def test_a_hook_reads_one_json_object_and_runs_in_the_repository_root(tmp_path):
    code = (
        "import json, os, sys; d = json.load(sys.stdin); "
        "open('seen.json', 'w').write(json.dumps({**d, 'cwd': os.getcwd()}))"
    )
    ran = hooks(tmp_path, pre_tool=[py(code)]).before_tool(
        AT, "write_file", '{"path": "a.txt", "content": "x"}'
    )
    assert [(e.outcome, e.blocks, e.exit_code) for e in ran] == [("ok", False, 0)]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["event"] == "pre_tool" and seen["run_id"] == "r1"
    assert seen["task"] == {"goal": "Create done.txt", "index": 0}
    assert seen["tool"] == "write_file" and seen["args"] == {"path": "a.txt", "content": "x"}
    assert seen["result"] is None and seen["cwd"] == str(tmp_path)


def test_exit_2_blocks_with_stderr_as_the_reason_and_later_hooks_do_not_run(tmp_path):
    block = py("import sys; sys.stderr.write('no writes under migrations/'); sys.exit(2)")
    later = py("open('later-ran', 'w')")
    ran = hooks(tmp_path, pre_tool=[block, later]).before_tool(AT, "write_file", "{}")
    assert len(ran) == 1 and ran[0].blocks and ran[0].outcome == "blocked"
    assert ran[0].message == "no writes under migrations/" and ran[0].exit_code == 2
    assert not (tmp_path / "later-ran").exists()


def test_exit_2_after_the_fact_is_a_notice_and_the_later_hooks_still_run(tmp_path):
    """At post_tool and run_end there is nothing left to refuse: exit 2 is only reported."""
    refuse = py("import sys; sys.stderr.write('too late'); sys.exit(2)")
    later = py("open('later-ran', 'a').write('x')")
    both = hooks(tmp_path, post_tool=[refuse, later], run_end=[refuse, later])
    after = both.after_tool(AT, "run", '{"cmd": "ls"}', {"ok": True, "text": "x"})
    end = both.run_end(AT, {"status": "verified"})
    for ran in (after, end):
        assert [(e.outcome, e.blocks, e.exit_code) for e in ran] == [
            ("failed", False, 2),
            ("ok", False, 0),
        ]
        assert ran[0].message == "exit 2: too late"
    assert (tmp_path / "later-ran").read_text() == "xx"


def test_another_exit_is_a_notice_and_does_not_block(tmp_path):
    ran = hooks(tmp_path, post_tool=[py("import sys; print('oops', file=sys.stderr); sys.exit(1)")])
    events = ran.after_tool(AT, "run", '{"cmd": "ls"}', {"ok": True, "text": "x"})
    assert [(e.outcome, e.blocks) for e in events] == [("failed", False)]
    assert events[0].message == "exit 1: oops"


def test_a_guard_that_cannot_run_blocks_the_tool_and_elsewhere_is_a_notice(tmp_path):
    """A pre_tool hook whose program is missing, not executable, or exits 127 as a shell does
    for a missing command, fails closed: a broken guard must not let every call through."""
    script = tmp_path / "guard.sh"
    script.write_text("#!/bin/sh\nexit 0\n")  # not executable
    for command in (["/no/such/hook"], [str(script)], ["sh", "-c", "no-such-guard-cmd"]):
        cfg = {"command": command}
        (ran,) = hooks(tmp_path, pre_tool=[cfg]).before_tool(AT, "run", "{}")
        assert ran.outcome == "blocked" and ran.blocks and ran.exit_code in (126, 127), command
        assert "could not be run" in ran.message and "blocks the tool" in ran.message
        (after,) = hooks(tmp_path, post_tool=[cfg]).after_tool(AT, "run", "{}", {"ok": True})
        assert after.outcome == "failed" and not after.blocks


def test_a_guard_killed_by_a_signal_blocks_the_tool_and_elsewhere_is_a_notice(tmp_path):
    """A guard that crashed or was killed (the OOM killer) never answered: like one that hangs,
    it must not let the call through, and the reason names the signal, not `exit -9`."""
    killed = py("import os, sys; print('half done', file=sys.stderr, flush=True); os.abort()")
    (ran,) = hooks(tmp_path, pre_tool=[killed]).before_tool(AT, "write_file", "{}")
    assert ran.outcome == "blocked" and ran.blocks and ran.exit_code == -6
    assert ran.message == (
        "the hook was killed by SIGABRT (signal 6) before it exited: half done; "
        "a pre_tool hook that does not answer blocks the tool"
    )
    (after,) = hooks(tmp_path, post_tool=[killed]).after_tool(AT, "run", "{}", {"ok": True})
    assert after.outcome == "failed" and not after.blocks
    assert after.message == "the hook was killed by SIGABRT (signal 6) before it exited: half done"


def test_a_pre_tool_hook_that_hangs_blocks_at_its_timeout_and_its_group_is_killed(tmp_path):
    # the hook's child writes its pid, then both sleep; neither may survive the timeout
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen(['sleep', '60']); open('child.pid', 'w').write(str(p.pid)); "
        "time.sleep(60)"
    )
    start = time.monotonic()
    ran = hooks(tmp_path, pre_tool=[py(code, timeout_s=1)]).before_tool(AT, "write_file", "{}")
    assert time.monotonic() - start < 10
    assert ran[0].outcome == "timed_out" and ran[0].blocks and ran[0].exit_code is None
    assert "timeout of 1s" in ran[0].message and "blocks the tool" in ran[0].message
    pid = int((tmp_path / "child.pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_other_hooks_that_hang_are_a_notice(tmp_path):
    hang = py("import time; time.sleep(60)", timeout_s=0.5)
    for event, call in (
        ("post_tool", lambda h: h.after_tool(AT, "run", "{}", {"ok": True, "text": ""})),
        ("task_verified", lambda h: h.task_verified(AT, {"passed": True})),
        ("run_end", lambda h: h.run_end(HookTask("r1"), {"status": "verified"})),
    ):
        ran = call(hooks(tmp_path, **{event: [hang]}))
        assert [(e.outcome, e.blocks) for e in ran] == [("timed_out", False)], event


def test_a_hook_that_exits_leaving_a_process_holding_its_pipes_is_not_waited_for(tmp_path):
    code = "import subprocess; subprocess.Popen(['sleep', '30'])"
    start = time.monotonic()
    ran = hooks(tmp_path, pre_tool=[py(code, timeout_s=20)]).before_tool(AT, "run", "{}")
    assert ran[0].outcome == "ok" and time.monotonic() - start < 5


def test_a_hook_that_does_not_read_a_large_input_is_not_stuck(tmp_path):
    ran = hooks(tmp_path, post_tool=[py("pass", timeout_s=10)]).after_tool(
        AT, "read_file", "{}", {"ok": True, "text": "x" * 10_000_000}
    )
    assert ran[0].outcome == "ok"


def test_output_is_bounded_and_redacted(tmp_path):
    secret = "sk-live-" + "q" * 20
    code = f"import sys; sys.stderr.write('key {secret} ' + 'y' * 100000); sys.exit(2)"
    ran = hooks(tmp_path, (secret,), pre_tool=[py(code)]).before_tool(AT, "run", "{}")
    assert secret not in ran[0].message and "[REDACTED]" in ran[0].message
    assert len(ran[0].message) < 5000 and "cut" in ran[0].message
    shown = hooks(tmp_path, (secret,), pre_tool=[py("pass", command=["true", secret])])
    assert shown.before_tool(AT, "run", "{}")[0].command == "true [REDACTED]"


def test_hooks_get_the_scrubbed_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-hooks-000000")
    monkeypatch.setenv("HOOK_VISIBLE", "yes")
    code = "import os, sys; sys.stderr.write(repr(sorted(os.environ))); sys.exit(2)"
    ran = hooks(tmp_path, pre_tool=[py(code)]).before_tool(AT, "run", "{}")
    assert "HOOK_VISIBLE" in ran[0].message and "OPENAI_API_KEY" not in ran[0].message


def test_the_matcher_is_a_full_match_over_the_tool_name(tmp_path):
    h = hooks(tmp_path, pre_tool=[py("pass", matcher="write_file|edit_file|mcp__.*")])
    assert [len(h.before_tool(AT, t, "{}")) for t in ("write_file", "edit_file")] == [1, 1]
    assert len(h.before_tool(AT, "mcp__time__get_current_time", "{}")) == 1
    assert h.before_tool(AT, "read_file", "{}") == []
    assert h.before_tool(AT, "write_file_2", "{}") == []  # full match, not a search
    assert len(hooks(tmp_path, pre_tool=[py("pass")]).before_tool(AT, "anything", "{}")) == 1


@pytest.mark.parametrize(
    ("matcher", "needs"),
    [
        (r"mcp__git__git\.push", "."),  # the server's own name, its dot escaped
        ("mcp__fs__read/file|mcp__fs__write/file", "/"),
        ("mcp__srv__(?:open|close) file", " "),
        ("mcp__x__[./]x", "."),
    ],
)
def test_a_matcher_that_can_match_no_tool_name_is_refused_saying_why(matcher, needs):
    """A tool's name holds only letters, digits, _ and -: a matcher needing any other
    character (a server's own `git.push`) would leave its hook never run, unseen."""
    with pytest.raises(ValidationError) as refused:
        HookSpec.model_validate({"command": ["x"], "matcher": matcher})
    said = str(refused.value)
    assert f"matches no tool: it needs {needs!r}" in said and "mcp__SERVER__git_push" in said


@pytest.mark.parametrize(
    "matcher",
    ["mcp__git__git.push", "mcp__fs__read/?file", "write_file|mcp__fs__read/file", r"[\w.]+"],
)
def test_a_matcher_that_can_match_some_tool_name_is_taken(matcher):
    assert HookSpec.model_validate({"command": ["x"], "matcher": matcher}).matcher == matcher


def test_the_sandbox_keeps_a_hook_from_writing_outside_the_repository(tmp_path):
    from agent_cli.core.errors import WorkspaceError
    from agent_cli.workspace.shell.runner import check_sandbox

    try:
        check_sandbox("bwrap")
    except WorkspaceError as e:
        pytest.skip(f"no sandbox here: {e}")
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    code = f"open({str(outside / 'x')!r}, 'w')"
    sandboxed = HookPlace(root=repo, env=scrub_env(dict(os.environ)), sandbox="bwrap")
    finished = run_hook([PY, "-c", code], b"{}", sandboxed, 20)
    assert finished.exit_code not in (0, None) and not (outside / "x").exists()
    inside = run_hook([PY, "-c", "open('x', 'w')"], b"{}", sandboxed, 20)
    assert inside.exit_code == 0 and (repo / "x").exists()


def _sandboxed(root: Path) -> HookPlace:
    """`root`'s hooks under bubblewrap; the test is skipped where there is none."""
    from agent_cli.core.errors import WorkspaceError
    from agent_cli.workspace.shell.runner import check_sandbox

    try:
        check_sandbox("bwrap")
    except WorkspaceError as e:
        pytest.skip(f"no sandbox here: {e}")
    return HookPlace(root=root, env=scrub_env(dict(os.environ)), sandbox="bwrap")


def test_in_the_sandbox_a_guard_that_cannot_run_or_is_killed_blocks_as_without_it(tmp_path):
    """bubblewrap exits 1 when it cannot start the hook and 128+N when the hook is killed by
    signal N; a broken guard must fail closed in the sandbox too, and say what happened."""
    repo, outside = tmp_path / "repo", tmp_path / "outside" / "guard.sh"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "guard.sh").write_text("#!/bin/sh\nexit 0\n")  # not executable
    outside.parent.mkdir()
    outside.write_text("#!/bin/sh\necho refused >&2\nexit 2\n")
    outside.chmod(0o755)  # runs outside the sandbox; inside, its private /tmp hides it
    (repo / "scripts" / "bad.sh").write_text("#!/no/such/interpreter\n")
    (repo / "scripts" / "bad.sh").chmod(0o755)  # execvp itself fails, after the check
    cases = {
        "no-such-guard": (127, "no-such-guard: command not found"),
        "./scripts/guard.sh": (126, "./scripts/guard.sh: cannot run it"),
        str(outside): (127, "not found in the sandbox: bubblewrap gives a hook a private /tmp"),
        "./scripts/bad.sh": (127, "./scripts/bad.sh: command not found"),
        "kill -KILL $$": (-9, "the hook was killed by SIGKILL (signal 9) before it exited"),
        "kill -SEGV $$": (-11, "the hook was killed by SIGSEGV (signal 11) before it exited"),
    }
    sandboxed = _sandboxed(repo)
    for program, (code, said) in cases.items():
        spec = HookSpec(command=["sh", "-c", program] if "$$" in program else [program])
        user = UserHooks(HooksConfig(pre_tool=[spec], post_tool=[spec]), sandboxed)
        (ran,) = user.before_tool(AT, "write_file", "{}")
        assert (ran.outcome, ran.blocks, ran.exit_code) == ("blocked", True, code), ran
        assert said in ran.message and "blocks the tool" in ran.message, ran.message
        (after,) = user.after_tool(AT, "write_file", "{}", {"ok": True})
        assert (after.outcome, after.blocks, after.exit_code) == ("failed", False, code), after
    # what runs in the sandbox still runs, and its own exits are its own
    fine = run_hook(["sh", "-c", "echo said >&2; exit 1"], b"", sandboxed, 20)
    assert (fine.exit_code, fine.stderr.strip()) == (1, "said")


@pytest.mark.parametrize(
    "spec",
    [
        {"command": []},
        {"command": [""]},
        {"command": ["x"], "matcher": "("},
        {"command": ["x"], "timeout_s": 0},
        {"command": ["x"], "timeout_s": 100_000},
        {"command": ["x"], "typo": 1},
        {"command": ["python", "hook\0.py"]},
    ],
)
def test_a_bad_hook_table_is_refused(spec):
    with pytest.raises(ValidationError):
        HookSpec.model_validate(spec)


def test_a_repositorys_hooks_come_after_the_users():
    user = HooksConfig.model_validate({"pre_tool": [{"command": ["user"]}]})
    both = HooksConfig.model_validate(
        combined(user, {"pre_tool": [{"command": ["repo"]}], "run_end": [{"command": ["end"]}]})
    )
    assert [h.command for h in both.pre_tool] == [["user"], ["repo"]]
    assert [h.command for h in both.run_end] == [["end"]] and both.any()
    assert not HooksConfig().any()


def test_a_post_tool_hook_gets_the_result_bounded(tmp_path):
    code = "import sys; open('seen.json', 'w').write(sys.stdin.read())"
    h = hooks(tmp_path, post_tool=[py(code)])
    text = "r" * 60_000
    ran = h.after_tool(AT, "run", '{"cmd": "ls"}', {"ok": False, "text": text, "summary": "exit 1"})
    assert ran[0].outcome == "ok"
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["event"] == "post_tool" and seen["args"] == {"cmd": "ls"}
    assert seen["result"]["ok"] is False and seen["result"]["summary"] == "exit 1"
    assert len(seen["result"]["text"]) == 50_000


def test_arguments_that_are_not_json_reach_the_hook_as_sent(tmp_path):
    code = "import json, sys; sys.stderr.write(repr(json.load(sys.stdin)['args'])); sys.exit(2)"
    ran = hooks(tmp_path, pre_tool=[py(code)]).before_tool(AT, "write_file", '{"path": ')
    assert ran[0].message == repr('{"path": ')


def test_a_hook_whose_file_in_the_repository_changed_during_the_run_is_not_run(tmp_path):
    """A guard the model rewrote (or deleted) would run the model's code as the user's hook."""
    guard = tmp_path / "scripts" / "guard.sh"
    guard.parent.mkdir()
    guard.write_text("printf x >> guard-ran\n")
    spec = {"command": ["sh", "scripts/guard.sh"]}
    user = hooks(tmp_path, pre_tool=[spec], post_tool=[spec])
    assert [e.outcome for e in user.before_tool(AT, "run", "{}")] == ["ok"]
    assert (tmp_path / "guard-ran").read_text() == "x"
    guard.write_text("git push\n")  # what a model could write
    before = user.before_tool(AT, "run", "{}")
    assert [(e.outcome, e.blocks) for e in before] == [("blocked", True)]
    assert "scripts/guard.sh changed since the run started" in before[0].message
    after = user.after_tool(AT, "run", "{}", {"ok": True, "text": ""})
    assert [(e.outcome, e.blocks) for e in after] == [("failed", False)]
    guard.unlink()  # gone is changed too: the guard does not fail open
    assert user.before_tool(AT, "run", "{}")[0].blocks
    assert (tmp_path / "guard-ran").read_text() == "x"  # it ran once, before the change


def test_a_file_a_shell_line_or_an_option_names_is_held_too(tmp_path):
    """`sh -c "sh scripts/guard.sh"` runs the file as surely as `sh scripts/guard.sh` does."""
    guard, rules = tmp_path / "scripts" / "guard.sh", tmp_path / "rules.txt"
    guard.parent.mkdir()
    guard.write_text("printf x >> guard-ran\n")
    rules.write_text("no pushes\n")
    line = {"command": ["sh", "-c", "sh scripts/guard.sh 'two words'"]}
    option = {"command": ["sh", "-c", "exit 0", "--rules=rules.txt"]}
    user = hooks(tmp_path, pre_tool=[line, option])
    assert [e.outcome for e in user.before_tool(AT, "run", "{}")] == ["ok", "ok"]
    guard.write_text("git push\n")  # what a model could write
    (refused,) = user.before_tool(AT, "run", "{}")
    assert refused.blocks and "scripts/guard.sh changed since the run started" in refused.message
    guard.write_text("printf x >> guard-ran\n")
    rules.write_text("anything goes\n")
    ran = user.before_tool(AT, "run", "{}")
    assert [e.outcome for e in ran] == ["ok", "blocked"]
    assert "rules.txt changed since the run started" in ran[1].message
    assert (tmp_path / "guard-ran").read_text() == "xx"


@pytest.mark.slow  # the hook is a Python module
def test_the_files_python_dash_m_runs_are_held_and_a_package_init_may_not_appear(tmp_path):
    check = tmp_path / "guards" / "check.py"
    check.parent.mkdir()
    check.write_text("open('ran', 'a').write('ok')\n")
    user = hooks(tmp_path, pre_tool=[{"command": [PY, "-m", "guards.check"]}])
    assert [e.outcome for e in user.before_tool(AT, "run", "{}")] == ["ok"]
    init = check.parent / "__init__.py"
    init.write_text("open('ran', 'a').write('EVIL')\n")  # runs first, on import
    (refused,) = user.before_tool(AT, "run", "{}")
    assert refused.blocks and "guards/__init__.py changed since the run started" in refused.message
    init.unlink()
    check.write_text("open('ran', 'a').write('EVIL')\n")
    (refused,) = user.before_tool(AT, "run", "{}")
    assert refused.blocks and "guards/check.py changed since the run started" in refused.message
    assert (tmp_path / "ran").read_text() == "ok"


def test_a_link_in_the_repository_to_a_guard_outside_it_is_held_too(tmp_path):
    """The guard lives outside the repository, but the link to it is inside, where the model
    can replace it with a file of its own."""
    outside, repo = tmp_path / "outside" / "guard.sh", tmp_path / "repo"
    outside.parent.mkdir()
    outside.write_text("printf ok >> ran\n")
    (repo / "scripts").mkdir(parents=True)
    link = repo / "scripts" / "guard.sh"
    link.symlink_to(outside)
    user = hooks(repo, pre_tool=[{"command": ["sh", "scripts/guard.sh"]}])
    assert [e.outcome for e in user.before_tool(AT, "run", "{}")] == ["ok"]
    link.unlink()
    link.write_text("printf EVIL >> ran\n")  # what a model could write in its place
    (refused,) = user.before_tool(AT, "run", "{}")
    assert refused.blocks and "scripts/guard.sh changed since the run started" in refused.message
    assert (repo / "ran").read_text() == "ok"


def test_a_pyc_the_model_writes_beside_a_module_the_hook_imports_is_never_loaded(tmp_path):
    """A `.pyc` in `__pycache__` whose header matches its module's source (mtime and size) is
    what Python loads in place of the source: the hook keeps its bytecode elsewhere."""
    import importlib.util
    import py_compile
    import shutil
    import subprocess

    (tmp_path / "helpers.py").write_text("VERDICT = 2\n")  # the user's: refuse
    evil = tmp_path / "evil" / "helpers.py"
    evil.parent.mkdir()
    evil.write_text("VERDICT = 0\n")  # the model's: the same size
    mtime = (tmp_path / "helpers.py").stat().st_mtime_ns
    os.utime(evil, ns=(mtime, mtime))
    cache = importlib.util.cache_from_source(str(tmp_path / "helpers.py"))
    py_compile.compile(str(evil), cfile=cache, doraise=True)
    planted = Path(cache).read_bytes()
    verdict = [PY, "-c", "import sys, helpers; sys.exit(helpers.VERDICT)"]
    assert subprocess.run(verdict, cwd=tmp_path).returncode == 0, "Python alone loads the pyc"
    ran = hooks(tmp_path, pre_tool=[{"command": verdict}]).before_tool(AT, "write_file", "{}")
    assert [(e.outcome, e.exit_code) for e in ran] == [("blocked", 2)]
    shutil.rmtree(tmp_path / "__pycache__")
    os.symlink(tmp_path / "evil", tmp_path / "__pycache__")  # a cache that is a link
    (tmp_path / "evil" / Path(cache).name).write_bytes(planted)
    assert subprocess.run(verdict, cwd=tmp_path).returncode == 0, "Python loads it through it"
    ran = hooks(tmp_path, pre_tool=[{"command": verdict}]).before_tool(AT, "write_file", "{}")
    assert [(e.outcome, e.exit_code) for e in ran] == [("blocked", 2)]


def test_a_hook_carries_the_mark_a_later_run_finds_it_by_if_this_agent_is_killed(tmp_path):
    from agent_cli.workspace.shell import strays

    done = run_hook(["sh", "-c", "echo $AGENT_COMMAND_OF"], b"", place(tmp_path), 30)
    assert done.stdout.strip() == strays.mark()
