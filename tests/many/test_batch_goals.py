"""A batch file's goals: TOML [[goals]] tables or JSON lines, each checked with a one-line error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent_cli.cli.batch.goals import Goal, read_goals
from agent_cli.core.errors import UsageError


def test_toml_goals_with_their_options(tmp_path):
    file = tmp_path / "goals.toml"
    file.write_text(
        '[[goals]]\ngoal = "Add median"\naccept = ["pytest -q", "ruff check ."]\n'
        "max_steps = 40\nbudget_usd = 0.5\n\n"
        '[[goals]]\ngoal = "Fix the typo"\n'
    )
    assert read_goals(file) == [
        Goal(goal="Add median", accept=("pytest -q", "ruff check ."), max_steps=40, budget_usd=0.5),
        Goal(goal="Fix the typo"),
    ]


def test_json_lines_skip_blank_lines_and_take_one_command_as_a_list(tmp_path):
    file = tmp_path / "goals.jsonl"
    file.write_text('{"goal": "a", "accept": "pytest -q"}\n\n{"goal": "b", "max_steps": 3}\n')
    assert read_goals(file) == [
        Goal(goal="a", accept=("pytest -q",)),
        Goal(goal="b", max_steps=3),
    ]


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_json_lines_end_at_lf_alone_not_at_the_line_breaks_a_json_string_may_hold(tmp_path, end):
    """U+2028 and U+2029 (raw, as `JSON.stringify` and Python's `ensure_ascii=False` write
    them), NEL and the separators `str.splitlines` also ends a line at are a goal's own text;
    a later line's number counts LF-ended lines alone."""
    goals = ["Fix the parser\u2028it chokes on U+2028", "One\u2029two\x85three"]
    lines = [json.dumps({"goal": g}, ensure_ascii=False) for g in goals]
    file = tmp_path / "goals.jsonl"
    file.write_bytes(end.join([*lines, '{"goal": 3}', ""]).encode("utf-8"))
    with pytest.raises(UsageError, match="line 3: goal: Input should be a valid string"):
        read_goals(file)
    file.write_bytes(end.join([*lines, ""]).encode("utf-8"))
    assert read_goals(file) == [Goal(goal=g) for g in goals]
    toml = tmp_path / "goals.toml"  # TOML's own parser: its strings hold them too
    toml.write_text(
        "".join(f"[[goals]]\ngoal = {json.dumps(g, ensure_ascii=False)}\n" for g in goals)
    )
    assert read_goals(toml) == [Goal(goal=g) for g in goals]


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("g.toml", '[[goals]]\naccept = ["x"]\n', "goal 1: goal: Field required"),
        ("g.toml", '[[goals]]\ngoal = " "\n', "goal 1: goal: the goal is empty"),
        ("g.jsonl", '{"goal": "\\u200b\\ufeff\\u3164"}\n', "line 1: goal: the goal is empty"),
        ("g.toml", '[[goals]]\ngoal = "a"\nsteps = 3\n', "goal 1: steps: Extra inputs"),
        ("g.toml", '[[goals]]\ngoal = "a"\nbudget_usd = -1\n', "goal 1: budget_usd"),
        ("g.toml", '[[goals]]\ngoal = "a"\nbudget_usd = true\n', "goal 1: budget_usd"),
        (
            "g.toml",
            '[[goals]]\ngoal = "a"\nbudget_usd = inf\n',
            "budget_usd: Input should be a fin",
        ),
        ("g.jsonl", '{"goal": "a", "max_steps": true}\n', "line 1: max_steps"),
        ("g.toml", '[goal]\ngoal = "a"\n', "unknown table or key 'goal'"),
        ("g.toml", "[[goals]\n", "is not TOML"),
        ("g.toml", "", "holds no goal"),
        ("g.jsonl", '{"goal": "a"}\n{"goal": \n', "line 2: not valid JSON"),
        ("g.jsonl", '["a"]\n', "line 1 is not a table"),
        ("g.jsonl", '{"goal": "a", "accept": [""]}\n', "an acceptance command is empty"),
        ("g.jsonl", '{"goal": "nul \\u0000 goal"}\n', "the goal holds a NUL character"),
        ("g.toml", '[[goals]]\ngoal = "nul \\u0000"\n', "the goal holds a NUL character"),
        ("g.jsonl", '{"goal": "x \\udcff"}\n', "a string holds a lone surrogate"),
        ("g.jsonl", '{"goal": "a", "accept": ["x\\u0000"]}\n', "an acceptance command holds a NUL"),
        ("g.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", "line 1: the JSON nests"),
        ("g.toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n", "its values nest too deeply"),
        ("g.jsonl", '{"goal": "' + "x" * 200_000 + '"}\n', "the goal is 200,000 bytes long"),
        ("g.toml", f'[[goals]]\ngoal = "a"\naccept = ["{"y" * 40_000}"]\n', "40,000 bytes long"),
        (  # each under the bound, together too long for one command line
            "g.jsonl",
            '{"goal": "a"}\n' + json.dumps({"goal": "b", "accept": ["z" * 30_000] * 5}) + "\n",
            "line 2: accept: the goal and its acceptance commands are 150,001 bytes together",
        ),
    ],
)
def test_a_wrong_goal_is_named_in_one_line(tmp_path, name, text, says):
    file = tmp_path / name
    file.write_text(text)
    with pytest.raises(UsageError) as err:
        read_goals(file)
    assert says in err.value.one_line() and "\n" not in err.value.one_line()


def test_a_missing_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read the batch file"):
        read_goals(tmp_path / "none.toml")


def test_a_file_that_never_ends_is_refused_after_the_bound(tmp_path):
    with pytest.raises(UsageError, match=r"/dev/zero: it holds more than 16,777,216 bytes"):
        read_goals(Path("/dev/zero"))  # read whole, it would take every byte of memory


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (
            "test -f b.txt || true",
            "line 2: accept: `test -f b.txt || true` holds the shell operator",
        ),
        ("echo done", "line 2: accept: `echo done` always succeeds, so it proves nothing"),
        (  # the interpreter by its path: found whatever PATH holds
            f"{sys.executable} -m pytest --collect-only",
            f"line 2: accept: `{sys.executable} -m pytest --collect-only` runs no test",
        ),
    ],
)
def test_an_acceptance_command_that_accept_would_refuse_is_named_in_one_line(
    tmp_path, command, says
):
    """As `--accept` checks a run's commands before it starts, as far as no repository state
    decides it: the file is refused before any run starts, which each would refuse."""
    file = tmp_path / "g.jsonl"
    lines = [{"goal": "a", "accept": ["test -f a.txt"]}, {"goal": "b", "accept": [command]}]
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(UsageError) as err:
        read_goals(file, tmp_path)
    assert err.value.one_line().startswith(f"{file}: {says}"), err.value.one_line()
    assert "--accept" not in err.value.one_line() and "\n" not in err.value.one_line()
    assert len(read_goals(file)) == 2  # without a repository, nothing is asked of them


def test_an_acceptance_command_whose_program_is_not_here_is_left_to_its_run(tmp_path):
    """The program may be in the run's worktree (its branch), not in this checkout."""
    file = tmp_path / "g.toml"
    file.write_text('[[goals]]\ngoal = "a"\naccept = ["./check.sh --all", "no-such-program -q"]\n')
    assert read_goals(file, tmp_path) == [
        Goal(goal="a", accept=("./check.sh --all", "no-such-program -q"))
    ]
