import os
from pathlib import Path

import pytest

from agent_cli.cli.config import trust
from agent_cli.cli.config.settings import load_settings
from agent_cli.core.errors import ConfigError, UsageError


def load(repo: Path, env=None, flags=None, user_rc=None):
    return load_settings(repo, flags, env or {}, user_rc or repo / "missing-user-rc")


def test_defaults_and_sources(tmp_path):
    s = load(tmp_path)
    assert s.model == "gpt-4o-mini" and s.approval == "ask" and s.api_key is None
    assert s.sources["model"] == "default"
    assert s.state_dir(tmp_path) == tmp_path / ".agent"


def test_layers_in_order_of_precedence(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('model = "from-user"\nmax_steps = 7\ntask_max_steps = 3\nbudget_usd = 1.5\n')
    (tmp_path / ".agentrc").write_text('model = "from-repo"\nmax_steps = 8\ntask_max_steps = 4\n')
    env = {
        "AGENT_MAX_STEPS": "9",
        "AGENT_TASK_MAX_STEPS": "5",
        "AGENT_TRUST_FILE": str(tmp_path / "trusted.json"),
    }
    trust.record(tmp_path, env)  # a repository's model applies only when trusted
    s = load(tmp_path, env=env, flags={"task_max_steps": 6, "model": None}, user_rc=user)
    assert (s.budget_usd, s.model, s.max_steps, s.task_max_steps) == (1.5, "from-repo", 9, 6)
    assert s.sources["budget_usd"] == str(user)
    assert s.sources["model"] == str(tmp_path / ".agentrc")
    assert s.sources["max_steps"] == "env AGENT_MAX_STEPS"
    assert s.sources["task_max_steps"] == "flag"


def test_standard_openai_variables_are_honoured(tmp_path):
    s = load(tmp_path, env={"OPENAI_API_KEY": "sk-abc", "OPENAI_BASE_URL": "http://x/v1"})
    assert s.api_key.get_secret_value() == "sk-abc" and s.base_url == "http://x/v1"
    assert s.sources["api_key"] == "env OPENAI_API_KEY"
    assert "sk-abc" not in str(s.redacted())


def test_api_key_in_repo_agentrc_is_refused(tmp_path):
    (tmp_path / ".agentrc").write_text('api_key = "sk-secret"\n')
    with pytest.raises(ConfigError, match="not allowed in a repository's .agentrc"):
        load(tmp_path)


@pytest.mark.parametrize(
    "text, expect",
    [
        ("model = = 1", "not valid TOML"),
        ("colour = 1", "unknown key 'colour'"),
        ("max_steps = 'many'", "key 'max_steps'"),
        ("approval = 'sometimes'", "key 'approval'"),
        ("budget_usd = true", "key 'budget_usd': expected a number, not true"),
        ("max_steps = false", "key 'max_steps': expected a number, not false"),
        ("model = true", "key 'model': expected text, not true"),
        ('[[hooks.pre_tool]]\ncommand = ["x"]\ntimeout_s = true', "hooks.pre_tool.0.timeout_s"),
        ('[mcp_servers.a]\ncommand = "x"\ntool_timeout_s = true', "mcp_servers.a.tool_timeout_s"),
    ],
)
def test_bad_repo_agentrc_names_file_and_key(tmp_path, text, expect):
    (tmp_path / ".agentrc").write_text(text)
    with pytest.raises(ConfigError) as e:
        load(tmp_path)
    line = e.value.one_line()
    assert str(tmp_path / ".agentrc") in line and expect in line and "\n" not in line


def test_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="env AGENT_COMMAND_TIMEOUT_S"):
        load(tmp_path, env={"AGENT_COMMAND_TIMEOUT_S": "soon"})


