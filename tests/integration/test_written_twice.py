"""A file written twice in one task: the first content is in no later request (the second
write's diff would otherwise repeat it as removed lines)."""

from __future__ import annotations

import json

import pytest
from learnkit import request_text, run_env, run_in_process, task_requests  # noqa: F401
from runkit import GOAL, facts, finish, plan, read_stats, state_of, task

from agent_cli.cli.wiring import RunOptions, execute
from conftest import git

FIRST = "".join(f"first_version_line_{i} = {i}\n" for i in range(40))
# The task's check: it fails before the task and after it (no script here adds median()), as
# tests/test_stats.py would, without a Python started for it: what these tests read is the
# requests, not the check's output.
CHECK = "grep -q 'def median' calc/stats.py"

SECOND = "".join(f"second_version_line_{i} = {i}\n" for i in range(40))


def test_the_first_content_of_a_file_written_twice_is_sent_no_more(
    run_env, fake_server, capsys, demo_repo
):
    srv = fake_server(
        [
            plan(task(cmd=CHECK)),
            {"tool": "write_file", "args": {"path": "calc/extra.py", "content": FIRST}},
            {"tool": "read_file", "args": {"path": "calc/extra.py"}},
            {"tool": "write_file", "args": {"path": "calc/extra.py", "content": SECOND}},
            {"tool": "read_file", "args": {"path": "calc/stats.py"}},
            finish(),
            facts(),
        ]
    )
    code, _ = run_in_process(capsys, demo_repo, GOAL, srv)
    tasks = task_requests(srv)
    assert "first_version_line_7" in request_text(
        tasks[1]
    )  # the first write, while it is the latest
    after_second = [request_text(r) for r in tasks[4:]]
    assert after_second and all("second_version_line_7" in t for t in after_second)
    assert not any("first_version_line_" in t for t in after_second), code


def _resume(capsys, repo, server, allow_dirty: bool = False) -> int:
    capsys.readouterr()
    opts = RunOptions(
        goal=None,
        repo=repo,
        resume=True,
        allow_dirty=allow_dirty,
        yes=True,
        json_out=True,
        flags={"base_url": server.url, "approval": "auto", "max_steps": 20},
    )
    code = execute(opts)
    capsys.readouterr()
    return code


@pytest.mark.parametrize("seen", ["written", "read"])
def test_a_view_saved_before_a_resume_is_superseded_by_a_write_after_it(
    run_env, fake_server, capsys, demo_repo, seen
):
    if seen == "read":
        (demo_repo / "calc/extra.py").write_text(FIRST)
        git(demo_repo, "add", "-A")
        git(demo_repo, "commit", "-q", "-m", "extra")
        first: dict = {"tool": "read_file", "args": {"path": "calc/extra.py"}}
    else:
        first = {"tool": "write_file", "args": {"path": "calc/extra.py", "content": FIRST}}
    before = fake_server([plan(task(cmd=CHECK)), first, read_stats(), read_stats()])
    assert run_in_process(capsys, demo_repo, GOAL, before, max_steps=2)[0] == 4
    assert "first_version_line_7" in json.dumps(state_of(demo_repo)["memory"])
    rest = fake_server(
        [
            {"tool": "write_file", "args": {"path": "calc/extra.py", "content": SECOND}},
            read_stats(),
            finish(),
            facts(),
        ]
    )
    code = _resume(capsys, demo_repo, rest)
    tasks = [json.dumps(r) for r in task_requests(rest)]
    assert "first_version_line_7" in tasks[0]  # saved, and still the file's content
    assert len(tasks) >= 2 and all("second_version_line_7" in t for t in tasks[1:])
    assert not any("first_version_line_" in t for t in tasks[1:]), code


