"""A built-in tool's text argument given as a number, a list, an object or null is refused
with a tool error the model reads, never turned into text and acted on."""

from __future__ import annotations

import json
import os

import pytest

from agent_cli.agent.attempt.toolbox import Toolbox
from agent_cli.core.models import ToolCall
from agent_cli.memory import WorkingMemory
from agent_cli.workspace.files import Files

ran: list[str] = []


def _toolbox(tmp_path) -> Toolbox:
    return Toolbox(
        files=Files(tmp_path),
        run_command=lambda cmd: ran.append(cmd),  # type: ignore[func-returns-value]
        is_test=lambda cmd: False,
        memory=WorkingMemory(max_tokens=4000),
    )


@pytest.mark.parametrize(
    "name, args, key, got",
    [
        ("write_file", {"path": None, "content": None}, "content", "null"),
        ("write_file", {"path": 5, "content": {"a": 1}}, "content", "dict"),
        ("write_file", {"path": "a.txt", "content": 7}, "content", "int"),
        ("run", {"cmd": ["ls", "-la"]}, "cmd", "list"),
        ("search", {"pattern": "x", "path": 3}, "path", "int"),
        ("note", {"text": True}, "text", "bool"),
    ],
)
def test_a_text_argument_of_another_type_is_a_tool_error(tmp_path, name, args, key, got):
    result = _toolbox(tmp_path).execute(ToolCall(id="c1", name=name, arguments=json.dumps(args)))
    assert not result.ok and result.malformed
    assert f"the argument {key!r} must be a JSON string, got {got}" in result.text
    assert list(tmp_path.iterdir()) == [] and ran == []  # nothing written, nothing run


def test_an_optional_text_argument_may_be_left_null(tmp_path):
    (tmp_path / "a.txt").write_text("needle\n")
    result = _toolbox(tmp_path).execute(
        ToolCall(id="c1", name="search", arguments='{"pattern": "needle", "path": null}')
    )
    assert result.ok and "a.txt" in result.text


@pytest.mark.parametrize(
    "name, args", [("list_dir", {"path": "."}), ("search", {"pattern": "needle"})]
)
def test_a_file_name_that_is_not_utf8_reaches_the_result_escaped(tmp_path, name, args):
    (tmp_path / os.fsdecode(b"caf\xe9.txt")).write_text("needle\n")
    result = _toolbox(tmp_path).execute(ToolCall(id="c1", name=name, arguments=json.dumps(args)))
    assert result.ok and "caf\\xe9.txt" in result.text
    result.text.encode("utf-8")  # what every request, record and journal line is made of


@pytest.mark.parametrize(
    "value, shown", [("abc", "'abc'"), (True, "True"), (1.5, "1.5"), ([3], "[3]")]
)
def test_a_line_number_that_is_not_a_whole_number_is_named_in_the_error(tmp_path, value, shown):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    args = json.dumps({"path": "a.txt", "end_line": value})
    result = _toolbox(tmp_path).execute(ToolCall(id="c1", name="read_file", arguments=args))
    assert not result.ok
    assert result.text == f"error: end_line must be a whole number, got {shown}"
    digits = json.dumps({"path": "a.txt", "start_line": "2", "end_line": 2.0})
    result = _toolbox(tmp_path).execute(ToolCall(id="c2", name="read_file", arguments=digits))
    assert result.ok and result.text == "2  two\n[lines 2-2 of 2 shown]"


@pytest.mark.parametrize(
    "name, key, said",
    [
        ("note", "text", "the note is empty"),
        ("recall", "query", "the query is empty"),
        ("unpin", "id", "the id is empty (give a pinned note's id; pinned now: m1)"),
    ],
)
@pytest.mark.parametrize("blank", ["", "  \n\t"])
def test_an_empty_or_blank_working_memory_argument_is_a_tool_error(
    tmp_path, name, key, said, blank
):
    box = _toolbox(tmp_path)
    noted: list[str] = []
    box.on_note = lambda item_id, text: noted.append(item_id)
    box.execute(ToolCall(id="c0", name="note", arguments='{"text": "keep this"}'))
    result = box.execute(ToolCall(id="c1", name=name, arguments=json.dumps({key: blank})))
    assert not result.ok and not result.malformed  # the model reads why, and may call again
    assert result.text.startswith(f"error: {said}")
    # nothing pinned into every later request, nothing kept for long-term memory
    assert noted == ["m1"]
    assert [(i.id, i.pinned) for i in box.memory.hot_items()] == [("m1", True)]
