"""`[mcp_servers.NAME]` and `deny_tools` in the settings: validated, trusted, documented."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from agent_cli.cli.config import trust
from agent_cli.cli.config.settings import load_settings
from agent_cli.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def load(repo: Path, env=None, user_rc=None):
    return load_settings(repo, None, env or {}, user_rc or repo / "missing-user-rc")


def readme_mcp_toml() -> str:
    section = ROOT.joinpath("README.md").read_text().split("## MCP servers", 1)[1]
    return re.search(r"```toml\n(.*?)```", section, re.S).group(1)


def test_the_readme_configuration_is_what_the_settings_read(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text(readme_mcp_toml())
    s = load(tmp_path, user_rc=user)
    time, docs = s.mcp_servers["time"], s.mcp_servers["docs"]
    assert time.transport == "stdio" and time.command == "python"
    assert time.args == ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    assert time.env == {"TZ": "UTC"} and time.startup_timeout_s == 20
    assert time.tool_timeout_s == 60 and time.enabled_tools == ["get_current_time"]
    assert docs.transport == "http" and docs.url == "http://127.0.0.1:8931/mcp"
    assert docs.bearer_token_env_var == "DOCS_MCP_TOKEN"


def test_the_example_file_shows_the_same_servers():
    lines = ROOT.joinpath(".agentrc.example").read_text().split("#[mcp_servers.time]", 1)[1]
    text = "[mcp_servers.time]" + "\n".join(
        line[1:] if line.startswith("#") else line for line in lines.splitlines()
    )
    servers = tomllib.loads(text)["mcp_servers"]
    assert set(servers) == {"time", "docs"}


@pytest.mark.parametrize(
    "table, expect",
    [
        ('[mcp_servers.x]\nargs = ["a"]\n', "either command"),
        ('[mcp_servers.x]\ncommand = "a"\nurl = "http://h/mcp"\n', "either command"),
        ('[mcp_servers.x]\nurl = "ftp://h/mcp"\n', "http(s) address"),
        ('[mcp_servers.x]\ncommand = "a"\nbearer_token_env_var = "T"\n', "for a url server"),
        ('[mcp_servers.x]\ncommand = "a"\ntool_timeout_s = 0\n', "tool_timeout_s"),
        ('[mcp_servers.x]\ncommand = "a"\nstart_timeout = 3\n', "start_timeout"),
        ('[mcp_servers."a__b"]\ncommand = "a"\n', "no '__'"),
        ('[mcp_servers."a b"]\ncommand = "a"\n', "letters, digits"),
        ('[mcp_servers.x]\ncommand = "a"\nargs = ["b\\u0000"]\n', "NUL character"),
    ],
)
def test_a_bad_server_table_is_one_line_naming_the_file(tmp_path, table, expect):
    user = tmp_path / "user.toml"
    user.write_text(table)
    with pytest.raises(ConfigError) as e:
        load(tmp_path, user_rc=user)
    line = e.value.one_line()
    assert str(user) in line and "mcp_servers" in line and expect in line and "\n" not in line


def test_a_repository_server_counts_only_when_the_repository_is_trusted(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('[mcp_servers.mine]\ncommand = "mine"\n')
    (tmp_path / ".agentrc").write_text('[mcp_servers.theirs]\ncommand = "theirs"\n')
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json")}
    untrusted = load(tmp_path, env=env, user_rc=user)
    assert set(untrusted.mcp_servers) == {"mine"}
    assert any("mcp_servers ignored" in n for n in untrusted.notices)
    trust.record(tmp_path, env)
    trusted = load(tmp_path, env=env, user_rc=user)
    assert set(trusted.mcp_servers) == {"mine", "theirs"}  # joined by name, not replaced
    assert not any("replaces" in n for n in trusted.notices)


def test_a_trusted_repository_server_of_one_of_your_names_replaces_it_and_says_so(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('[mcp_servers.docs]\ncommand = "mine"\n[mcp_servers.same]\ncommand = "s"\n')
    rc = tmp_path / ".agentrc"
    rc.write_text('[mcp_servers.docs]\ncommand = "theirs"\n[mcp_servers.same]\ncommand = "s"\n')
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json")}
    trust.record(tmp_path, env)
    settings = load(tmp_path, env=env, user_rc=user)
    assert settings.mcp_servers["docs"].command == "theirs"  # the later file wins, whole
    said = [n for n in settings.notices if "replaces" in n]
    assert said == [
        f"{rc}: [mcp_servers.docs] replaces the server of that name in your own settings "
        "(its whole table is used, none of yours)"
    ]  # `same` is the same table: nothing of yours is lost, nothing said


def test_a_repository_adds_to_deny_tools_and_the_environment_lists_them(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('deny_tools = ["mcp__time__*"]\n')
    (tmp_path / ".agentrc").write_text('deny_tools = ["mcp__docs__delete"]\n')
    s = load(tmp_path, user_rc=user)
    assert s.deny_tools == ["mcp__time__*", "mcp__docs__delete"]
    env = load(tmp_path, env={"AGENT_DENY_TOOLS": "mcp__a__*, mcp__b__x"})
    assert env.deny_tools == ["mcp__a__*", "mcp__b__x", "mcp__docs__delete"]


@pytest.mark.parametrize(
    ("where", "pattern", "tool"),
    [("file", "run", "run"), ("file", "*", "read_file"), ("env", "write_*", "write_file")],
)
def test_a_deny_tools_pattern_that_matches_a_built_in_tool_is_refused(
    tmp_path, where, pattern, tool
):
    user = tmp_path / "user.toml"
    user.write_text(f'deny_tools = ["{pattern}"]\n' if where == "file" else "")
    env = {"AGENT_DENY_TOOLS": pattern} if where == "env" else {}
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, env=env, user_rc=user)
    line = refused.value.one_line()
    assert f"pattern {pattern!r} matches the built-in tool {tool}" in line
    assert "deny_commands" in line and "\n" not in line


def test_a_servers_env_values_are_masked_where_the_settings_are_shown(tmp_path):
    token = "xoxb-1234567890-abcdefghijklmnop"
    user = tmp_path / "user.toml"
    user.write_text(
        '[mcp_servers.slack]\ncommand = "slack-mcp"\n'
        f'env = {{ SLACK_BOT_TOKEN = "{token}", TZ = "UTC" }}\n'
    )
    s = load(tmp_path, user_rc=user)
    assert s.mcp_servers["slack"].env["SLACK_BOT_TOKEN"] == token  # the server still gets it
    values, _ = s.shown()
    shown = values["mcp_servers"]["slack"]["env"]
    assert shown == {"SLACK_BOT_TOKEN": "xox…mnop", "TZ": "set"}
    assert token not in repr(values)


def test_a_short_secret_is_shown_as_set_and_only_a_long_one_by_its_ends(tmp_path):
    """Its first 3 and last 4 characters are most of an 11-character password: a secret shorter
    than 24 shows none of itself, in doctor's values and in the line refusing a table alike."""
    short = {"DB_PASSWORD": "Tr0ub4dor&3", "API_TOKEN": "abcdefghij-klmnopqrstuv"}
    env = {**short, "LONG_TOKEN": "abcdefghij-klmnopqrstuvw"}
    assert [len(v) for v in env.values()] == [11, 23, 24]
    table = "env = {" + ", ".join(f'{k} = "{v}"' for k, v in env.items()) + "}\n"
    user = tmp_path / "user.toml"
    user.write_text(f'[mcp_servers.db]\ncommand = "db-mcp"\n{table}')
    keys = {"OPENAI_API_KEY": "sk-short-1234", "AGENT_MEMORY_TOKEN": "tok-0123456789"}
    values, _ = load(tmp_path, env=keys, user_rc=user).shown()
    assert values["mcp_servers"]["db"]["env"] == {
        "DB_PASSWORD": "set",
        "API_TOKEN": "set",
        "LONG_TOKEN": "abc…tuvw",
    }
    assert (values["api_key"], values["memory_token"]) == ("set", "set")
    user.write_text(
        f'[mcp_servers.db]\ncommand = "db-mcp"\n{table}[mcp_servers."bad name"]\ncommand = "x"\n'
    )
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, user_rc=user)
    line = refused.value.one_line()
    assert "'DB_PASSWORD': 'set'" in line and "'LONG_TOKEN': 'abc…tuvw'" in line, line
    rest = line.replace("'abc…tuvw'", "")
    assert not [v for v in short.values() if v[:3] in rest or v[-4:] in rest], line


