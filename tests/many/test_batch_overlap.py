"""Runs of a batch whose branches change the same files are named before anyone merges them
(cli/batch/overlap.py): real branches in a real repository."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent_cli.cli.batch.overlap import Branch, overlaps
from conftest import git, make_repo


def _branch(repo: Path, name: str, files: dict[str, str]) -> Branch:
    git(repo, "switch", "-q", "-c", name, "main")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"work of {name}")
    git(repo, "switch", "-q", "main")
    return Branch(int(name.rsplit("-", 1)[1]), name, "main")


def test_branches_that_change_the_same_files_are_named_with_the_files(tmp_path):
    repo = make_repo(tmp_path / "repo")
    one = _branch(repo, "agent/run-1", {"calc/stats.py": "a\n", "README.md": "one\n"})
    two = _branch(repo, "agent/run-2", {"docs/guide.md": "b\n"})
    three = _branch(repo, "agent/run-3", {"calc/stats.py": "c\n", "README.md": "three\n"})
    (repo / "calc").mkdir(exist_ok=True)
    (repo / "calc" / "stats.py").write_text("main moved on\n")  # work that lands on the base
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "main's own change")
    gone = Branch(4, "agent/deleted", "main")

    found = overlaps(repo, [one, two, three, gone])

    assert [(o.first.index, o.second.index, o.files) for o in found] == [
        (1, 3, ("README.md", "calc/stats.py"))
    ]
    line = found[0].line()
    assert line.startswith("1. and 3. both change README.md, calc/stats.py:")
    assert "agent/run-1" in line and "agent/run-3" in line and "may conflict" in line
    assert found[0].record() == {
        "runs": [1, 3],
        "branches": ["agent/run-1", "agent/run-3"],
        "files": ["README.md", "calc/stats.py"],
    }


def test_many_shared_files_are_counted_past_the_first_few(tmp_path):
    repo = make_repo(tmp_path / "repo")
    files = {f"f{i}.txt": f"{i}\n" for i in range(5)}
    a = _branch(repo, "agent/run-1", files)
    b = _branch(repo, "agent/run-2", {k: v + "x\n" for k, v in files.items()})
    (found,) = overlaps(repo, [a, b])
    assert "f0.txt, f1.txt, f2.txt and 2 more:" in found.line()


def test_branches_with_nothing_in_common_say_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo")
    a = _branch(repo, "agent/run-1", {"a.txt": "a\n"})
    b = _branch(repo, "agent/run-2", {"b.txt": "b\n"})
    assert overlaps(repo, [a, b]) == []


def test_a_shared_file_named_in_bytes_that_are_not_utf8_is_named_as_utf8_text(tmp_path):
    """git names a file as its bytes are (`-z`): batch.json and the summary say `\\xNN`."""
    repo = make_repo(tmp_path / "repo")
    name = os.fsdecode(b"caf\xe9.txt")
    a = _branch(repo, "agent/run-1", {name: "a\n"})
    b = _branch(repo, "agent/run-2", {name: "b\n"})
    (found,) = overlaps(repo, [a, b])
    assert found.files == ("caf\\xe9.txt",)
    assert "both change caf\\xe9.txt:" in found.line()
    json.dumps(found.record(), ensure_ascii=False).encode("utf-8")  # batch.json's text
