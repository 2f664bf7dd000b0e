"""A write or edit that sends back what the model was shown masked keeps the file's own text;
one that would put the mask where no masked line of the file was is refused, nothing written."""

from __future__ import annotations

import json

import pytest

from agent_cli.agent.attempt.masked import unmasked
from agent_cli.agent.attempt.toolbox import Toolbox
from agent_cli.core.errors import ToolError
from agent_cli.core.models import ToolCall
from agent_cli.core.redact import MASK
from agent_cli.memory import WorkingMemory
from agent_cli.workspace.files import Files

SECRETS = ("postgres", "hunter2-secret-value")
DB = 'URL = "postgresql://localhost:5432/app"\nPASSWORD = "hunter2-secret-value"\nPORT = 5432\n'


def toolbox(root) -> Toolbox:
    return Toolbox(
        files=Files(root),
        run_command=lambda cmd: None,  # type: ignore[arg-type,return-value]
        is_test=lambda cmd: False,
        memory=WorkingMemory(max_tokens=4000),
        secrets=SECRETS,
    )


def call(box: Toolbox, name: str, **args: str):
    return box.execute(ToolCall(id="c1", name=name, arguments=json.dumps(args)))


def test_a_file_rewritten_as_it_was_shown_keeps_its_own_text(tmp_path):
    (tmp_path / "db.py").write_text(DB)
    box = toolbox(tmp_path)
    shown = call(box, "read_file", path="db.py").text
    assert "postgres" not in shown and "hunter2" not in shown and shown.count(MASK) == 2
    sent = f'URL = "{MASK}ql://localhost:5432/app"\nPASSWORD = "{MASK}"\nPORT = 5433\n'
    assert call(box, "write_file", path="db.py", content=sent).ok
    assert (tmp_path / "db.py").read_text() == DB.replace("5432\n", "5433\n")
    edited = call(
        box,
        "edit_file",
        path="db.py",
        old=f'PASSWORD = "{MASK}"\nPORT = 5433\n',
        new=f'PASSWORD = "{MASK}"\nPORT = 6000\n',
    )
    assert edited.ok, edited.text
    assert (tmp_path / "db.py").read_text() == DB.replace("5432\n", "6000\n")


def test_a_masked_line_whose_end_has_crs_read_file_hides_is_its_line(tmp_path):
    (tmp_path / "db.py").write_bytes(DB.replace("\n", "\r\r\n").encode())
    box = toolbox(tmp_path)
    assert "\r" not in call(box, "read_file", path="db.py").text
    edited = call(
        box,
        "edit_file",
        path="db.py",
        old=f'PASSWORD = "{MASK}"\nPORT = 5432',
        new=f'PASSWORD = "{MASK}"\nPORT = 6000',
    )
    assert edited.ok, edited.text
    assert (tmp_path / "db.py").read_bytes() == DB.replace("5432\n", "6000\n").replace(
        "\n", "\r\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("tool", "args", "line"),
    [
        (
            "write_file",
            {"content": f'URL = "{MASK}ql://localhost:6543/app"\n'},
            "line 1 of content",
        ),
        ("write_file", {"content": f"# {MASK}\n"}, "line 1 of content"),
        ("edit_file", {"old": f'"{MASK}ql://', "new": '"mysql://'}, "line 1 of old"),
        ("edit_file", {"old": "PORT = 5432", "new": f"PORT = 5432  # {MASK}"}, "line 1 of new"),
    ],
)
def test_the_mask_where_no_masked_line_was_is_refused_and_nothing_written(
    tmp_path, tool, args, line
):
    (tmp_path / "db.py").write_text(DB)
    result = call(toolbox(tmp_path), tool, path="db.py", **args)
    assert not result.ok and line in result.text and "leaving the masked part out" in result.text
    assert (tmp_path / "db.py").read_text() == DB


def test_a_new_file_cannot_be_given_the_mask():
    with pytest.raises(ToolError, match="line 2 of content"):
        unmasked(f"a\nkey = {MASK}\n", "", SECRETS, "content")


def test_two_lines_masked_alike_are_no_answer_and_a_files_own_mask_text_is_a_line():
    original = 'A = "hunter2-secret-value"\nB = "[REDACTED]"\r\nA = "postgres"\n'
    with pytest.raises(ToolError, match="line 1 of content"):
        unmasked(f'A = "{MASK}"\n', original, SECRETS, "content")  # which of the two A lines?
    assert unmasked(f'B = "{MASK}"\r\n', original, SECRETS, "content") == 'B = "[REDACTED]"\r\n'
    assert unmasked("no mask\n", "", SECRETS, "content") == "no mask\n"
