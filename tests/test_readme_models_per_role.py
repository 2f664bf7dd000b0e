"""README "Models per role": its configuration is what the settings loader reads and routes."""

from __future__ import annotations

import re
from pathlib import Path

from agent_cli.cli import roles
from agent_cli.cli.config.settings import FIELDS, load_settings

README = Path(__file__).resolve().parent.parent / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("## Models per role\n")
    return text[start : text.index("\n## ", start + 1)]


def toml_block() -> str:
    (block,) = re.findall(r"```toml\n(.*?)```", section(), re.S)
    return block


def test_the_readme_configuration_routes_each_role(tmp_path):
    rc = tmp_path / "agentrc"
    rc.write_text(toml_block())
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json"), "OPENAI_API_KEY": "sk-test-1234567"}
    settings = load_settings(None, env=env, user_rc=rc)
    planner, executor, verifier = (roles.endpoint(settings, r) for r in roles.ROLES)
    assert (planner.model, planner.base_url) == ("gpt-4o", "https://api.openai.com/v1")
    assert (executor.model, executor.base_url) == (
        "qwen2.5-coder-7b-instruct",
        "http://127.0.0.1:8080/v1",
    )
    assert (verifier.model, verifier.base_url) == ("gpt-4o-mini", "https://api.openai.com/v1")
    # the local executor bills nothing and is sent no key; the hosted roles get the API key
    assert executor.prices["price_in"] == 0.0 and planner.prices["price_in"] > 0
    assert roles.api_key(settings, "executor", executor) is None
    assert roles.api_key(settings, "planner", planner) == "sk-test-1234567"
    assert len(roles.distinct(settings)) == 3


def test_the_same_configuration_in_an_untrusted_repository_is_ignored(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".agentrc").write_text(toml_block())
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json")}
    settings = load_settings(repo, env=env, user_rc=tmp_path / "none")
    assert settings.executor_base_url is None and settings.executor_model is None
    assert not roles.set_apart(settings)
    assert "executor_base_url" in settings.notices[0]


def test_every_key_the_section_names_is_a_setting():
    named = set(re.findall(r"`((?:planner|executor|verifier)_[a-z_]+)`", section()))
    assert {"executor_base_url", "planner_model", "verifier_model"} <= named
    assert named - {"<role>_api_key_env"} <= set(FIELDS)
    for key in ("usage_by_role", "by role:", "agent trust", "agent doctor", "--resume"):
        assert key in section(), key