def test_an_endless_number_is_refused_where_it_was_set(tmp_path):
    # an infinite timeout overflowed the request's wait (an internal error), and an infinite
    # budget was saved with the run as null, so its resume went on with the default budget
    with pytest.raises(ConfigError, match="AGENT_REQUEST_TIMEOUT_S.*finite number"):
        load(tmp_path, env={"AGENT_REQUEST_TIMEOUT_S": "inf"})
    with pytest.raises(UsageError, match="--budget-usd: input should be a finite number"):
        load(tmp_path, flags={"budget_usd": float("inf")})
    (tmp_path / ".agentrc").write_text("command_timeout_s = inf\n")
    with pytest.raises(ConfigError, match="key 'command_timeout_s'.*finite number"):
        load(tmp_path)


def test_example_file_documents_every_key_with_its_default(tmp_path):
    import tomllib

    from agent_cli.cli.config.settings import ENV_ONLY, FIELDS, Settings

    example = Path(__file__).resolve().parent.parent / ".agentrc.example"
    text = example.read_text()
    defaults = Settings()
    for key in FIELDS:
        if key in ENV_ONLY:  # refused in every .agentrc: named with its variable instead
            assert f"AGENT_{key.upper()}=" in text, key
            assert f"{key} =" not in text, key
        else:
            assert f"{key} =" in text, key
    uncommented = "\n".join(
        line[2:]
        for line in text.splitlines()
        if line.startswith("# ") and " = " in line and "api_key" not in line
    )
    values = tomllib.loads(uncommented)
    for key, value in values.items():
        assert getattr(defaults, key) == value, key


@pytest.mark.parametrize(
    "text, hint",
    [
        ("modle = 'x'", "did you mean `model`?"),
        ("max_step = 3", "did you mean `max_steps`?"),
        ("base-url = 'http://x/v1'", "did you mean `base_url`?"),
        ('[mcp_servers.s]\ncommnd = "x"\n', "did you mean `command`?"),
        ("[hooks]\npre_tol = []\n", "did you mean `pre_tool`?"),
        ('[[hooks.pre_tool]]\ncomand = ["x"]\n', "did you mean `command`?"),
        ('[[hooks.run_end]]\ncommand = ["x"]\ntimeout = 3\n', "did you mean `timeout_s`?"),
        ("colour = 1", "`agent doctor` lists every key"),
    ],
)
def test_an_unknown_key_suggests_the_closest_one(tmp_path, text, hint):
    (tmp_path / ".agentrc").write_text(text)
    with pytest.raises(ConfigError) as e:
        load(tmp_path)
    line = e.value.one_line()
    assert hint in line and ".agentrc.example" not in line
    assert ("did you mean" in line) == (not text.startswith("colour"))


@pytest.mark.parametrize("where", ["user", "repo"])
@pytest.mark.parametrize("text, key", [("Model = 'x'", "model"), ("MAX_STEPS = 7", "max_steps")])
def test_a_key_in_another_case_is_an_unknown_key_in_either_file(tmp_path, where, text, key):
    """Keys are lower case: `Model` is refused with the right spelling, not taken from the
    user's file with its source shown as the default, nor dropped from a repository's file
    with a notice about safety."""
    rc = tmp_path / ("user-rc" if where == "user" else ".agentrc")
    rc.write_text(text)
    with pytest.raises(ConfigError) as e:
        load(tmp_path, user_rc=rc if where == "user" else None)
    line = e.value.one_line()
    assert f"unknown key '{text.split()[0]}'" in line and f"did you mean `{key}`?" in line


EXAMPLE = Path(__file__).resolve().parent.parent / ".agentrc.example"


def test_deny_commands_from_the_environment_are_comma_separated_as_documented(tmp_path):
    import re
    import shlex

    documented = re.search(r"AGENT_DENY_COMMANDS=('[^']*')", EXAMPLE.read_text()).group(1)
    s = load(tmp_path, env={"AGENT_DENY_COMMANDS": shlex.split(documented)[0]})
    assert s.deny_commands == ["^docker", "^kubectl delete"]
    assert "comma-separated" in EXAMPLE.read_text()


