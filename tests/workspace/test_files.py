"""File tools on real directories, symlinks and a real git repository."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from agent_cli.core.errors import ToolError
from agent_cli.workspace.files import Files


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.py").write_text("def b():\n    return 'beta'\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    return root


@pytest.fixture
def files(repo) -> Files:
    return Files(repo, deny_write=[repo / ".agent"])


def _outside(repo: Path) -> Path:
    return repo.parent / "outside"


# --- resolve: what may be touched -------------------------------------------------------------


def test_paths_inside_the_repo_resolve_to_real_paths(files, repo):
    assert files.resolve("a.txt") == repo / "a.txt"
    assert files.resolve(str(repo / "sub" / "b.py")) == repo / "sub" / "b.py"
    assert files.resolve("sub/../a.txt") == repo / "a.txt"
    (repo / "inner-link").symlink_to(repo / "sub")
    assert files.resolve("inner-link/b.py") == repo / "sub" / "b.py"


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../outside/secret.txt", "sub/../../outside/secret.txt", ".."]
)
def test_paths_escaping_the_repo_are_refused(files, path):
    with pytest.raises(ToolError, match="outside the repository"):
        files.read(path)


def test_an_absolute_path_outside_is_refused_for_writing_and_nothing_is_written(files, repo):
    target = _outside(repo) / "new.txt"
    with pytest.raises(ToolError, match="outside the repository"):
        files.write(str(target), "x")
    assert not target.exists()


def test_a_symlinked_file_pointing_outside_is_refused_for_read_write_and_edit(files, repo):
    (repo / "leak.txt").symlink_to(_outside(repo) / "secret.txt")
    for call in (
        lambda: files.read("leak.txt"),
        lambda: files.write("leak.txt", "pwned"),
        lambda: files.edit("leak.txt", "top", "pwned"),
    ):
        with pytest.raises(ToolError, match="symlink"):
            call()
    assert (_outside(repo) / "secret.txt").read_text() == "top secret\n"


def test_a_symlinked_directory_in_the_middle_of_a_path_is_refused(files, repo):
    (repo / "sub" / "escape").symlink_to(_outside(repo))
    with pytest.raises(ToolError, match="outside the repository"):
        files.read("sub/escape/secret.txt")
    with pytest.raises(ToolError, match="outside the repository"):
        files.write("sub/escape/deeper/new.txt", "x")
    assert sorted(p.name for p in _outside(repo).iterdir()) == ["secret.txt"]


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", "sub/.git/x"])
def test_writes_into_git_are_refused_and_nothing_is_written(files, repo, path):
    before = (repo / ".git" / "config").read_text()
    with pytest.raises(ToolError, match=r"\.git"):
        files.write(path, "[core]\n\tfsmonitor = evil\n")
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / "sub" / ".git").exists()


@pytest.mark.parametrize("path", [".agentrc", "./.agentrc", ".agentrc/notes.txt", ".agentrc/a/b"])
def test_the_settings_file_is_never_written_nor_made_a_folder(files, repo, path):
    with pytest.raises(ToolError, match="holds the agent's settings"):
        files.write(path, "x\n")
    assert not (repo / ".agentrc").exists()


def test_writes_into_the_state_directory_are_refused_and_nothing_is_written(files, repo):
    state = repo / ".agent"
    state.mkdir()
    (state / "state.json").write_text("{}")
    for call in (
        lambda: files.write(".agent/state.json", "broken"),
        lambda: files.write(str(state / "new.txt"), "x"),
        lambda: files.edit(".agent/state.json", "{}", "[]"),
    ):
        with pytest.raises(ToolError, match="state directory"):
            call()
    assert (state / "state.json").read_text() == "{}"
    assert sorted(p.name for p in state.iterdir()) == ["state.json"]
    assert "{}" in files.read(".agent/state.json")


def test_files_holding_the_users_uncommitted_work_are_read_only(repo):
    files = Files(repo, protected={"a.txt", "sub/"})
    with pytest.raises(ToolError, match="uncommitted work"):
        files.write("a.txt", "overwritten")
    with pytest.raises(ToolError, match="uncommitted work"):
        files.edit("a.txt", "alpha", "omega")
    with pytest.raises(ToolError, match="uncommitted work"):
        files.write("sub/b.py", "x")
    assert (repo / "a.txt").read_text() == "alpha\nbeta\ngamma\n"
    assert "alpha" in files.read("a.txt")
    assert files.write("c.txt", "fine\n").startswith("created file c.txt")


def test_a_path_in_the_home_directory_is_refused_not_made_a_folder_named_tilde(files, repo):
    for path in ("~/.bashrc", "~"):
        with pytest.raises(ToolError, match=r"names the home directory, which is outside"):
            files.write(path, "alias ls=rm\n")
        with pytest.raises(ToolError, match=r"names the home directory"):
            files.read(path)
    assert not (repo / "~").exists()
    files.write("./~/notes.txt", "a folder named ~, asked for as such\n")
    assert (repo / "~" / "notes.txt").is_file()


def test_a_link_that_leads_nowhere_is_called_so_not_missing(files, repo):
    os.symlink("loop2", repo / "loop1")
    os.symlink("loop1", repo / "loop2")
    os.symlink("gone.txt", repo / "dangling")
    for path in ("loop1", "dangling"):
        with pytest.raises(ToolError, match=rf"^{path} is a symbolic link that leads nowhere"):
            files.read(path)
        with pytest.raises(ToolError, match=r"is a symbolic link that leads nowhere"):
            files.edit(path, "a", "b")
    with pytest.raises(ToolError, match=r"^missing.txt does not exist$"):
        files.read("missing.txt")


def test_empty_and_nul_paths_are_refused(files):
    with pytest.raises(ToolError, match="empty"):
        files.read("  ")
    with pytest.raises(ToolError, match="NUL"):
        files.read("a\0.txt")


# --- read ----------------------------------------------------------------------------------


def test_read_numbers_the_lines_of_a_small_file(files):
    assert files.read("a.txt") == "1  alpha\n2  beta\n3  gamma"


def test_read_does_not_dump_binary_files(files, repo):
    (repo / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)))
    assert files.read("img.png") == "img.png: binary file, 266 bytes; not shown"
    with pytest.raises(ToolError, match="img.png is a binary file; it cannot be edited"):
        files.edit("img.png", "PNG", "GIF")


_NOT_UTF8 = "[latin1.c is not UTF-8 text: bytes that are not UTF-8 are shown as \\xNN; edit_file changes UTF-8 text only]"


def test_text_that_is_not_utf8_is_read_with_its_other_bytes_escaped_not_called_binary(repo):
    (repo / "latin1.c").write_bytes(
        "".join(f"/* caf\xe9 {i} */\n" for i in range(1, 11)).encode("latin-1")
    )
    files = Files(repo, max_read_lines=4)
    assert files.read("latin1.c", start_line=9) == (
        f"{_NOT_UTF8}\n 9  /* caf\\xe9 9 */\n10  /* caf\\xe9 10 */\n[lines 9-10 of 10 shown]"
    )
    assert files.search("caf.* 10 ") == "latin1.c:10: /* caf\\xe9 10 */"
    before = (repo / "latin1.c").read_bytes()
    with pytest.raises(ToolError, match=r"latin1.c is a file that is not UTF-8 text; edit_file"):
        files.edit("latin1.c", "10", "11")
    assert (repo / "latin1.c").read_bytes() == before
    assert files.write("latin1.c", "x\n") == (
        "replaced latin1.c (a file that is not UTF-8 text) with UTF-8 text (1 lines)"
    )


def test_utf16_text_with_its_byte_order_mark_is_read_decoded(files, repo):
    (repo / "app.rc").write_bytes('VALUE "Caf\xe9"\r\nEND\r\n'.encode("utf-16"))
    assert files.read("app.rc") == (
        "[app.rc is UTF-16 text, shown decoded; edit_file changes UTF-8 text only]\n"
        '1  VALUE "Caf\xe9"\n2  END'
    )
    with pytest.raises(ToolError, match="app.rc is a UTF-16 text file; edit_file changes"):
        files.edit("app.rc", "END", "FIN")
    (repo / "not16.bin").write_bytes(b"\xff\xfe\x00\x00\x01\x00\x00\x00")  # UTF-32, not 16
    assert files.read("not16.bin") == "not16.bin: binary file, 8 bytes; not shown"


def test_read_pages_huge_files_and_says_how_to_get_more(repo):
    (repo / "big.txt").write_text("".join(f"row {i}\n" for i in range(1, 1001)))
    files = Files(repo, max_read_lines=400)
    first = files.read("big.txt").splitlines()
    assert len(first) == 401
    assert first[0] == "  1  row 1" and first[399] == "400  row 400"
    assert (
        first[-1]
        == "[lines 1-400 of 1000 shown; read again with start_line=401 (and end_line) to see more]"
    )
    second = files.read("big.txt", start_line=401).splitlines()
    assert second[0] == "401  row 401" and second[-1].startswith("[lines 401-800 of 1000 shown")
    last = files.read("big.txt", start_line=950, end_line=5000).splitlines()
    assert last[-2] == "1000  row 1000"
    assert last[-1] == "[lines 950-1000 of 1000 shown]"
    window = files.read("big.txt", start_line="10", end_line=12).splitlines()
    assert window == [
        "10  row 10",
        "11  row 11",
        "12  row 12",
        "[lines 10-12 of 1000 shown; read again with start_line=13 (and end_line) to see more]",
    ]


@pytest.mark.parametrize(
    "start,end,message",
    [
        (0, None, "1 or more"),
        (5, 2, "before start_line"),
        (99, None, "past the end"),
        ("x", None, "whole number"),
    ],
)
def test_bad_line_ranges_are_tool_errors(files, start, end, message):
    with pytest.raises(ToolError, match=message):
        files.read("a.txt", start_line=start, end_line=end)


def test_read_refuses_missing_files_and_directories_and_handles_empty_and_long_lines(files, repo):
    with pytest.raises(ToolError, match="does not exist"):
        files.read("nope.txt")
    with pytest.raises(ToolError, match="directory"):
        files.read("sub")
    (repo / "empty.txt").write_text("")
    assert files.read("empty.txt") == "empty.txt: empty file"
    (repo / "min.js").write_text("x" * 5000 + "\n")
    assert files.read("min.js").endswith("[... 3000 characters cut]")


def test_a_huge_one_line_file_is_read_in_bounded_memory(files, repo):
    # a 64 MB minified bundle or data dump: the line is not held whole to show 2,000 characters
    line = "é" + "x" * 3999 + "€" * 4000
    with open(repo / "dump.json", "w", encoding="utf-8") as f:
        for _ in range(8000):
            f.write(line)
        f.write("\r\nsecond\n")
    tracemalloc.start()
    try:
        shown = files.read("dump.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak
    first, second = shown.splitlines()
    assert first == f"1  {line[:2000]} [... {8000 * len(line) - 2000} characters cut]"
    assert second == "2  second"
    assert files.read("dump.json", start_line=2) == "2  second\n[lines 2-2 of 2 shown]"


# --- write and edit -------------------------------------------------------------------------


def test_write_creates_parent_directories_and_reports_the_new_file(files, repo):
    result = files.write("new/deep/mod.py", "one\ntwo\n")
    assert (repo / "new" / "deep" / "mod.py").read_text() == "one\ntwo\n"
    assert result.splitlines()[0] == "created file new/deep/mod.py (2 lines)"
    assert "+one" in result and "+two" in result


def test_write_over_a_file_returns_a_unified_diff(files, repo):
    result = files.write("a.txt", "alpha\nBETA\ngamma\n")
    assert "--- a/a.txt" in result and "+++ b/a.txt" in result
    assert "-beta" in result and "+BETA" in result
    assert (
        files.write("a.txt", "alpha\nBETA\ngamma\n")
        == "a.txt already had this content; nothing changed"
    )
    assert sorted(p.name for p in repo.iterdir()) == [".git", "a.txt", "sub"], "no temp files left"


def test_write_refuses_directories_and_non_text_content(files, repo):
    with pytest.raises(ToolError, match="directory"):
        files.write("sub", "x")
    with pytest.raises(ToolError, match=r"^new/ ends with '/', which names a directory"):
        files.write("new/", "x")
    assert not (repo / "new").exists()
    with pytest.raises(ToolError, match=r"^cannot write a.txt/deep/b: a.txt is a file, not a dir"):
        files.write("a.txt/deep/b", "x")
    assert (repo / "a.txt").read_text() == "alpha\nbeta\ngamma\n"
    with pytest.raises(ToolError, match="string"):
        files.write("a.txt", 42)


def test_edit_replaces_the_single_match_and_returns_the_diff(files, repo):
    result = files.edit("sub/b.py", "return 'beta'", "return 'BETA'")
    assert (repo / "sub" / "b.py").read_text() == "def b():\n    return 'BETA'\n"
    assert "-    return 'beta'" in result and "+    return 'BETA'" in result


def test_edit_with_no_match_says_zero_and_changes_nothing(files, repo):
    with pytest.raises(ToolError, match=r"0 matches"):
        files.edit("a.txt", "delta", "epsilon")
    assert (repo / "a.txt").read_text() == "alpha\nbeta\ngamma\n"


def test_edit_with_two_matches_says_how_many_and_where_and_changes_nothing(files, repo):
    (repo / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"matches 2 times in dup.txt \(at lines 1, 3\)"):
        files.edit("dup.txt", "x = 1", "x = 3")
    assert (repo / "dup.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    (repo / "aaa.txt").write_text("aaa")
    with pytest.raises(ToolError, match="2 times"):
        files.edit("aaa.txt", "aa", "b")


def test_matches_on_one_line_are_counted_per_line_not_listed_as_the_same_number(files, repo):
    (repo / "min.js").write_text("var a=1;" * 3000 + "\nvar a=1;\n")
    with pytest.raises(
        ToolError, match=r"more than 1000 times in min.js \(at line 1 \(1000\+ times\)\);"
    ):
        files.edit("min.js", "var a=1;", "let a=1;")
    (repo / "x.txt").write_text("x = 1\ny = 2\nx = 1; x = 1\nx = 1\n")
    with pytest.raises(ToolError, match=r"4 times in x.txt \(at lines 1, 3 \(2 times\), 4\);"):
        files.edit("x.txt", "x = 1", "x = 2")


def test_edit_matches_lf_text_in_a_crlf_file(files, repo):
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    files.edit("win.txt", "one\ntwo", "ONE\nTWO")
    assert (repo / "win.txt").read_bytes() == b"ONE\r\nTWO\r\nthree\r\n"


def test_lines_an_edit_adds_to_a_crlf_file_end_in_crlf(files, repo):
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    files.edit("win.txt", "two", "two\nextra")
    assert (repo / "win.txt").read_bytes() == b"one\r\ntwo\r\nextra\r\nthree\r\n"
    files.edit("win.txt", "extra", "more\r\nlines\n")  # already CRLF in part: no CR doubled
    assert (repo / "win.txt").read_bytes() == b"one\r\ntwo\r\nmore\r\nlines\r\n\r\nthree\r\n"


def test_a_write_over_a_crlf_file_keeps_its_line_endings(files, repo):
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    assert (
        files.write("win.txt", "one\ntwo\n") == "win.txt already had this content; nothing changed"
    )
    assert (repo / "win.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert "+TWO" in files.write("win.txt", "one\nTWO\n")
    assert (repo / "win.txt").read_bytes() == b"one\r\nTWO\r\n"


def test_a_utf8_byte_order_mark_is_not_shown_and_a_write_keeps_it(files, repo):
    (repo / "notepad.py").write_bytes(b"\xef\xbb\xbfx = 1\r\ny = 2\r\n")
    assert files.read("notepad.py") == "1  x = 1\n2  y = 2"
    # the model writes back what it read: the file keeps its mark (and its line ends)
    assert "already had this content" in files.write("notepad.py", "x = 1\ny = 2\n")
    assert "+y = 3" in files.write("notepad.py", "x = 1\ny = 3\n")
    assert (repo / "notepad.py").read_bytes() == b"\xef\xbb\xbfx = 1\r\ny = 3\r\n"
    files.edit("notepad.py", "x = 1", "x = 5")  # old text as read matches after the mark
    assert (repo / "notepad.py").read_bytes() == b"\xef\xbb\xbfx = 5\r\ny = 3\r\n"
    assert files.read("notepad.py", start_line=2) == "2  y = 3\n[lines 2-2 of 2 shown]"


def test_a_change_no_line_diff_shows_is_said_not_called_nothing(files, repo):
    result = files.write("a.txt", "alpha\nbeta\ngamma")
    assert (repo / "a.txt").read_text() == "alpha\nbeta\ngamma"
    assert result == "a.txt: the same lines; changed the newline at its end removed"
    assert files.edit("a.txt", "gamma", "gamma\n") == (
        "a.txt: the same lines; changed the newline at its end added"
    )
    (repo / "lf.txt").write_bytes(b"one\ntwo\n")
    assert files.write("lf.txt", "one\r\ntwo\r\n") == (  # CRs the model sent are its own
        "lf.txt: the same lines; changed its line endings (LF before, CRLF now)"
    )


def test_edit_matches_lf_text_in_a_file_of_mixed_line_endings(files, repo):
    # read_file shows no CR, so the model's old text has LF wherever the file has CRLF
    (repo / "mixed.txt").write_bytes(b"one\r\ntwo\nthree\r\nfour\n")
    files.edit("mixed.txt", "one\ntwo\nthree", "ONE\nTWO\nTHREE")  # each line keeps its end
    assert (repo / "mixed.txt").read_bytes() == b"ONE\r\nTWO\nTHREE\r\nfour\n"
    (repo / "mixed.txt").write_bytes(b"a\r\nb\r\nc\n")
    files.edit("mixed.txt", "a\nb", "A\nB")  # a span of CRLF lines: the new lines end so too
    assert (repo / "mixed.txt").read_bytes() == b"A\r\nB\r\nc\n"
    (repo / "twice.txt").write_bytes(b"x\r\ny\nx\ny\n")
    with pytest.raises(ToolError, match=r"matches 2 times in twice.txt \(at lines 1, 3\)"):
        files.edit("twice.txt", "x\ny", "z")
    assert (repo / "twice.txt").read_bytes() == b"x\r\ny\nx\ny\n"


def test_lines_ending_in_cr_cr_lf_are_edited_as_read_file_shows_them(files, repo):
    # a file round-tripped through some Windows tools: read_file shows none of a line end's CRs
    (repo / "twice.txt").write_bytes(b"one\r\r\ntwo\r\r\nthree\r\r\n")
    assert files.read("twice.txt") == "1  one\n2  two\n3  three"
    result = files.edit("twice.txt", "one\ntwo", "ONE\nTWO\nextra")
    assert (repo / "twice.txt").read_bytes() == b"ONE\r\r\nTWO\r\r\nextra\r\r\nthree\r\r\n"
    assert result.splitlines()[2:] == [
        "@@ -1,3 +1,4 @@",
        "-one",
        "-two",
        "+ONE",
        "+TWO",
        "+extra",
        " three",
    ]
    assert "already had" in files.write("twice.txt", "ONE\nTWO\nextra\nthree\n")


def test_an_edit_or_a_write_changes_only_the_line_ends_of_lines_it_adds(files, repo):
    # mixed line ends: the lines the model copied unchanged keep theirs, whatever the old text
    (repo / "mixed.txt").write_bytes(b"a\r\nb\nc\r\nd\n")
    files.edit("mixed.txt", "a\nb\nc\nd\n", "a\nB\nc\nd\n")
    assert (repo / "mixed.txt").read_bytes() == b"a\r\nB\nc\r\nd\n"
    files.edit("mixed.txt", "B\nc", "B\nnew\nc")  # a new line ends as the lines replaced
    assert (repo / "mixed.txt").read_bytes() == b"a\r\nB\nnew\nc\r\nd\n"
    files.write("mixed.txt", "A\nB\nnew\nc\nd\n")
    assert (repo / "mixed.txt").read_bytes() == b"A\r\nB\nnew\nc\r\nd\n"
    files.write("mixed.txt", "A\nB\nc\nd\nmore\n")  # as the replaced lines (the file's) most do
    assert (repo / "mixed.txt").read_bytes() == b"A\r\nB\nc\r\nd\nmore\n"


def test_a_file_whose_lines_end_in_cr_alone_keeps_them(files, repo):
    (repo / "mac.txt").write_bytes(b"one\rtwo\r")
    assert files.read("mac.txt") == "1  one\rtwo"  # one line, as git and grep count it
    files.edit("mac.txt", "two", "two\nthree")
    assert (repo / "mac.txt").read_bytes() == b"one\rtwo\rthree\r"
    assert "already had" in files.write("mac.txt", "one\rtwo\rthree\n")
    assert (repo / "mac.txt").read_bytes() == b"one\rtwo\rthree\r"


def test_old_text_may_end_the_last_line_that_has_no_newline(files, repo):
    # read_file shows a last line alike whether it ends or not: its whole line matches
    (repo / "win.txt").write_bytes(b"one\r\ntwo")
    files.edit("win.txt", "one\ntwo\n", "ONE\ntwo\nthree\n")
    assert (repo / "win.txt").read_bytes() == b"ONE\r\ntwo\r\nthree"  # still no newline
    (repo / "cr.txt").write_bytes(b"a\nb\r")  # a last line ended by a CR, which is not shown
    files.edit("cr.txt", "b\n", "B\n")
    assert (repo / "cr.txt").read_bytes() == b"a\nB\r"
    assert "already had" in files.write("cr.txt", "a\nB\n")


def test_the_diff_numbers_lines_as_read_file_does(files, repo):
    # a form feed inside a line ends no line for read_file, nor for the diff it is read beside
    (repo / "ff.py").write_bytes(b"x = 1  # page\x0cbreak\ny = 2\n")
    assert files.read("ff.py") == "1  x = 1  # page\x0cbreak\n2  y = 2"
    assert files.edit("ff.py", "y = 2", "y = 3").split("\n")[2:] == [
        "@@ -1,2 +1,2 @@",
        " x = 1  # page\x0cbreak",
        "-y = 2",
        "+y = 3",
    ]


def test_old_text_off_only_in_whitespace_is_pointed_to(files, repo):
    (repo / "tabs.py").write_text("def f():\n\treturn 1\n\n\ndef g():\n\treturn 2\n")
    with pytest.raises(ToolError, match=r"0 matches\) as given, but it matches at line 5 when"):
        files.edit("tabs.py", "def g():\n    return 2", "def g():\n    return 3")
    with pytest.raises(ToolError, match=r"0 matches\); read the file and copy the exact text"):
        files.edit("tabs.py", "def h():", "def i():")


def test_a_missed_edit_is_looked_for_in_linear_time(files, repo):
    # a long old text against a long line: a pattern match would compare them at every place
    (repo / "min.js").write_text("var a=1;" * 300_000)
    (repo / "win.txt").write_bytes(b"a \r\n" * 600_000)
    began = time.monotonic()
    with pytest.raises(ToolError, match="0 matches"):
        files.edit("min.js", "x" * 3000, "y")
    with pytest.raises(ToolError, match="0 matches"):
        files.edit("win.txt", "a\n" * 3000 + "b", "c")
    assert time.monotonic() - began < 3


def test_edit_refuses_empty_old_text_binary_files_and_missing_files(files, repo):
    with pytest.raises(ToolError, match="must not be empty"):
        files.edit("a.txt", "", "x")
    (repo / "blob.bin").write_bytes(b"ab\x00cd")
    with pytest.raises(ToolError, match="binary"):
        files.edit("blob.bin", "ab", "xy")
    with pytest.raises(ToolError, match="does not exist"):
        files.edit("missing.txt", "a", "b")


# --- search and list ------------------------------------------------------------------------


def test_search_reports_path_line_and_text(files):
    assert files.search(r"beta") == "a.txt:2: beta\nsub/b.py:2: return 'beta'"
    assert files.search(r"beta", "sub") == "sub/b.py:2: return 'beta'"
    assert files.search(r"^gam", "a.txt") == "a.txt:3: gamma"
    assert files.search("nothing-like-this") == "no matches for 'nothing-like-this' in ."


def test_search_skips_git_state_binary_ignored_and_outside_files(files, repo):
    (repo / ".gitignore").write_text("build/\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.txt").write_text("needle in build\n")
    (repo / ".agent").mkdir()
    (repo / ".agent" / "memory.txt").write_text("needle in state\n")
    (repo / ".git" / "needle.txt").write_text("needle in git\n")
    (repo / "blob.bin").write_bytes(b"needle\x00")
    (_outside(repo) / "secret.txt").write_text("needle outside\n")
    (repo / "leak.txt").symlink_to(_outside(repo) / "secret.txt")
    (repo / "found.txt").write_text("a needle here\n")
    assert files.search("needle") == "found.txt:1: a needle here"


def test_search_finds_matches_in_utf16_text_as_read_file_numbers_its_lines(files, repo):
    (repo / "app.rc").write_bytes('BEGIN\r\nVALUE "Caf\xe9 needle"\r\nEND\r\n'.encode("utf-16"))
    (repo / "be.ps1").write_bytes(b"\xfe\xff" + "# needle\n".encode("utf-16-be"))
    (repo / "not16.bin").write_bytes(b"\xff\xfe\x00\x00n\x00e\x00")  # UTF-32: binary
    assert files.search("needle") == 'app.rc:2: VALUE "Caf\xe9 needle"\nbe.ps1:1: # needle'
    assert files.read("app.rc").splitlines()[2] == '2  VALUE "Caf\xe9 needle"'


def test_search_decodes_a_utf16_file_once(files, repo):
    """The UTF-16 text that tells search the file is text is the text it searches: its bytes
    are decoded once (counted as calls of `bytes.decode` on them, seen by a profiler)."""
    data = "".join(f"line {n} needle\n" for n in range(2000)).encode("utf-16")
    (repo / "wide.rc").write_bytes(data)
    decoded: list[int] = []

    def watch(frame, event, arg) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") == "decode":
            if getattr(arg, "__self__", None) == data:
                decoded.append(len(data))

    sys.setprofile(watch)
    try:
        found = files.search("needle", "wide.rc")
    finally:
        sys.setprofile(None)
    assert found.splitlines()[0] == "wide.rc:1: line 0 needle"
    assert "[... 1900 more matches not shown" in found  # 2,000 lines, each read
    assert decoded == [len(data)]


def test_a_file_and_links_to_it_are_searched_once(files, repo):
    os.symlink("a.txt", repo / "link.txt")
    os.symlink("../a.txt", repo / "sub" / "up.txt")
    assert files.search("gamma") == "a.txt:3: gamma"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=a@b.c", "-c", "user.name=n", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _with_submodule(tmp_path: Path) -> tuple[Path, Path]:
    """A repository `main` whose `vendor/lib` is a submodule of the repository `lib`."""
    lib = tmp_path / "lib"
    _git(tmp_path, "init", "-q", "lib")
    (lib / "helpers.py").write_text("def helper():\n    pass\n")
    _git(lib, "add", ".")
    _git(lib, "commit", "-qm", "lib")
    main = tmp_path / "main"
    _git(tmp_path, "init", "-q", "main")
    (main / "app.py").write_text("from vendor.lib.helpers import helper\n")
    _git(main, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    return main, lib


def test_search_reaches_into_a_submodule(tmp_path):
    main, _ = _with_submodule(tmp_path)
    files = Files(main)
    assert files.search("def helper") == "vendor/lib/helpers.py:1: def helper():"
    assert files.search("helper", "vendor").splitlines() == [
        "vendor/lib/helpers.py:1: def helper():"
    ]
    assert files.search("import helper") == "app.py:1: from vendor.lib.helpers import helper"


def test_a_write_inside_a_submodule_or_a_nested_clone_is_refused(tmp_path):
    """The run commits this repository's files only: a change in a repository inside it would
    be left uncommitted (or lost with a worktree), so the tools refuse it, nothing written."""
    main, lib = _with_submodule(tmp_path)
    _git(main, "add", "-A")
    _git(main, "commit", "-qm", "with a submodule")
    _git(tmp_path, "clone", "-q", str(lib), "main/other")  # a clone inside, not a submodule
    _git(main, "worktree", "add", "-q", str(tmp_path / "tree"))  # the submodule left empty there
    for root, path in (
        (main, "vendor/lib/helpers.py"),
        (main, "vendor/lib/new.py"),
        (main, "other/helpers.py"),
        (tmp_path / "tree", "vendor/lib/new.py"),
    ):
        folder = path.rsplit("/", 1)[0]
        with pytest.raises(ToolError, match=f"inside {folder}, a repository of its own"):
            Files(root).write(path, "changed\n")
        assert not (root / path).exists() or "changed" not in (root / path).read_text()
    with pytest.raises(ToolError, match="a repository of its own"):
        Files(main).edit("vendor/lib/helpers.py", "pass", "return 1")
    assert "created" in Files(main).write("vendor/notes.txt", "mine\n")  # beside it: fine


def test_search_outside_a_git_repository_walks_the_tree(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("needle\n")
    assert Files(tmp_path / "plain").search("needle") == "x.txt:1: needle"


def test_search_caps_the_hits_and_counts_the_rest(files, repo):
    (repo / "many.txt").write_text("hit\n" * 130)
    lines = files.search("^hit$").splitlines()
    assert len(lines) == 101
    assert lines[0] == "many.txt:1: hit"
    assert lines[-1] == "[... 30 more matches not shown; narrow the pattern or the path]"


def test_a_search_out_of_time_keeps_the_matches_it_found_and_says_where_it_stopped(
    files, repo, monkeypatch
):
    monkeypatch.setattr("agent_cli.workspace.files.SEARCH_TIME_LIMIT_S", 1.0)
    (repo / "a_hits.txt").write_text("hit one\nmiss\nhit two\n")
    (repo / "b_slow.txt").write_text("b" * 40 + "!\n")  # (b|bb)+$ backtracks for ever on it
    (repo / "c_more.txt").write_text("hit three\n")
    assert files.search("hit|(b|bb)+$") == (
        "a_hits.txt:1: hit one\na_hits.txt:3: hit two\n"
        "[the search for 'hit|(b|bb)+$' took more than 1s of processor time and was stopped in "
        "b_slow.txt, after 2 files; the matches shown are from those; use a simpler pattern or a "
        "narrower path to search the rest]"
    )
    assert files.search("(b|bb)+$", "b_slow.txt").endswith(
        "was stopped in b_slow.txt, after 0 files, none of which matched; use a simpler "
        "pattern or a narrower path to search the rest]"
    )


def test_a_pattern_too_long_to_prepare_in_time_is_refused_at_once(files, repo):
    (repo / "min.js").write_text("var a=1;" * 2000)
    began = time.monotonic()
    with pytest.raises(ToolError, match=r"^the pattern is 3,000 characters; search for a dist"):
        files.search("x" * 3000)
    assert time.monotonic() - began < 1
    assert (
        files.search("var a=1;" * 124 + "x")
        == "no matches for " + repr("var a=1;" * 124 + "x") + " in ."
    )


def test_a_file_too_large_to_search_is_said_not_passed_over(files, repo):
    (repo / "big.sql").write_text("x" * 5_100_000 + "\nCREATE TABLE needle (id int);\n")
    said = files.search("needle", "big.sql")
    assert said == "[not searched, over 5 MB: big.sql; read_file reads them a page at a time]"
    everywhere = files.search("needle").splitlines()
    assert everywhere == ["no matches for 'needle' in .", said]
    (repo / "a.txt").write_text("needle\n")
    assert files.search("needle").splitlines() == ["a.txt:1: needle", said]


def test_search_refuses_bad_regexes_and_paths_outside(files):
    with pytest.raises(ToolError, match="bad regular expression"):
        files.search("(unclosed")
    with pytest.raises(ToolError, match=r"make 1,000,000,000 copies .* \(at most 100,000\)"):
        files.search("((a{1000}){1000}){1000}")  # 24 characters that would take all memory
    assert files.search(r"\d{4}-\d{2}|(?:x{10}|y{20}){30}").startswith("no matches")
    with pytest.raises(ToolError, match="outside"):
        files.search("x", "../outside")


def test_list_dir_marks_directories_and_hides_git(files):
    assert files.list_dir() == "a.txt  17 bytes\nsub/"
    assert files.list_dir("sub") == "b.py  27 bytes"
    with pytest.raises(ToolError, match="not a directory"):
        files.list_dir("a.txt")


def test_list_dir_hides_the_state_directory_and_shows_one_level_with_sizes(files, repo):
    (repo / ".agent" / "runs").mkdir(parents=True)
    (repo / "GIT").mkdir()
    (repo / ".GIT").mkdir()
    (repo / "sub" / "deep").mkdir()
    (repo / "sub" / "deep" / "c.txt").write_text("c")
    os.symlink("a.txt", repo / "link")
    os.mkfifo(repo / "pipe")
    assert files.list_dir(".").splitlines() == [
        "GIT/",
        "a.txt  17 bytes",
        "link@",
        "pipe (not a regular file)",
        "sub/",
    ]
    assert files.list_dir("sub") == "b.py  27 bytes\ndeep/"
    (repo / "empty").mkdir()
    assert files.list_dir("empty") == "empty is empty"
    for inside in (".git", ".git/refs", ".agent", ".agent/runs"):
        with pytest.raises(ToolError, match="list_dir does not show it"):
            files.list_dir(inside)


def test_list_dir_hides_a_state_directory_with_another_name(repo):
    (repo / "state").mkdir()
    assert "state/" not in Files(repo, deny_write=[repo / "state"]).list_dir().splitlines()


def test_list_dir_is_confined_and_bounded(files, repo):
    with pytest.raises(ToolError, match="outside the repository"):
        files.list_dir("../outside")
    os.symlink(_outside(repo), repo / "out")
    with pytest.raises(ToolError, match="outside the repository"):
        files.list_dir("out")
    many = repo / "many"
    many.mkdir()
    for i in range(503):
        (many / f"f{i:03}").write_text("")
    lines = files.list_dir("many").splitlines()
    assert len(lines) == 501 and lines[0] == "f000  0 bytes"
    assert lines[-1] == "[... 3 more entries not shown]"


def test_root_given_through_a_symlink_still_confines(tmp_path, repo):
    link = tmp_path / "repo-link"
    os.symlink(repo, link)
    files = Files(link)
    assert files.read("a.txt").startswith("1  alpha")
    with pytest.raises(ToolError):
        files.read("../outside/secret.txt")
