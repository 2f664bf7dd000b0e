"""A settings file is read within a size bound, as a regular file, without blocking."""

from __future__ import annotations

import pytest

from agent_cli.cli.config.settings import MAX_RC_BYTES, load_settings
from agent_cli.core.errors import ConfigError


def test_an_oversized_agentrc_is_one_clear_error(tmp_path):
    (tmp_path / ".agentrc").write_text("# padding\n" * (MAX_RC_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="is larger than"):
        load_settings(tmp_path, env={}, user_rc=tmp_path / "none")


def test_a_user_agentrc_that_is_a_link_to_a_file_is_still_read(tmp_path):
    (tmp_path / "dotfiles.toml").write_text('model = "linked-model"\n')
    (tmp_path / "home.agentrc").symlink_to(tmp_path / "dotfiles.toml")
    repo = tmp_path / "repo"
    repo.mkdir()
    assert load_settings(repo, env={}, user_rc=tmp_path / "home.agentrc").model == "linked-model"


def test_an_agentrc_nested_thousands_deep_is_one_clear_error(tmp_path):
    (tmp_path / ".agentrc").write_text("model = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match="not valid TOML: its values nest too deeply"):
        load_settings(tmp_path, env={}, user_rc=tmp_path / "none")


def test_an_agentrc_that_starts_with_a_byte_order_mark_is_read(tmp_path):
    """Notepad saves UTF-8 with a BOM; tomllib alone refuses it at line 1, column 1."""
    (tmp_path / "home.agentrc").write_bytes(b'\xef\xbb\xbfmodel = "bom-model"\n')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".agentrc").write_bytes(b"\xef\xbb\xbfmax_steps = 7\n")
    settings = load_settings(repo, env={}, user_rc=tmp_path / "home.agentrc")
    assert (settings.model, settings.max_steps) == ("bom-model", 7)