def test_a_bearer_token_is_a_secret_whatever_its_variable_is_called(tmp_path):
    from agent_cli.workspace.shell.runner import scrub_env

    token = "docs-cred-0123456789abcdef"
    user = tmp_path / "user.toml"
    user.write_text(
        '[mcp_servers.docs]\nurl = "http://127.0.0.1:8931/mcp"\n'
        'bearer_token_env_var = "DOCS_MCP_CRED"\n'
        '[mcp_servers.off]\nurl = "http://127.0.0.1:8932/mcp"\n'
        'bearer_token_env_var = "OFF_MCP_CRED"\nenabled = false\n'
    )
    env = {"DOCS_MCP_CRED": token, "OFF_MCP_CRED": "off-cred-0123456789", "TZ": "UTC"}
    s = load(tmp_path, env=env, user_rc=user)
    assert token in s.secrets() and "off-cred-0123456789" in s.secrets()
    assert scrub_env(env, s.secrets()) == {"TZ": "UTC"}  # what commands, hooks, servers get
    values, _ = s.shown()
    assert token not in repr(values) and "mcp_tokens" not in values


@pytest.mark.parametrize(
    "table",
    [
        'command = "a"\nurl = "http://me:pa55word-xyz@h/mcp?api_key=querysecret123"\n'
        'env = { SLACK = "hunter2hunter2-slack" }\n',
        'command = "a"\nenv = "hunter2hunter2-slack"\n',
        'command = "a"\nenv = { SLACK = 98765432123 }\n',
        'command = "a"\nargs = ["-y", "search-mcp", "--api-key", "argsecret-0123456789"]\n'
        'url = "http://h/mcp"\n',
    ],
)
def test_a_refused_server_table_is_quoted_without_its_secrets(tmp_path, table):
    user = tmp_path / "user.toml"
    user.write_text(f"[mcp_servers.x]\n{table}")
    with pytest.raises(ConfigError) as e:
        load(tmp_path, user_rc=user)
    line = e.value.one_line()
    assert "mcp_servers.x" in line and "(got " in line
    for secret in (
        "pa55word-xyz",
        "querysecret123",
        "hunter2hunter2-slack",
        "98765432123",
        "argsecret-0123456789",
    ):
        assert secret not in line, line


