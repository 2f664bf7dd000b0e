"""What a resume carries from its start: the saved values, except those the user sets
differently now (a flag, the environment, their ~/.agentrc, a trusted repository .agentrc)."""

from __future__ import annotations

from pathlib import Path

from agent_cli.agent.run.store import RunStartedWith
from agent_cli.cli.config import trust
from agent_cli.cli.config.carried import Carried, Changed, carried, from_flags
from agent_cli.cli.config.settings import Settings, load_settings
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