def test_the_example_says_where_the_api_key_may_go_without_contradiction(tmp_path):
    text = EXAMPLE.read_text()
    assert "environment only" not in text
    user = tmp_path / "user.toml"
    user.write_text('api_key = "sk-user-key"\n')
    assert load(tmp_path, user_rc=user).key() == "sk-user-key"  # allowed in ~/.agentrc
    assert "your own ~/.agentrc" in text and "refuses it" in text


@pytest.mark.parametrize("where", ["user", "repo"])
def test_memory_token_is_refused_in_any_agentrc(tmp_path, where):
    rc = tmp_path / ("user.toml" if where == "user" else ".agentrc")
    rc.write_text(
        'memory_url = "http://chroma.internal:8000"\nmemory_token = "tok-secret-123456"\n'
    )
    with pytest.raises(ConfigError) as e:
        load(tmp_path, user_rc=tmp_path / "user.toml")
    line = e.value.one_line()
    assert str(rc) in line and "memory_token" in line and "AGENT_MEMORY_TOKEN" in line
    assert "tok-secret-123456" not in line


def test_memory_server_settings_from_the_environment(tmp_path):
    token = "chroma-team-token-0123456789"
    s = load(
        tmp_path,
        env={
            "AGENT_MEMORY_URL": "http://chroma.internal:8000/",
            "AGENT_MEMORY_TENANT": "acme",
            "AGENT_MEMORY_DATABASE": "billing",
            "AGENT_MEMORY_TOKEN": token,
            "OPENAI_API_KEY": "sk-abc-0123456789",
        },
    )
    assert (s.memory_url, s.memory_tenant, s.memory_database) == (
        "http://chroma.internal:8000",
        "acme",
        "billing",
    )
    assert s.sources["memory_token"] == "env AGENT_MEMORY_TOKEN"
    assert token in s.secrets() and "sk-abc-0123456789" in s.secrets()
    shown = s.redacted()
    assert token not in str(shown) and shown["memory_token"] == "chr…6789"
    assert load(tmp_path, env={"AGENT_MEMORY_URL": ""}).memory_url is None  # back to embedded


@pytest.mark.parametrize(
    "key, value, expect",
    [
        ("memory_url", "chroma.internal:8000", "like http://chroma.internal:8000"),
        ("memory_url", "http://chroma.internal:80000", "port"),
        ("memory_url", "http://chroma.internal:8000/api/v2", "address only"),
        ("memory_database", "x", "3 to 512"),
        ("memory_tenant", "acme corp", "3 to 512"),
    ],
)
def test_bad_memory_server_settings_name_the_key(tmp_path, key, value, expect):
    (tmp_path / ".agentrc").write_text(f'{key} = "{value}"\n')
    with pytest.raises(ConfigError) as e:
        load(tmp_path)
    assert key in e.value.one_line() and expect in e.value.one_line()


@pytest.mark.parametrize("where", ["file", "env"])
def test_a_memory_url_with_credentials_is_refused_without_showing_them(tmp_path, where):
    url = "http://admin:PWSECRET77@chroma.internal:8000"
    if where == "file":
        (tmp_path / ".agentrc").write_text(f'memory_url = "{url}"\n')
    with pytest.raises(ConfigError) as e:
        load(tmp_path, env={"AGENT_MEMORY_URL": url} if where == "env" else None)
    line = e.value.one_line()
    assert "memory_url" in line and "AGENT_MEMORY_TOKEN" in line and "\n" not in line
    assert "PWSECRET77" not in line and "admin" not in line and "***@chroma.internal" in line


@pytest.mark.parametrize(
    "url, local",
    [
        ("http://localhost:8080/v1", True),
        ("http://127.0.0.1:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://gpu.localhost:8080/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://8.8.8.8/v1", False),
        ("https://llm.example.com/v1", False),
    ],
)
def test_default_prices_count_as_zero_only_on_a_server_on_the_local_network(tmp_path, url, local):
    prices = load(tmp_path, env={"OPENAI_BASE_URL": url}).prices()
    assert prices == (
        {"price_in": 0.0, "price_out": 0.0, "price_cached": 0.0}
        if local
        else {"price_in": 0.15, "price_out": 0.60, "price_cached": None}
    )


