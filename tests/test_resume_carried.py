"""What a resume carries from its start: the saved values, except those the user sets
differently now (a flag, the environment, their ~/.agentrc, a trusted repository .agentrc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cli.agent.run.store import RunStartedWith
from agent_cli.cli.config import trust
from agent_cli.cli.config.carried import Carried, Changed, carried, from_flags
from agent_cli.cli.config.settings import Settings, load_settings
from agent_cli.core.errors import ConfigError
from conftest import make_repo

OLD, NEW = "http://127.0.0.1:8081/v1", "http://127.0.0.1:8082/v1"
SAVED = RunStartedWith(
    base_url=OLD, model="m", max_steps=50, executor_base_url=OLD, executor_model="exec"
)


def now(repo: Path, flags=None, env=None, user_rc: str = "") -> Settings:
    """The settings a resume reads before the saved values are put in."""
    home = repo.parent
    (home / "user.agentrc").write_text(user_rc)
    env = {"AGENT_TRUST_FILE": str(home / "trusted.json"), **(env or {})}
    return load_settings(repo, flags, env=env, user_rc=home / "user.agentrc")


def test_nothing_set_now_carries_every_saved_value(tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert carried(SAVED, now(repo), repo) == Carried(SAVED.flags())


def test_a_role_setting_from_the_environment_or_the_users_file_replaces_the_saved_one(tmp_path):
    repo = make_repo(tmp_path / "repo")
    env = {"AGENT_EXECUTOR_BASE_URL": NEW, "AGENT_EXECUTOR_MODEL": "exec"}  # the model as saved
    taken = carried(SAVED, now(repo, env=env), repo)
    assert taken.changed == [Changed("executor_base_url", OLD, NEW, "env AGENT_EXECUTOR_BASE_URL")]
    assert "executor_base_url" not in taken.flags and "executor_model" not in taken.flags
    assert taken.flags == {"base_url": OLD, "model": "m", "max_steps": 50}
    assert taken.changed[0].notice() == (
        f"executor_base_url: {NEW} from AGENT_EXECUTOR_BASE_URL, in place of the {OLD} "
        "the run was started with"
    )
    taken = carried(SAVED, now(repo, user_rc='executor_model = "exec-fixed"\n'), repo)
    (change,) = taken.changed
    assert (change.key, change.saved, change.now) == ("executor_model", "exec", "exec-fixed")
    assert change.source == str(tmp_path / "user.agentrc")
    assert change.notice().endswith(
        f"from {change.source}, in place of the exec the run was started with"
    )


def test_a_flag_and_a_limit_replace_theirs_said_as_such(tmp_path):
    repo = make_repo(tmp_path / "repo")
    taken = carried(SAVED, now(repo, flags={"max_steps": 9}, env={"AGENT_MODEL": "m"}), repo)
    assert [c.notice() for c in taken.changed] == [
        "max_steps: 9 from a flag, in place of the 50 the run was started with"
    ]
    assert taken.flags["model"] == "m"  # the same value set now: nothing to say


def test_a_value_left_at_its_default_never_replaces_a_saved_one(tmp_path):
    repo = make_repo(tmp_path / "repo")
    taken = carried(SAVED, now(repo, user_rc="request_timeout_s = 10\n"), repo)
    assert taken == Carried(SAVED.flags())


def test_a_repository_file_replaces_a_saved_value_only_while_it_is_trusted(tmp_path):
    repo = make_repo(tmp_path / "repo")
    saved = RunStartedWith(base_url=OLD, max_steps=50, budget_usd=1.0, from_repo=[], from_flags=[])
    (repo / ".agentrc").write_text(f'base_url = "{NEW}"\nbudget_usd = 3.0\n')
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json")}
    # untrusted: its endpoint is not read, and a limit of its own does not replace the run's
    assert carried(saved, now(repo), repo, env) == Carried(saved.flags())
    trust.record(repo, env)
    taken = carried(saved, now(repo), repo, env)
    assert [(c.key, c.now) for c in taken.changed] == [("base_url", NEW), ("budget_usd", 3.0)]
    assert taken.flags == {"max_steps": 50}


def test_a_role_unset_now_goes_back_to_the_shared_value_and_an_address_is_shown_masked(tmp_path):
    repo = make_repo(tmp_path / "repo")
    saved = RunStartedWith(base_url=OLD, executor_base_url=f"{OLD}?api_key=sk-secret-0123456789")
    taken = carried(saved, now(repo, env={"AGENT_EXECUTOR_BASE_URL": ""}), repo)
    (change,) = taken.changed
    assert change.now is None and "none (the shared value)" in change.notice()
    assert "sk-secret-0123456789" not in change.notice() and "api_key=***" in change.notice()


def test_a_value_the_run_was_given_as_a_flag_gives_way_only_to_a_flag(tmp_path):
    repo = make_repo(tmp_path / "repo")
    rc = 'model = "from-rc"\nmax_steps = 7\nexecutor_model = "exec-rc"\n'
    saved = RunStartedWith(model="m", max_steps=50, executor_model="exec", from_flags=["model"])
    taken = carried(saved, now(repo, user_rc=rc), repo)
    assert taken.flags == {"model": "m"}  # --model at the start beats the file, as it did then
    assert [(c.key, c.now) for c in taken.changed] == [
        ("max_steps", 7),
        ("executor_model", "exec-rc"),
    ]
    taken = carried(saved, now(repo, flags={"model": "flagged"}, user_rc=rc), repo)
    assert [c.key for c in taken.changed] == ["model", "max_steps", "executor_model"]
    # a run saved before flags were recorded: any value agent run has a flag for stays
    old = RunStartedWith(model="m", max_steps=50, executor_model="exec")
    taken = carried(old, now(repo, user_rc=rc), repo)
    assert taken.flags == {"model": "m", "max_steps": 50}
    assert [c.key for c in taken.changed] == ["executor_model"]


def test_the_flags_of_a_run_are_those_given_now_and_those_carried_that_were_flags():
    saved = RunStartedWith(model="m", max_steps=50, budget_usd=1.0, from_flags=["model"])
    kept = {"model": "m", "max_steps": 50}
    given = {"budget_usd": 2.0, "base_url": None, "approval": "auto"}
    assert from_flags(given, saved, kept) == ["budget_usd", "model"]


HOSTED = "https://exec.example/v1"  # another provider's endpoint, not a local server
KEYED = RunStartedWith(
    base_url=OLD,
    executor_base_url=HOSTED,
    executor_api_key_env="EXEC_KEY",
    api_key_env="OPENAI_API_KEY",
)


def resumed(saved: RunStartedWith, repo: Path, **env: str) -> Carried:
    """`carried` in a shell whose environment is `env`."""
    env = {"AGENT_TRUST_FILE": str(repo.parent / "trusted.json"), **env}
    return carried(saved, now(repo, env=env), repo, env)


def test_a_role_at_its_saved_endpoint_takes_its_key_from_the_saved_variable(tmp_path):
    repo = make_repo(tmp_path / "repo")
    taken = resumed(KEYED, repo, OPENAI_API_KEY="sk-main-0123456789", EXEC_KEY="exec-key")
    assert taken.flags["executor_api_key_env"] == "EXEC_KEY" and not taken.unpaired
    for env, how in (({}, "not set"), ({"EXEC_KEY": " \n"}, "set but empty")):
        with pytest.raises(ConfigError) as refused:
            resumed(KEYED, repo, OPENAI_API_KEY="sk-main-0123456789", **env)
        assert refused.value.one_line() == (
            f"the executor endpoint {HOSTED} of this run takes its key from EXEC_KEY, as when "
            f"the run started, and EXEC_KEY is {how} (export EXEC_KEY=... and resume again, or "
            "set executor_api_key_env to the variable that holds its key now)"
        )
    # the user names the role's key variable now: theirs, said as any other value set now
    taken = resumed(KEYED, repo, AGENT_EXECUTOR_API_KEY_ENV="ROTATED", ROTATED="exec-key-2")
    assert [c.notice() for c in taken.changed] == [
        "executor_api_key_env: ROTATED from AGENT_EXECUTOR_API_KEY_ENV, in place of the "
        "EXEC_KEY the run was started with"
    ]
    assert "executor_api_key_env" not in taken.flags


def test_a_roles_saved_key_variable_stays_with_its_endpoint(tmp_path):
    repo = make_repo(tmp_path / "repo")
    taken = resumed(KEYED, repo, AGENT_EXECUTOR_BASE_URL=NEW)  # a server of the user's own
    assert "executor_api_key_env" not in taken.flags
    assert taken.unpaired == [
        f"executor_api_key_env EXEC_KEY saved with the run is not used: the executor is sent "
        f"to {NEW} now, not the {HOSTED} it was started with (its key is the one a new run "
        "sends there; set executor_api_key_env to choose another)"
    ]


def test_a_run_that_did_not_record_its_key_variables_sends_no_role_endpoint_the_api_key(
    tmp_path,
):
    repo = make_repo(tmp_path / "repo")
    old = RunStartedWith(base_url=OLD, executor_base_url=HOSTED, executor_model="exec")
    main = {"OPENAI_API_KEY": "sk-main-0123456789"}
    with pytest.raises(ConfigError) as refused:
        resumed(old, repo, **main)
    assert refused.value.one_line() == (
        f"this run was saved by an earlier version, which did not record the key the executor "
        f"endpoint {HOSTED} was sent: it is not sent the API key unasked (set "
        "executor_api_key_env to the variable that holds its key and resume again "
        "(AGENT_EXECUTOR_API_KEY_ENV=OPENAI_API_KEY for the API key))"
    )
    named = resumed(old, repo, **main, AGENT_EXECUTOR_API_KEY_ENV="OPENAI_API_KEY")
    assert named.flags["executor_base_url"] == HOSTED  # the user named its key: it goes on
    # the user names the endpoint now: sent what a new run would send it
    assert (
        "executor_base_url" not in resumed(old, repo, **main, AGENT_EXECUTOR_BASE_URL=HOSTED).flags
    )
    # a local server is sent no key, and a role at base_url is sent base_url's
    assert resumed(SAVED, repo, **main).flags == SAVED.flags()
    shared = RunStartedWith(base_url=HOSTED, executor_base_url=HOSTED)
    assert resumed(shared, repo, **main).flags == shared.flags()


def test_a_role_sent_the_api_key_is_refused_it_when_it_now_comes_from_elsewhere(tmp_path):
    repo = make_repo(tmp_path / "repo")
    # the API key came from the user's file: the role was sent no variable's key
    saved = RunStartedWith(base_url=OLD, executor_base_url=HOSTED, api_key_env="")
    assert resumed(saved, repo).flags["executor_base_url"] == HOSTED
    with pytest.raises(
        ConfigError,
        match="from no environment variable when the run started, "
        "and the API key now comes from OPENAI_API_KEY",
    ):
        resumed(saved, repo, OPENAI_API_KEY="sk-main-0123456789")


def test_a_roles_key_variable_from_a_file_not_trusted_now_leaves_its_endpoint_no_key(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / ".agentrc").write_text('executor_api_key_env = "EXEC_KEY"\n')
    saved = KEYED.model_copy(update={"from_repo": ["executor_api_key_env"], "from_flags": []})
    with pytest.raises(
        ConfigError,
        match=f"the executor endpoint {HOSTED} of this run was "
        "started with its key from EXEC_KEY, which is not used now",
    ):
        resumed(saved, repo, OPENAI_API_KEY="sk-main-0123456789", EXEC_KEY="exec-key")
