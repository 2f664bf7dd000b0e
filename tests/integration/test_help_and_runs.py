"""Help pages speak in metavars and load no vendor SDK, `agent runs` is a table with a header
that fits the terminal, and the commands agree on exit codes (2: a bad value, 1: nothing to act on)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime

import pytest
from typer.testing import CliRunner

from agent_cli.cli.app import app, main
from agent_cli.cli.config.trust import trust_file
from conftest import SECRET_ENV, git, make_repo
from redactkit import KEY, joined, split
from reliability.relkit import plan, task, to_a_gone_reader

COMMANDS = [
    [],
    ["run"],
    ["runs"],
    ["doctor"],
    ["trust"],
    ["recall"],
    ["memory"],
    ["memory", "show"],
    ["memory", "forget"],
    ["memory", "expire"],
    ["memory", "export"],
    ["memory", "import"],
    ["memory", "reindex"],
]
PYTHON_TYPES = re.compile(r"<(str|int|float|path|bool)[^>]*>|list\[|\{\w+\}|<=x<=")


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "agent")
def test_help_names_values_by_metavar_never_by_python_type(words):
    result = CliRunner().invoke(app, [*words, "--help"], prog_name="agent")
    assert result.exit_code == 0, result.output
    assert not PYTHON_TYPES.search(result.output), result.output
    assert "..." not in result.output.replace("COMMAND [ARGS]...", "") and "…" not in result.output


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "agent")
def test_dash_h_is_help_as_well(words):
    """`-h` is what many people type first: the same page as `--help`, not an unknown option."""
    short = CliRunner().invoke(app, [*words, "-h"], prog_name="agent")
    long = CliRunner().invoke(app, [*words, "--help"], prog_name="agent")
    assert short.exit_code == 0 and short.output == long.output, short.output
    assert "-h, --help" in short.output


# Every help page is printed by one child interpreter that records what importing the command
# line and printing its help did: any file opened that is not Python source, any process,
# connection or file change, and which vendor SDKs ended up loaded.
HELP_IN_A_CHILD = """
import contextlib, io, sys
done = []
def audit(event, args):
    if event == "open" and not str(args[0]).endswith((".py", ".pyc", ".pth")):
        done.append(f"open {args[0]}")
    elif event in ("subprocess.Popen", "os.system", "socket.connect", "os.mkdir", "os.remove"):
        done.append(event)