def test_a_price_whose_costs_would_not_be_numbers_is_refused_in_one_line(tmp_path):
    for key in ("AGENT_PRICE_INPUT_PER_MTOK", "AGENT_PRICE_CACHED_INPUT_PER_MTOK"):
        with pytest.raises(ConfigError) as e:
            load(tmp_path, env={key: "1e308"})
        assert "less than or equal to 1000000" in e.value.one_line()
    assert load(tmp_path, env={"AGENT_PRICE_OUTPUT_PER_MTOK": "1e6"}).price_output_per_mtok == 1e6


def test_the_prices_shown_are_the_ones_billed(tmp_path):
    values, sources = load(tmp_path, env={"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}).shown()
    assert values["price_input_per_mtok"] == values["price_output_per_mtok"] == 0.0
    assert values["price_cached_input_per_mtok"] == 0.0
    assert sources["price_input_per_mtok"] == "default; a local server bills nothing"
    values, sources = load(tmp_path, env={"OPENAI_BASE_URL": "https://api.openai.com/v1"}).shown()
    assert values["price_input_per_mtok"] == 0.15 and sources["price_input_per_mtok"] == "default"


def test_a_price_that_is_set_applies_on_the_local_network_too(tmp_path):
    s = load(
        tmp_path,
        env={"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "AGENT_PRICE_INPUT_PER_MTOK": "0.5"},
    )
    assert s.prices() == {"price_in": 0.5, "price_out": 0.60, "price_cached": None}


@pytest.mark.parametrize(
    "env, expect",
    [
        ({"OPENAI_BASE_URL": "localhost:8080/v1"}, "env OPENAI_BASE_URL: key 'base_url'"),
        ({"AGENT_EXECUTOR_BASE_URL": "not a url"}, "key 'executor_base_url'"),
        ({"AGENT_PLANNER_BASE_URL": "ftp://h/v1"}, "key 'planner_base_url'"),
        ({"AGENT_BASE_URL": "http://h:99999/v1"}, "port"),
        ({"AGENT_BASE_URL": "http://user:sk-1@h/v1"}, "not in the endpoint's address"),
    ],
)
def test_an_endpoint_that_is_no_http_address_is_refused_where_it_was_set(tmp_path, env, expect):
    with pytest.raises(ConfigError) as e:
        load(tmp_path, env=env)
    line = e.value.one_line()
    assert expect in line and "\n" not in line and "Value error" not in line
    assert "sk-1" not in line  # the refused value is quoted with its credentials masked


def test_an_empty_base_url_is_the_default_one(tmp_path):
    assert load(tmp_path, env={"AGENT_BASE_URL": " "}).base_url == "https://api.openai.com/v1"


def test_an_empty_base_url_never_hides_the_one_a_file_sets(tmp_path):
    """`--base-url "$LOCAL_URL"` with the variable unset, or `AGENT_BASE_URL=`, would send the
    repository's code to the default endpoint in place of the server the user's file names."""
    user = tmp_path / "user-agentrc"
    user.write_text('base_url = "http://127.0.0.1:8080/v1"\n')
    for env, flags, said in (
        ({"AGENT_BASE_URL": ""}, None, "env AGENT_BASE_URL is empty, so it is ignored"),
        ({}, {"base_url": " "}, "--base-url is empty, so it is ignored"),
    ):
        s = load(tmp_path, env=env, flags=flags, user_rc=user)
        assert s.base_url == "http://127.0.0.1:8080/v1" and s.sources["base_url"] == str(user)
        assert any(said in n and str(user) in n for n in s.notices), s.notices
    s = load(tmp_path, env={"AGENT_BASE_URL": "http://10.0.0.2:8000/v1"}, user_rc=user)
    assert s.base_url == "http://10.0.0.2:8000/v1" and not s.notices  # a value replaces it


@pytest.mark.parametrize("role", ["planner", "executor", "verifier"])
def test_an_empty_role_base_url_never_hides_the_one_a_file_sets(tmp_path, role):
    """`AGENT_EXECUTOR_BASE_URL=` would send that role's requests to the run's base_url in
    place of the server the user's file names for it."""
    user = tmp_path / "user-agentrc"
    user.write_text(f'{role}_base_url = "http://127.0.0.1:8081/v1"\n')
    name = f"AGENT_{role.upper()}_BASE_URL"
    for blank in ("", " \n"):
        s = load(tmp_path, env={name: blank}, user_rc=user)
        assert getattr(s, f"{role}_base_url") == "http://127.0.0.1:8081/v1"
        said = f"env {name} is empty, so it is ignored: the {role}_base_url of {user} is used"
        assert said in s.notices, s.notices


def test_an_agentrc_that_is_there_but_no_file_is_said_not_skipped(tmp_path):
    (tmp_path / ".agentrc").mkdir()
    with pytest.raises(ConfigError, match="agentrc: cannot be read"):
        load(tmp_path)
    (tmp_path / ".agentrc").rmdir()
    (tmp_path / ".agentrc").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="agentrc: cannot be read"):
        load(tmp_path)
    (tmp_path / ".agentrc").unlink()
    assert load(tmp_path).sources["model"] == "default"  # no file at all: nothing read


def test_a_deny_commands_pattern_that_is_no_regular_expression_is_refused_when_read(tmp_path):
    (tmp_path / ".agentrc").write_text('deny_commands = ["rm -rf", "curl ("]\n')
    with pytest.raises(ConfigError) as e:
        load(tmp_path)
    line = e.value.one_line()
    assert "key 'deny_commands'" in line and "'curl ('" in line and "not a valid regular" in line


def test_an_empty_model_name_is_the_default_model(tmp_path):
    assert load(tmp_path, env={"AGENT_MODEL": ""}).model == "gpt-4o-mini"
    assert load(tmp_path, flags={"model": "  "}).model == "gpt-4o-mini"
    assert load(tmp_path, env={"AGENT_MODEL": " qwen "}).model == "qwen"


def test_agent_rc_naming_no_file_is_said_and_dev_null_means_no_user_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".agentrc").write_text('model = "home-model"\n')
    assert load_settings(None, env={}).model == "home-model"
    missing = tmp_path / "agentrc-wrok"
    s = load_settings(None, env={"AGENT_RC": str(missing)})
    assert s.model == "gpt-4o-mini"  # neither the missing file nor ~/.agentrc
    assert [n for n in s.notices if f"AGENT_RC names {missing}, which does not exist" in n]
    quiet = load_settings(None, env={"AGENT_RC": os.devnull})
    assert quiet.model == "gpt-4o-mini" and quiet.notices == []
    named = tmp_path / "work.agentrc"
    named.write_text('model = "work-model"\n')
    assert load_settings(None, env={"AGENT_RC": str(named)}).notices == []


def test_agent_rc_starting_with_a_tilde_is_the_users_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "agentrc").write_text('model = "tilde-model"\n')
    s = load_settings(None, env={"AGENT_RC": "~/cfg/agentrc"})  # quoted: no shell expanded it
    assert s.model == "tilde-model" and s.notices == []
    missing = load_settings(None, env={"AGENT_RC": "~/cfg/nothing"})
    assert [n for n in missing.notices if f"({tmp_path}/cfg/nothing), which does not" in n]
    unknown = load_settings(None, env={"AGENT_RC": "~no-such-user-here/agentrc"})
    assert [n for n in unknown.notices if "~no-such-user-here/agentrc, which does not" in n]


