"""The user's uncommitted files put back after a command changed them (workspace/userwork.py)."""

from __future__ import annotations

import json

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


def test_what_was_kept_is_on_disk_while_a_command_runs_and_gone_after(tmp_path):
    root, vault = tmp_path / "tree", tmp_path / "vault"
    root.mkdir()
    (root / "notes.md").write_text("mine\n")
    kept = userwork.keep(root, ["notes.md", "gone.txt"], vault)
    listed = json.loads((vault / userwork.LISTED).read_text())
    assert listed["gone.txt"] is None
    assert (vault / userwork.BLOBS / listed["notes.md"]).read_text() == "mine\n"
    userwork.put_back(kept)
    userwork.release(kept)
    assert not (vault / userwork.LISTED).exists()
    userwork.forget(vault)
    assert not (vault / userwork.BLOBS).exists()


def test_recover_copies_only_what_differs_and_only_inside_the_tree(tmp_path):
    root, vault = tmp_path / "tree", tmp_path / "vault"
    root.mkdir()
    (root / "a.txt").write_text("before\n")
    (root / "same.txt").write_text("same\n")
    userwork.keep(root, ["a.txt", "same.txt", "deleted.txt"], vault)  # then the process died
    (root / "a.txt").write_text("after\n")
    (root / "deleted.txt").write_text("made again\n")
    listed = json.loads((vault / userwork.LISTED).read_text())
    digest = listed["a.txt"]
    for hostile in ("../outside.txt", "/etc/passwd", ".git/config", ""):
        listed[hostile] = digest
    listed["bad-digest.txt"] = "../../x"
    (vault / userwork.LISTED).write_text(json.dumps(listed))
    into, said = userwork.recover(root, vault)
    assert said == ["a.txt", "deleted.txt (you had deleted it; it is there again)"]
    assert into is not None and (into / "a.txt").read_text() == "before\n"
    assert sorted(p.name for p in into.rglob("*")) == ["a.txt"]
    assert (root / "a.txt").read_text() == "after\n"  # nothing is put back over the user's
    assert not (tmp_path / "outside.txt").exists()
    assert not (vault / userwork.LISTED).exists() and not (vault / userwork.BLOBS).exists()
    assert userwork.recover(root, vault) == (None, [])


def test_a_vault_that_cannot_be_written_keeps_the_files_in_memory(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "notes.md").write_text("mine\n")
    (tmp_path / "vault").write_text("a file where the vault would be")
    kept = userwork.keep(root, ["notes.md"], tmp_path / "vault")
    assert kept.vault is None
    (root / "notes.md").write_text("clobbered\n")
    assert userwork.put_back(kept) == ["notes.md"]
    assert (root / "notes.md").read_text() == "mine\n"
