"""A file written twice in one task: the first content is in no later request (the second
write's diff would otherwise repeat it as removed lines)."""

from __future__ import annotations

import pytest
from learnkit import request_text, run_env, run_in_process, task_requests  # noqa: F401
from runkit import GOAL, facts, finish, plan, task

FIRST = "".join(f"first_version_line_{i} = {i}\n" for i in range(40))
pytestmark = pytest.mark.slow  # the task's check runs pytest

SECOND = "".join(f"second_version_line_{i} = {i}\n" for i in range(40))


def test_the_first_content_of_a_file_written_twice_is_sent_no_more(
    run_env, fake_server, capsys, demo_repo
):
    srv = fake_server(
        [
            plan(task()),
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