@pytest.mark.parametrize(
    "value", ["4815162342108", "{ value = 'plainpassphrase4815' }", '["plainpassphrase4815"]']
)
def test_an_api_key_of_the_wrong_type_is_refused_without_showing_it(tmp_path, value):
    (tmp_path / "home.agentrc").write_text(f"api_key = {value}\n")
    with pytest.raises(ConfigError) as e:
        load_settings(tmp_path, env={}, user_rc=tmp_path / "home.agentrc")
    line = e.value.one_line()
    assert "home.agentrc" in line and "api_key" in line and "string" in line
    assert "4815" not in line


def test_an_empty_agent_api_key_that_hides_the_openai_one_is_said(tmp_path):
    env = {"OPENAI_API_KEY": "sk-fromopenaivariable1234", "AGENT_API_KEY": ""}
    settings = load_settings(tmp_path, env=env, user_rc=tmp_path / "none")
    assert settings.key() in (None, "")
    assert any(
        "AGENT_API_KEY is set but empty" in n and "env OPENAI_API_KEY" in n
        for n in settings.notices
    )
    assert not any("1234" in n for n in settings.notices)
    env.pop("AGENT_API_KEY")
    settings = load_settings(tmp_path, env=env, user_rc=tmp_path / "none")
    assert settings.key() == "sk-fromopenaivariable1234" and settings.notices == []