sys.addaudithook(audit)
from agent_cli.cli.app import app
for words in COMMANDS:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        app([*words, "--help"], prog_name="agent")
vendors = sorted({m.split(".")[0] for m in sys.modules} & set(VENDORS))
print(vendors, done)
"""
VENDORS = ("openai", "chromadb", "tiktoken", "git", "wordllama", "mcp")


def test_help_imports_no_vendor_sdk_and_does_no_io():
    code = HELP_IN_A_CHILD.replace("COMMANDS", repr(COMMANDS)).replace("VENDORS", repr(VENDORS))
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[] []", child.stdout


def test_the_metavars_say_what_goes_there():
    def usage(*words: str) -> str:
        return CliRunner().invoke(app, [*words, "--help"], prog_name="agent").output

    run = usage("run")
    assert "agent run [OPTIONS] [GOAL]" in run and "\n  GOAL  What to achieve" in run
    for option in (
        "--accept CMD",
        "--max-steps N",
        "--budget-usd USD",
        "--repo DIR",
        "--replay FILE",
        "--run-id ID",
        "--model NAME",
        "--base-url URL",
    ):
        assert option in run, option
    recall = usage("recall")
    assert "agent recall [OPTIONS] QUERY\n" in recall and "-k, --k N" in recall
    assert "--min-trust X" in recall and "--kind KIND" in recall
    assert "agent memory forget [OPTIONS] ID\n" in usage("memory", "forget")
    assert "agent memory export [OPTIONS] FILE\n" in usage("memory", "export")


def test_a_number_out_of_range_is_one_line_and_exit_2(agent_in_process, scratch_repo):
    proc = agent_in_process("recall", "x", "--k", "0", cwd=scratch_repo)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --k 0 is out of range (pass a number from 1 to 100)"


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\u200b\u2060", "\ufeff\u3164"])
def test_an_empty_recall_query_is_a_usage_error(query, tmp_path, capsys):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pytest.raises(SystemExit) as done:
        main(["recall", query, "--repo", str(repo)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith("error: the query is empty"), err
    assert err.count("\n") == 1 and not (repo / ".agent").exists()


LONG_GOAL = (
    "Refactor the parser so that quoted strings with escaped quotes are tokenised "
    "correctly and add tests for every escape sequence we support"
)


def seed_run(repo, run_id: str, goal: str, started: str, status: str = "verified") -> None:
    run_dir = repo / ".agent" / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "goal": goal,
                "status": status,
                "steps": 12,
                "started_at": started,
                "updated_at": started,
            }
        )
    )


def test_runs_has_a_header_the_start_time_and_fits_the_width(agent_in_process, scratch_repo):
    seed_run(scratch_repo, "20261130-101500-aaaa", LONG_GOAL, "2026-11-30T10:15:00+00:00")
    seed_run(
        scratch_repo,
        "20261130-111500-bbbb",
        "Add median()",
        "2026-11-30T11:15:00+00:00",
        status="budget_exhausted",
    )
    narrow = agent_in_process("runs", cwd=scratch_repo, env={"COLUMNS": "100"})  # the table
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.rstrip("\n").splitlines()
    assert lines[0].split() == ["run", "started", "status", "steps", "goal"]
    assert all(len(line) <= 100 for line in lines), narrow.stdout
    first = next(line for line in lines if "aaaa" in line)
    local = datetime.fromisoformat("2026-11-30T10:15:00+00:00").astimezone()
    assert local.strftime("%Y-%m-%d %H:%M") in first and "verified" in first
    goal = first.split("   ")[-1].strip()
    assert goal.endswith("…") and LONG_GOAL.startswith(goal[:-1])
    assert LONG_GOAL[len(goal) - 1] == " "  # cut where a word ends
    assert "budget_exhausted" in narrow.stdout
    wide = agent_in_process("runs", cwd=scratch_repo, env={"COLUMNS": "250"})
    assert LONG_GOAL in wide.stdout and "Add median()" in wide.stdout


def test_runs_masks_a_key_that_joins_once_its_escapes_are_out(agent_in_process, scratch_repo):
    """A run's goal and status holding the key or the remote's password with an escape
    sequence inside (which masking as it came does not match) print masked, in each layout
    and in each JSON string, which a terminal would show joined."""
    password = "remote-pass-7c1e9a"
    git(scratch_repo, "remote", "add", "origin", f"https://me:{password}@example.com/r.git")
    started = "2026-11-30T10:15:00+00:00"
    goal = f"deploy with {split(KEY)} and {split(password, 1)}"
    seed_run(scratch_repo, "20261130-101500-aaaa", goal, started, status=split(KEY, 2))
    for args, columns in ((["runs"], "200"), (["runs"], "60"), (["runs", "--json"], "200")):
        env = {"OPENAI_API_KEY": KEY, "COLUMNS": columns}
        r = agent_in_process(*args, cwd=scratch_repo, env=env)
        assert r.returncode == 0, r.stderr
        assert joined(r.stdout, KEY, password) == [], (args, columns, r.stdout)
        assert r.stdout.count("[REDACTED]") == 3, (args, columns, r.stdout)


@pytest.mark.slow  # each case starts the agent as a process: the pipe is its own
@pytest.mark.parametrize(
    "words",
    [["--help"], ["runs"], ["runs", "--json"]],  # parsing's output, rich's, print's (buffered)
    ids=" ".join,
)
def test_a_command_whose_reader_is_gone_stops_quietly_with_141(words, agent_env, scratch_repo):
    seed_run(scratch_repo, "20261130-101500-aaaa", LONG_GOAL, "2026-11-30T10:15:00+00:00")
    proc = to_a_gone_reader(agent_env, scratch_repo, *words)
    assert (proc.returncode, proc.stderr) == (141, ""), proc.stderr


@pytest.mark.slow  # the agent as a process: the pipe is its own
def test_a_run_whose_log_reader_is_gone_stops_as_interrupted(agent_env, scratch_repo, fake_server):
    srv = fake_server([plan(task())])  # the plan is the first thing its log shows
    proc = to_a_gone_reader(
        agent_env, scratch_repo, "run", "Add a file", "--yes", "--base-url", srv.url
    )
    assert proc.returncode == 130 and "interrupted" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture
def agent(agent_env, monkeypatch, capsys):
    """Run `agent ARGS` in this process as the console entry point does: (exit code, out, err)."""
    for name in [k for k in os.environ if k.startswith("AGENT_") or k in SECRET_ENV]:
        monkeypatch.delenv(name)
    for name, value in agent_env.items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            main(list(args))
        captured = capsys.readouterr()
        return done.value.code or 0, captured.out, captured.err

    return run


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("words", "kinds"),
    [
        (["recall", "x"], "episode, fact, note, procedure"),
        (["memory", "show"], "edit, note, recalled, file, test_result, tool_output, log"),
    ],
)
def test_an_unknown_kind_exits_2_naming_the_kinds(agent, scratch_repo, words, kinds):
    code, _, err = agent(*words, "--kind", "bogus", "--repo", str(scratch_repo))
    assert code == 2
    line = one_error_line(err)
    assert "unknown --kind 'bogus'" in line and kinds in line
    assert not (scratch_repo / ".agent").exists()


def test_forgetting_an_unknown_id_without_memory_exits_1(agent, scratch_repo):
    code, out, err = agent("memory", "forget", "no-such-id", "--repo", str(scratch_repo))
    assert code == 1 and out == ""
    line = one_error_line(err)
    assert "no memory item 'no-such-id'" in line and "no memory yet" in line
    assert not (scratch_repo / ".agent").exists()


def test_exporting_no_memory_writes_an_empty_file(agent, scratch_repo, tmp_path):
    target = tmp_path / "memory.jsonl"
    code, out, err = agent("memory", "export", str(target), "--repo", str(scratch_repo))
    assert code == 0, err
    assert target.read_text() == ""
    assert out.strip() == f"exported 0 record(s) to {target}"
    assert "no memory yet" in err and not (scratch_repo / ".agent").exists()


def test_trust_without_an_agentrc_exits_1_and_records_nothing(agent, agent_env, scratch_repo):
    code, out, err = agent("trust", "--repo", str(scratch_repo))
    assert code == 1 and out == ""
    assert "there is no .agentrc in" in one_error_line(err)
    assert not trust_file(agent_env).exists()
    (scratch_repo / ".agentrc").write_text('model = "fake-model"\n')
    code, out, err = agent("trust", "--repo", str(scratch_repo))
    assert code == 0 and out.startswith(f"trusted {scratch_repo}"), err
    assert "its .agentrc now sets: model" in out and trust_file(agent_env).is_file()


@pytest.mark.parametrize("home", ["file", "read-only"])
def test_trust_where_home_cannot_be_written_says_so_in_one_line(
    agent, monkeypatch, scratch_repo, tmp_path, home
):
    if home == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into a read-only directory")
    (scratch_repo / ".agentrc").write_text('model = "fake-model"\n')
    place = tmp_path / "unwritable-home"
    if home == "file":  # as unusable as a missing or read-only HOME, even for root
        place.write_text("")
    else:
        place.mkdir()
        place.chmod(0o555)
    monkeypatch.setenv("HOME", str(place))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("AGENT_TRUST_FILE", raising=False)
    code, out, err = agent("trust", "--repo", str(scratch_repo))
    said = one_error_line(err)
    assert code == 1 and out == "", err
    assert f"cannot record trust in {place}/.config/agent/trusted.json" in said
    assert "AGENT_TRUST_FILE" in said and "XDG_CONFIG_HOME" in said
    assert "internal error" not in said


@pytest.fixture
def removed_cwd(monkeypatch, tmp_path):
    """The current directory, removed (a worktree run's folder after the run verified)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)  # back where the test began afterwards
    gone.rmdir()


@pytest.mark.parametrize(
    "command", [("runs",), ("recall", "foo"), ("memory", "show"), ("mcp", "list")]
)
def test_a_removed_current_directory_is_one_line_saying_so(agent, removed_cwd, command):
    code, out, err = agent(*command)
    said = one_error_line(err)
    assert code == 1 and out == "", err
    assert "the current directory no longer exists" in said and "--repo DIR" in said


def test_doctor_in_a_removed_directory_still_lists_what_it_can(agent, removed_cwd):
    code, out, err = agent("doctor", "--base-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "internal error" not in out + err, err
    assert re.search(r"^  model +", out, re.M)  # the settings
    git = next(line for line in out.splitlines() if " git " in line)
    assert "FAIL" in git and "the current directory no longer exists" in git


def test_revoking_trust_says_whether_there_was_any(agent, agent_env, scratch_repo):
    (scratch_repo / ".agentrc").write_text('model = "fake-model"\n')
    code, out, err = agent("trust", "--revoke", "--repo", str(scratch_repo))
    assert code == 0 and out.startswith(f"{scratch_repo} was not trusted; nothing changed"), err
    assert not trust_file(agent_env).exists()
    assert agent("trust", "--repo", str(scratch_repo))[0] == 0
    code, out, err = agent("trust", "--revoke", "--repo", str(scratch_repo))
    assert code == 0 and out.startswith(f"{scratch_repo} is no longer trusted"), err


def test_exporting_over_a_file_needs_force_and_writes_nothing_through_a_link(
    agent, scratch_repo, tmp_path
):
    kept = tmp_path / "keep.txt"
    kept.write_text("precious\n")
    code, out, err = agent("memory", "export", str(kept), "--repo", str(scratch_repo))
    assert code == 2 and out == "" and "exists; nothing was written" in one_error_line(err)
    assert kept.read_text() == "precious\n"
    link = tmp_path / "link.jsonl"
    link.symlink_to(kept)
    code, _, err = agent("memory", "export", str(link), "--repo", str(scratch_repo))
    assert code == 2 and kept.read_text() == "precious\n"
    code, _, err = agent("memory", "export", str(link), "--force", "--repo", str(scratch_repo))
    assert code == 0, err
    assert not link.is_symlink() and link.read_text() == "" and kept.read_text() == "precious\n"
    code, _, err = agent("memory", "export", str(tmp_path), "--force", "--repo", str(scratch_repo))
    assert code == 1 and "cannot be written" in one_error_line(err)
    assert "memory store" not in err and tmp_path.is_dir()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_exporting_to_a_dash_writes_standard_output(agent, scratch_repo):
    code, out, err = agent("memory", "export", "-", "--repo", str(scratch_repo))
    assert code == 0, err
    assert out == "" and "exported 0 record(s) to standard output" in err
    assert not (scratch_repo / "-").exists()


def test_a_file_where_the_state_directory_goes_is_one_line_everywhere(agent, scratch_repo):
    (scratch_repo / ".agent").write_text("not a directory\n")
    said = "the state directory"
    for args in (["runs"], ["recall", "x"], ["memory", "show"], ["run", "x", "--yes"]):
        code, _, err = agent(*args, "--repo", str(scratch_repo))
        assert code == 1 and f"{said} {scratch_repo / '.agent'} is not a directory" in err, args
        assert "internal error" not in err and len(err.strip().splitlines()) == 1, err
    code, out, err = agent("doctor", "--repo", str(scratch_repo))
    assert code == 1 and "internal error" not in err and err == ""
    assert f"FAIL state        {said}" in out
    assert (scratch_repo / ".agent").read_text() == "not a directory\n"


def test_a_home_under_a_file_is_one_line_naming_that_file(agent, monkeypatch, scratch_repo):
    other = scratch_repo.parent / "other-tools-file"  # another tool's ~/.agent
    other.write_text("not ours\n")
    monkeypatch.setenv("AGENT_HOME", str(other / "state"))
    said = f"home {other / 'state'} cannot be created: {other} is a file, not a directory"
    code, _, err = agent("run", "x", "--yes", "--repo", str(scratch_repo))
    assert code == 1 and said in err and f"move {other} aside" in err, err
    assert "internal error" not in err and "lock" not in err and len(err.strip().splitlines()) == 1
    code, out, err = agent("doctor", "--repo", str(scratch_repo))
    assert code == 1 and "internal error" not in err
    state = next(line for line in out.splitlines() if " state " in line)
    assert "FAIL" in state and said in state
    assert other.read_text() == "not ours\n"


@pytest.mark.parametrize("command", [("run", "x", "--yes"), ("runs",), ("memory", "show")])
def test_a_home_the_system_refuses_to_look_at_is_one_line(
    agent, monkeypatch, scratch_repo, command
):
    home = scratch_repo.parent / ("x" * 300)  # longer than a file name may be
    monkeypatch.setenv("AGENT_HOME", str(home))
    code, _, err = agent(*command, "--repo", str(scratch_repo))
    said = one_error_line(err)
    assert code == 1 and f"home {home} cannot be used: File name too long" in said, err
    assert "set home to another directory" in said


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_doctor_fails_a_home_nothing_can_be_created_in_even_for_root(
    agent, monkeypatch, scratch_repo
):
    monkeypatch.setenv("AGENT_HOME", "/proc/agent-doctor-test")
    code, out, _ = agent("doctor", "--repo", str(scratch_repo))
    state = next(line for line in out.splitlines() if " state " in line)
    assert code == 1 and "FAIL" in state and "/proc is not writable" in state


def test_a_link_to_nothing_where_the_state_directory_goes_is_one_line_everywhere(
    agent, scratch_repo, tmp_path
):
    (scratch_repo / ".agent").symlink_to(tmp_path / "gone")
    says = f"the state directory {scratch_repo / '.agent'} is a link to {tmp_path / 'gone'}"
    export = tmp_path / "none.jsonl"
    export.write_text("")
    for args in (["recall", "x"], ["memory", "show"], ["memory", "import", str(export)]):
        code, _, err = agent(*args, "--repo", str(scratch_repo))
        assert code == 1 and says in err and "which does not exist" in err, (args, err)
        assert "internal error" not in err and len(err.strip().splitlines()) == 1, err
    assert (scratch_repo / ".agent").is_symlink() and not (tmp_path / "gone").exists()


def test_a_state_directory_link_the_repository_tracks_is_refused_before_anything_is_written(
    agent, scratch_repo, tmp_path
):
    # a clone would choose where run state goes: outside the repository, or anywhere in it
    outside = tmp_path / "outside"
    outside.mkdir()
    (scratch_repo / ".agent").symlink_to(outside)
    git(scratch_repo, "add", ".agent")
    git(scratch_repo, "commit", "-q", "-m", "state goes elsewhere")
    (tmp_path / "goals.txt").write_text('{"goal": "x"}\n')
    commands = (["run", "x", "--yes"], ["runs"], ["recall", "x"], ["memory", "show"])
    for args in (*commands, ["batch", str(tmp_path / "goals.txt"), "--yes"]):
        code, _, err = agent(*args, "--repo", str(scratch_repo))
        assert code == 1 and "internal error" not in err and len(err.strip().splitlines()) == 1
        assert "is a symbolic link" in err and "that the repository tracks" in err, (args, err)
        assert "git rm .agent" in err and "set home" in err
    assert not any(outside.iterdir())
    # the user's own link (untracked) is the user's choice, as before
    git(scratch_repo, "rm", "-q", "--cached", ".agent")
    git(scratch_repo, "commit", "-q", "-m", "state is not the repository's")
    code, out, err = agent("runs", "--repo", str(scratch_repo))
    assert code == 0 and "no runs yet" in out, err


def test_a_state_directory_in_a_submodule_that_tracks_run_records_is_refused(
    agent, scratch_repo, tmp_path
):
    # run records a submodule's clone carries, reached through a link, are not the user's
    sub = make_repo(tmp_path / "subsrc")
    (sub / "state" / "runs" / "20200101-000000-evil").mkdir(parents=True)
    (sub / "state" / "runs" / "20200101-000000-evil" / "state.json").write_text("{}")
    git(sub, "add", "state")
    git(sub, "commit", "-q", "-m", "planted")
    git(scratch_repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(scratch_repo, "commit", "-q", "-m", "a submodule")
    (scratch_repo / ".agent").symlink_to("sub/state")
    for args in (["runs"], ["recall", "x"], ["memory", "show"]):
        code, _, err = agent(*args, "--repo", str(scratch_repo))
        assert code == 1 and "internal error" not in err and len(err.strip().splitlines()) == 1
        assert "the repository tracks 1 file(s)" in err and "state.json" in err, (args, err)


def test_a_json_stream_ends_with_run_done_even_after_an_internal_error(
    agent, scratch_repo, monkeypatch
):
    import json

    from agent_cli.cli import wiring

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the harness")

    monkeypatch.setattr(wiring, "_execute", broken)  # stands for any bug past the settings
    code, out, err = agent("run", "x", "--yes", "--json", "--repo", str(scratch_repo))
    assert code == 1 and "internal error: RuntimeError: a bug in the harness" in err
    done = json.loads(out.strip().splitlines()[-1])
    assert done["event"] == "run_done" and done["exit_code"] == 1
    assert done["message"] == "internal error: RuntimeError: a bug in the harness"


@pytest.mark.slow  # each case starts the agent as a process
def test_a_goal_or_query_that_is_not_utf8_is_a_usage_error(agent_env, scratch_repo):
    import subprocess
    import sys

    base = [sys.executable, "-m", "agent_cli"]
    for args, says in (
        ([b"run", b"median\xff", b"--yes"], "the goal is not valid UTF-8 text"),
        ([b"run", b"x", b"--accept", b"pytest\xff", b"--yes"], "--accept is not valid UTF-8"),
        ([b"recall", b"median\xff"], "the query is not valid UTF-8 text"),
    ):
        proc = subprocess.run(
            [*base, *args], cwd=scratch_repo, env=agent_env, capture_output=True, timeout=60
        )
        err = proc.stderr.decode()
        assert proc.returncode == 2 and says in err, err
        assert "internal error" not in err and len(err.strip().splitlines()) == 1


def test_a_bare_repository_is_named_as_one(agent, tmp_path):
    import subprocess

    bare = tmp_path / "project.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    code, _, err = agent("runs", "--repo", str(bare))
    assert code == 1 and "is a bare git repository: it has no work tree" in err


def test_a_work_trees_git_directory_is_named_as_one_not_as_a_bare_repository(agent, scratch_repo):
    for where in (scratch_repo / ".git", scratch_repo / ".git" / "refs"):
        code, _, err = agent("runs", "--repo", str(where))
        assert code == 1 and "bare" not in err, err
        assert err.strip().endswith(
            f"{scratch_repo}/.git is the git directory of {scratch_repo}, not a work tree "
            f"(run in {scratch_repo} (or pass --repo {scratch_repo}))"
        ), err


def test_a_file_given_as_the_repository_is_refused_in_one_line(agent, scratch_repo):
    (scratch_repo / "notes.txt").write_text("not a directory\n")
    for args in (["runs"], ["doctor"], ["memory", "show"]):
        code, _, err = agent(*args, "--repo", str(scratch_repo / "notes.txt"))
        assert code == 1 and err.strip().endswith(
            "notes.txt is not a directory (pass --repo DIR with a directory)"
        ), err