def test_a_server_address_and_command_line_are_shown_without_their_credentials(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text(
        '[mcp_servers.web]\nurl = "https://me:pa55word-xyz@h.example/mcp?api_key=querysecret123"\n'
        '[mcp_servers.gh]\ncommand = "gh-mcp"\nargs = ["--token=supersecretArgToken12345"]\n'
    )
    values, _ = load(tmp_path, user_rc=user).shown()
    servers = values["mcp_servers"]
    assert servers["web"]["url"] == "https://***@h.example/mcp?api_key=***"
    assert servers["gh"]["args"] == ["--token=[REDACTED]"] and servers["gh"]["command"] == "gh-mcp"
    for secret in ("pa55word-xyz", "querysecret123", "supersecretArgToken12345"):
        assert secret not in repr(values)


def test_the_credentials_of_a_servers_address_and_command_line_are_secrets(tmp_path):
    """What a server's table carries in its url or argv is redacted from what the server says
    back (a tool error quoting the key it was reached with), as its env credentials are; and
    `agent trust` shows the table with them masked."""
    from agent_cli.cli.commands.trust_command import summary

    user = tmp_path / "user.toml"
    table = (
        '[mcp_servers.web]\nurl = "https://me:pa55word-xyz@h.example/mcp?api_key=querysecret123'
        '&page=pagevalue123"\n'
        '[mcp_servers.tok]\nurl = "https://tokenasuser12345@h.example/mcp"\n'
        '[mcp_servers.gh]\ncommand = "gh-mcp"\n'
        'args = ["--token=supersecretArgToken12345", "--api-key", "argsecret-0123456789", "-v"]\n'
    )
    user.write_text(table)
    secrets = load(tmp_path, user_rc=user).secrets()
    for secret in (
        "pa55word-xyz",
        "querysecret123",
        "tokenasuser12345",
        "supersecretArgToken12345",
        "argsecret-0123456789",
    ):
        assert secret in secrets
    assert "pagevalue123" not in secrets and "me" not in secrets and "-v" not in secrets
    shown = " ".join(summary(tomllib.loads(table)))
    assert "--api-key" in shown and "argsecret-0123456789" not in shown
    assert "supersecretArgToken12345" not in shown and "querysecret123" not in shown


def test_a_bearer_token_with_a_line_end_is_trimmed_and_one_with_a_break_inside_refused(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text(
        '[mcp_servers.docs]\nurl = "http://127.0.0.1:8931/mcp"\n'
        'bearer_token_env_var = "DOCS_MCP_CRED"\n'
    )
    s = load(tmp_path, env={"DOCS_MCP_CRED": "docs-cred-0123456789\r\n"}, user_rc=user)
    assert s.mcp_tokens["docs"].get_secret_value() == "docs-cred-0123456789"
    with pytest.raises(ConfigError) as e:
        load(tmp_path, env={"DOCS_MCP_CRED": "docs-cred\n0123456789"}, user_rc=user)
    line = e.value.one_line()
    assert "DOCS_MCP_CRED" in line and "mcp_servers.docs" in line and "line break" in line
    assert "0123456789" not in line