BLANKS = ["\n", "  ", " \r\n"]  # a secret file holding only a line end, `$(cat empty)`


@pytest.mark.parametrize("blank", BLANKS)
@pytest.mark.parametrize("below", ["env OPENAI_API_KEY", "file"])
def test_an_agent_api_key_of_only_spaces_or_a_line_end_is_empty_and_said(tmp_path, blank, below):
    """The notice an empty AGENT_API_KEY gets: without it, the error that follows asks for the
    key that is already set."""
    rc = tmp_path / "home.agentrc"
    rc.write_text('api_key = "sk-fromthefile0123456789"\n' if below == "file" else "")
    env = {"AGENT_API_KEY": blank}
    if below != "file":
        env["OPENAI_API_KEY"] = "sk-fromopenaivariable1234"
    settings = load_settings(tmp_path, env=env, user_rc=rc)
    assert settings.key() is None
    (said,) = settings.notices
    assert "AGENT_API_KEY is set but empty" in said
    assert (str(rc) if below == "file" else "env OPENAI_API_KEY") in said


def test_an_empty_agent_api_key_hides_no_key_where_the_file_holds_only_spaces(tmp_path):
    rc = tmp_path / "home.agentrc"
    rc.write_text('api_key = "  "\n')
    settings = load_settings(tmp_path, env={"AGENT_API_KEY": ""}, user_rc=rc)
    assert settings.key() is None and settings.notices == []


@pytest.mark.parametrize("blank", ["", *BLANKS])
def test_an_openai_variable_of_only_spaces_or_a_line_end_is_unset_as_an_empty_one(tmp_path, blank):
    """It never takes the place of the file's key or endpoint (an empty one never did)."""
    rc = tmp_path / "home.agentrc"
    rc.write_text('api_key = "sk-fromthefile0123456789"\nbase_url = "http://127.0.0.1:8080/v1"\n')
    env = {"OPENAI_API_KEY": blank, "OPENAI_BASE_URL": blank, "AGENT_MEMORY_TOKEN": blank}
    settings = load_settings(tmp_path, env=env, user_rc=rc)
    assert settings.key() == "sk-fromthefile0123456789" and settings.sources["api_key"] == str(rc)
    assert settings.base_url == "http://127.0.0.1:8080/v1"
    assert settings.sources["base_url"] == str(rc) and settings.notices == []
    assert settings.memory_token_value() is None


@pytest.mark.parametrize("where", ["file", "env"])
@pytest.mark.parametrize(
    "home, expect",
    [("agent-state", "expected an absolute path"), ("~nosuchuserzz9/x", "no user's home")],
)
def test_a_home_that_names_no_one_directory_is_refused_where_it_was_set(
    tmp_path, where, home, expect
):
    rc = tmp_path / "home.agentrc"
    rc.write_text(f'home = "{home}"\n' if where == "file" else "")
    env = {"AGENT_HOME": home} if where == "env" else {}
    with pytest.raises(ConfigError) as e:
        load_settings(tmp_path, env=env, user_rc=rc)
    line = e.value.one_line()
    assert "key 'home'" in line and expect in line
    assert ("home.agentrc" if where == "file" else "AGENT_HOME") in line


