"""The user's uncommitted files put back after a command changed them (workspace/userwork.py)."""

from __future__ import annotations

from agent_cli.workspace import userwork


def test_what_a_command_changed_of_the_users_files_is_put_back_and_named(tmp_path, monkeypatch):
    (tmp_path / "notes.md").write_text("mine\n")
    (tmp_path / "big.bin").write_bytes(b"x" * 64)
    monkeypatch.setattr(userwork, "MAX_FILE_BYTES", 32)  # big.bin is now only watched
    kept = userwork.keep(tmp_path, ["notes.md", "gone.txt", "big.bin"])
    (tmp_path / "notes.md").write_text("clobbered\n")
    (tmp_path / "gone.txt").write_text("the user had deleted it\n")
    (tmp_path / "big.bin").write_bytes(b"y" * 65)
    said = userwork.put_back(kept)
    assert (tmp_path / "notes.md").read_text() == "mine\n"
    assert not (tmp_path / "gone.txt").exists()
    assert said[:2] == ["notes.md", "gone.txt"]
    assert said[2].startswith("big.bin (changed; too large") and len(said) == 3
    assert userwork.put_back(userwork.keep(tmp_path, ["notes.md"])) == []  # nothing changed
