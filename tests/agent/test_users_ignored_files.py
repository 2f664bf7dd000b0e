"""What git ignores in the work tree before a run (the user's .env, their virtualenv) is the
user's own: no commit holds it, so the model's file tools never write it (workspace/files.py)."""

from __future__ import annotations

from agent.test_loop import run_in_process
from agent_cli.workspace.files import Files
from conftest import git
from reliability.relkit import call, finish, make_done, plan, repo_with, task


def test_a_run_leaves_the_users_ignored_files_as_they_were(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    (repo / ".gitignore").write_text(".env\nvenv/\n*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore the user's own files")
    (repo / ".env").write_text("SECRET=mine\n")
    (repo / "venv").mkdir()
    (repo / "venv" / "site.py").write_text("# the user's virtualenv\n")
    srv = fake_server(
        [
            plan(task()),
            call("write_file", path=".env", content="SECRET=the-agent's\n"),
            call("edit_file", path="venv/site.py", old="virtualenv", new="nothing"),
            call("write_file", path="venv/new.py", content="x = 1\n"),
            call("write_file", path="build.log", content="a new ignored file\n"),
            make_done(),
            finish("made done.txt"),
        ]
    )
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    assert (repo / ".env").read_text() == "SECRET=mine\n"
    assert (repo / "venv" / "site.py").read_text() == "# the user's virtualenv\n"
    assert not (repo / "venv" / "new.py").exists()
    assert (repo / "build.log").read_text() == "a new ignored file\n"  # nobody's before the run
    said = "\n".join(str(m.get("content")) for b in srv.chat_requests for m in b["messages"])
    for path in (".env", "venv/site.py", "venv/new.py"):
        assert f"{path} is ignored by git and was in the work tree before the run" in said


def test_only_what_was_ignored_before_the_run_is_refused(tmp_path):
    files = Files(tmp_path, users_ignored=[".env", "venv/"])
    (tmp_path / "venv").mkdir()
    for path in (".env", "venv/a.py", "venv"):
        try:
            files.resolve(path, write=True)
        except Exception as e:  # ToolError
            assert "is ignored by git" in str(e)
        else:
            raise AssertionError(f"{path} was writable")
    assert files.resolve(".envrc", write=True) == tmp_path.resolve() / ".envrc"
    assert files.resolve("venvs/a.py", write=True) == tmp_path.resolve() / "venvs" / "a.py"