def test_a_file_written_then_edited_whole_leaves_the_first_content_in_no_later_request(
    run_env, fake_server, capsys, demo_repo
):
    srv = fake_server(
        [
            plan(task(cmd=CHECK)),
            {"tool": "write_file", "args": {"path": "calc/extra.py", "content": FIRST}},
            {"tool": "edit_file", "args": {"path": "calc/extra.py", "old": FIRST, "new": SECOND}},
            read_stats(),
            read_stats(),
            finish(),
            facts(),
        ]
    )
    code, events = run_in_process(capsys, demo_repo, GOAL, srv)
    tasks = [json.dumps(r) for r in task_requests(srv)]
    after_edit = tasks[2:]
    assert after_edit and all("second_version_line_7" in t for t in after_edit)
    echoed = json.loads(
        task_requests(srv)[2]["messages"][-3]["tool_calls"][0]["function"]["arguments"]
    )
    assert echoed["old"] == f"[{len(FIRST):,} characters, replaced]" and echoed["new"] == SECOND
    assert not any("first_version_line_" in t for t in after_edit), code
    edited = [e for e in events if e["event"] == "tool_result" and e["name"] == "edit_file"]
    assert "-first_version_line_7 = 7" in edited[0]["diff"]  # the console shows the whole diff


def test_a_read_superseded_by_a_write_of_the_same_reply_is_a_stub_in_the_next_request(
    run_env, fake_server, capsys, demo_repo
):
    (demo_repo / "calc/extra.py").write_text(FIRST)
    git(demo_repo, "add", "-A")
    git(demo_repo, "commit", "-q", "-m", "extra")
    read_then_write = {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "calc/extra.py"}},
            {"name": "write_file", "arguments": {"path": "calc/extra.py", "content": SECOND}},
        ]
    }
    srv = fake_server([plan(task(cmd=CHECK)), read_then_write, read_stats(), finish(), facts()])
    # a memory too small for the read: its result is sent whole in the next request's exchange
    code, _ = run_in_process(capsys, demo_repo, GOAL, srv, memory_max_tokens=600)
    tasks = task_requests(srv)
    after = [json.dumps(r) for r in tasks[1:]]
    assert after and all("second_version_line_7" in t for t in after)
    assert not any("first_version_line_" in t for t in after), code
    read_result = tasks[1]["messages"][-3]
    assert (
        read_result["role"] == "tool"
        and "calc/extra.py has changed since this read" in (read_result["content"])
    )


def test_a_read_merged_with_one_of_another_file_is_superseded_by_a_write_of_either(
    run_env, fake_server, capsys, demo_repo
):
    for name in ("calc/a.py", "calc/b.py"):
        (demo_repo / name).write_text(FIRST)
    git(demo_repo, "add", "-A")
    git(demo_repo, "commit", "-q", "-m", "two files with the same lines")
    read_a = {"tool": "read_file", "args": {"path": "calc/a.py"}}
    read_b = {"tool": "read_file", "args": {"path": "calc/b.py"}}
    write_a = {"tool": "write_file", "args": {"path": "calc/a.py", "content": SECOND}}
    srv = fake_server(
        [plan(task(cmd=CHECK)), read_a, read_b, write_a, read_stats(), finish(), facts()]
    )
    code, _ = run_in_process(capsys, demo_repo, GOAL, srv)
    tasks = [json.dumps(r) for r in task_requests(srv)]
    assert "[file m1] read calc/a.py" in tasks[2]  # the two reads are one item
    assert len(tasks) > 4 and all("second_version_line_7" in t for t in tasks[3:])
    assert not any("first_version_line_" in t for t in tasks[3:]), code


def test_a_view_of_a_file_changed_before_the_resume_is_a_stub_from_the_first_request(
    run_env, fake_server, capsys, demo_repo
):
    (demo_repo / "calc/extra.py").write_text(FIRST)
    git(demo_repo, "add", "-A")
    git(demo_repo, "commit", "-q", "-m", "extra")
    read_extra = {"tool": "read_file", "args": {"path": "calc/extra.py"}}
    before = fake_server([plan(task(cmd=CHECK)), read_extra, read_stats(), read_stats()])
    assert run_in_process(capsys, demo_repo, GOAL, before, max_steps=2)[0] == 4
    (demo_repo / "calc/extra.py").write_text(SECOND)  # the user's change, kept by --allow-dirty
    rest = fake_server([read_stats(), finish(), facts()])
    code = _resume(capsys, demo_repo, rest, allow_dirty=True)
    tasks = [json.dumps(r) for r in task_requests(rest)]
    assert tasks and "calc/extra.py has changed since this read" in tasks[0]
    assert not any("first_version_line_" in t for t in tasks), code