def test_a_home_from_the_home_directory_or_absolute_is_taken(tmp_path):
    for home in (str(tmp_path / "state"), "~/agent-state"):
        settings = load_settings(tmp_path, env={"AGENT_HOME": home}, user_rc=tmp_path / "none")
        assert settings.state_dir(tmp_path) == Path(home).expanduser()


def test_the_line_end_around_an_api_key_is_dropped(tmp_path):
    """A key copied from a file saved with CRLF: sent as it was, the request failed as if the
    server could not be reached."""
    env = {"OPENAI_API_KEY": "sk-crlfkey0123456789\r\n", "PK": " pk-planner0123456789\n"}
    (tmp_path / "home.agentrc").write_text('planner_api_key_env = "PK"\n')
    settings = load_settings(tmp_path, env=env, user_rc=tmp_path / "home.agentrc")
    assert settings.key() == "sk-crlfkey0123456789"
    assert settings.role_api_keys["planner"].get_secret_value() == "pk-planner0123456789"


def test_a_key_with_a_space_inside_is_kept_as_it_is(tmp_path):
    """A header carries a space: a local server started with `--api-key "team secret"`."""
    env = {"OPENAI_API_KEY": " team secret 42\n", "PK": "planner key"}
    (tmp_path / "home.agentrc").write_text('planner_api_key_env = "PK"\n')
    settings = load_settings(tmp_path, env=env, user_rc=tmp_path / "home.agentrc")
    assert settings.key() == "team secret 42"
    assert settings.role_api_keys["planner"].get_secret_value() == "planner key"


@pytest.mark.parametrize("where", ["OPENAI_API_KEY", "AGENT_MEMORY_TOKEN", "file", "PK"])
def test_a_key_with_a_break_inside_is_refused_without_showing_it(tmp_path, where):
    key = "sk-halfone0123\nhalftwo456789"
    rc = tmp_path / "home.agentrc"
    rc.write_text(
        f'api_key = "{key.encode("unicode_escape").decode()}"\n'
        if where == "file"
        else 'planner_api_key_env = "PK"\n'
    )
    env = {} if where == "file" else {where: key}
    with pytest.raises(ConfigError) as e:
        load_settings(tmp_path, env=env, user_rc=rc)
    line = e.value.one_line()
    assert "line break" in line and ("home.agentrc" if where == "file" else where) in line
    assert "half" not in line and "\n" not in line


@pytest.mark.parametrize(
    "user, expect",
    [('max_steps = "many"\n', "key 'max_steps'"), ('modle = "x"\n', "unknown key 'modle'")],
)
def test_a_bad_user_agentrc_is_named_also_when_the_repository_has_one(tmp_path, user, expect):
    """The repository's file is judged against yours: yours was validated only after that."""
    (tmp_path / "home.agentrc").write_text(user)
    (tmp_path / ".agentrc").write_text("max_steps = 10\n")
    with pytest.raises(ConfigError) as e:
        load_settings(tmp_path, env={}, user_rc=tmp_path / "home.agentrc")
    assert "home.agentrc" in e.value.one_line() and expect in e.value.one_line()


def test_a_request_timeout_too_long_for_the_clock_is_refused_where_it_was_set(tmp_path):
    """30 times 1e300 seconds is no deadline the clock holds: every model call stopped with
    an internal OverflowError."""
    env = {"AGENT_REQUEST_TIMEOUT_S": "1e300"}
    with pytest.raises(ConfigError) as e:
        load_settings(tmp_path, env=env, user_rc=tmp_path / "none")
    assert "AGENT_REQUEST_TIMEOUT_S" in e.value.one_line() and "86400" in e.value.one_line()
    env["AGENT_REQUEST_TIMEOUT_S"] = "86400"
    assert load_settings(tmp_path, env=env, user_rc=tmp_path / "none").request_timeout_s == 86400
