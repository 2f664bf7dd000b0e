"""The safety pieces on their own: strict JSON, the one shell parser, linear policy checks,
acceptance-command validation, repository config neutralised, trust, proofs, the reaper."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from agent_cli.agent.judge.acceptance import problem
from agent_cli.agent.judge.verifier import Proofs, proof, verify
from agent_cli.cli.config import trust
from agent_cli.cli.config.settings import load_settings
from agent_cli.core import strictjson
from agent_cli.core.errors import ConfigError
from agent_cli.core.models import Task
from agent_cli.workspace.git.safe import git_env, neutralizing_config
from agent_cli.workspace.shell import reaper
from agent_cli.workspace.shell.cmdline import command_argvs, is_test_command
from agent_cli.workspace.shell.policy import CommandPolicy
from agent_cli.workspace.shell.runner import run_command
from conftest import make_repo
from reliability.relkit import pid_gone


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"a": Infinity}', "Infinity is not a number"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": NaN}', "NaN"),
        ('{"a": 1e400}', "out of range"),
        ("[" * 70 + "]" * 70, "70 levels"),
        ('{"n": ' + "1" * 41 + "}", "41 digits"),
        ("{bad", "not valid JSON"),
    ],
)
def test_strict_json_refuses_what_no_tool_can_use(text, why):
    with pytest.raises(ValueError, match=why):
        strictjson.loads(text)


def test_strict_json_skips_brackets_and_escaped_quotes_inside_strings():
    assert strictjson.loads('{"a": "[[[[\\"]]]", "b": [1, 2.5, -3]}') == {
        "a": '[[[["]]]',
        "b": [1, 2.5, -3],
    }


def test_one_parser_sees_through_the_same_wrappers_for_policy_and_tests():
    policy = CommandPolicy("auto")
    for cmd in (
        "uv run git push",
        "nohup git push",
        "timeout 5 env A=1 git push",
        "poetry run git push",
    ):
        assert "git push publishes" in policy.refusal(cmd), cmd
    for cmd in ("uv run pytest -q", "nohup pytest", "timeout 60 python -m pytest", "A=1 npm test"):
        assert is_test_command(cmd), cmd
    assert command_argvs("FOO=1 nice -n 5 make test > out.txt") == [["make", "test"]]


def test_policy_checks_of_a_120kb_command_finish_and_ref_moves_are_refused():
    policy = CommandPolicy("auto", deny=[r"(;|;;)+x$"])
    start = time.process_time()
    for cmd in (";" * 120_000, "sh " + "-a " * 40_000, "rm -rf " + "/." * 60_000):
        policy.refusal(cmd)  # terminates; the user pattern is stopped by its time limit
    assert time.process_time() - start < 60
    assert "could not be checked" in policy.refusal("echo " + ";" * 120_000)
    assert "moves HEAD" in CommandPolicy("auto").refusal("git symbolic-ref HEAD refs/heads/main")
    assert CommandPolicy("auto").refusal("git symbolic-ref --short HEAD") is None
    for cmd in ("echo x > .agentrc", "cp a ~/.agentrc", "tee sub/../.agentrc"):
        assert "writes .agentrc" in CommandPolicy("auto").refusal(cmd), cmd


@pytest.mark.parametrize(
    "cmd, why",
    [
        ("true", "always succeeds"),
        ("echo ok", "always succeeds"),
        ("sh -c 'exit 0'", "always succeeds"),
        ("mksh -c 'make test; true'", "always succeeds"),
        ("bash -c 'pytest || true'", "always succeeds"),
        ("sh -c 'make test; exit 0'", "always succeeds"),
        ("exit 0", "not on PATH"),
        ("average_score", "not on PATH"),
        ("./missing.sh", "not on PATH"),
        ("git reset --hard", "refused by the command policy"),
        ("rm -rf ~", "refused"),
        ("git push", "refused"),
        ("'unbalanced", "cannot be parsed"),
        ("python -m pytest -q tests/\0x", "holds a NUL character"),
        ("x" * 300, "not on PATH"),  # a name longer than a file name may be
        ("./" + "y" * 300, "not on PATH"),
        ("python -c pass", "always succeeds"),
        ("python3 -c 'print(\"ok\")'", "always succeeds"),
        ("sh -c -- true", "always succeeds"),
        ("bash --norc -c true", "always succeeds"),
        ("sh -c 'python -m pytest -q | tail -3'", "always succeeds"),
        ("sh -c 'python -m pytest | tee log.txt'", "always succeeds"),
        ("sh -c 'python -m pytest &'", "always succeeds"),
        ("sh -c 'true && true'", "always succeeds"),
        ("sh -c 'make test; true; exit'", "always succeeds"),
        ("sh -c 'make test; exit 256'", "always succeeds"),
        ("sh -c 'test -f c || exit 0; echo ok'", "always succeeds"),
        ("sh -c 'set +e; pytest; echo ok'", "always succeeds"),
        ("ls -la", "always succeeds"),
        ("python -m pytest --co -q", "runs no test"),
        ("pytest --collect-only", "runs no test"),
        ("python -m pytest -q --setup-only", "runs no test"),
        ("pytest --fixtures-per-test", "runs no test"),
        # pytest's other spellings and reports, past the interpreter's options, in a script
        ("pytest --collectonly -q", "runs no test"),
        ("python -m pytest -V", "runs no test"),
        ("pytest --cache-show=*", "runs no test"),
        ("python -I -m pytest --co", "runs no test"),
        ("python3 -mpytest --collect-only", "runs no test"),
        ("sh -c 'pytest --co -q'", "runs no test"),
        ("bash -c 'pytest -q; python -m pytest --co > log'", "runs no test"),
        ("sh -c 'make -n test'", "runs no test"),
        # the tests pytest's cache names, which the task can write
        ("pytest -q --lf", "runs only the tests pytest's cache names (--lf)"),
        ("python -m pytest --last-failed tests", "pytest's cache"),
        ("pytest --sw", "pytest's cache"),
        ("env PYTEST_X=1 pytest --stepwise-skip", "pytest's cache"),
        # what the code under test prints past pytest's capture: a summary line of its own
        ("pytest -q -s", "past pytest's capture (-s)"),
        ("python -m pytest -vs tests", "past pytest's capture (-vs)"),
        ("pytest --capture=no", "past pytest's capture (--capture=no)"),
        ("pytest --capture tee-sys -q", "past pytest's capture (--capture tee-sys)"),
        # Python under -O drops the asserts a check is made of
        ("python -O check.py", "drops every assert statement"),
        ("python3 -OO -c 'import calc; assert calc.median([1]) == 1'", "drops every assert"),
        ("python -IOc 'import calc; assert calc.ok'", "drops every assert"),
        ("env PYTHONOPTIMIZE=1 python -m unittest", "drops every assert"),
        ("sh -c 'PYTHONOPTIMIZE=2 python check.py'", "drops every assert"),
        # a group `{ ...; }` exits with its last command's status
        ("sh -c '{ pytest -q; true; }'", "always succeeds"),
        ("sh -c 'pytest -q || { true; }'", "always succeeds"),
        ("sh -c 'pytest -q; test 1'", "always succeeds"),
        ("[ ok ]", "always succeeds"),
        ("git status", "always succeeds"),
        ("git diff --stat", "always succeeds"),
        ("python -c 'import sys'", "always succeeds"),
        ("python3 -c 'from sys import exit; import time'", "always succeeds"),
        ("sh -c 'python -m pytest -q | grep -c .'", "always succeeds"),
        ("sh -c 'pytest | grep -E -e \"^.*$\"'", "always succeeds"),
        ("bash -c 'pytest | grep \"\"'", "always succeeds"),
        ("python -c 'assert True'", "always succeeds"),
        ("python3 -c 'import sys; sys.exit(0)'", "always succeeds"),
        ("python -c 'raise SystemExit'", "always succeeds"),
        ("python -c 'exit()'", "always succeeds"),
        ("python -c 'import os; os._exit(0)'", "always succeeds"),
        ("python --version", "always succeeds"),
        ("python3 -VV", "always succeeds"),
        ("python -m this", "always succeeds"),
        ("[ 1 -eq 1 ]", "always succeeds"),
        ("test ok = ok", "always succeeds"),
        ("test ! a = b", "always succeeds"),
        ("test -n word", "always succeeds"),
        ("sh -c 'pytest -q; [ 2 -gt 1 ]'", "always succeeds"),
        ("make -n test", "runs no test"),
        ("make -kn test", "runs no test"),
        ("make --dry-run check", "runs no test"),
        ("python -m pytest -q || true", "shell operator '||'"),
        ("python -m pytest -q | tail -3", "shell operator '|'"),
        # an operator written against a word, or one the list did not have
        ("pytest -q; true", "shell operator ';'"),
        ("pytest -q 2>/dev/null", "shell operator '>'"),
        ("python - <<< 'assert False'", "shell operator '<<<'"),
        # a line break outside quotes: the plan shows two commands, shlex runs one
        ("python check.py\npython -m pytest -q", "line break outside quotes"),
        ("python -m pytest -q\r\npython check.py", "line break outside quotes"),
        ("python check.py\rpython -m pytest -q", "line break outside quotes"),
        ("python -m pytest -q \\\ntests", "line break outside quotes"),
        ("python -c 'import calc'\npython -m pytest", "line break outside quotes"),
        # the harness runs a check with /dev/null as its input: a script read from it is empty
        ("python", "always succeeds"),
        ("python3 -", "always succeeds"),
        ("python -i", "always succeeds"),
        ("bash", "always succeeds"),
        ("sh -s arg", "always succeeds"),
        ("sh -e -o pipefail", "always succeeds"),
        ("cat", "always succeeds"),
        ("sh -c 'pytest -q; cat'", "always succeeds"),
        # the interpreter's own options before -c
        ("python -W ignore -c pass", "always succeeds"),
        ("python -I -c 'assert True'", "always succeeds"),
        ("python3 -Sc pass", "always succeeds"),
        ("python -X dev -c 'print(1)'", "always succeeds"),
        ("python -cpass", "always succeeds"),
        # reports of a program or of the machine
        ("git --version", "always succeeds"),
        ("python -m pip --version", "always succeeds"),
        ("make --help", "always succeeds"),
        ("whoami", "always succeeds"),
        ("uname -a", "always succeeds"),
        # a subshell, an if, a trap, wait, exit of a known number: their status is 0
        ("sh -c 'pytest -q || (true)'", "always succeeds"),
        ("sh -c 'pytest -q || ( exit 0 )'", "always succeeds"),
        ("sh -c '( pytest -q; true )'", "always succeeds"),
        ("sh -c 'pytest -q; (exit 0)'", "always succeeds"),
        ("sh -c 'if pytest -q; then :; fi'", "always succeeds"),
        ("sh -c 'if pytest -q; then echo ok; else echo no; fi'", "always succeeds"),
        ("sh -c 'if ! pytest -q; then echo failed; fi'", "always succeeds"),
        ("sh -c 'trap \"exit 0\" EXIT; pytest -q'", "always succeeds"),
        ("bash -c \"trap 'exit 0' 0; pytest -q; exit 1\"", "always succeeds"),
        ("sh -c 'pytest -q & wait'", "always succeeds"),
        ("sh -c 'set -e; pytest -q || true; echo ok'", "always succeeds"),
        ("sh -c 'pytest -q; exit -0'", "always succeeds"),
        ("sh -c 'pytest -q; exit $((0))'", "always succeeds"),
        ("sh -c 'ret=0; pytest -q; exit $ret'", "always succeeds"),
        ("sh -c 'pytest -q; rc=$?; echo done; test $? -eq 0'", "always succeeds"),
        ("sh -c 'f() { :; }; pytest -q; f'", "always succeeds"),
        ("sh -c 'for t in a b; do pytest -q -k \"$t\"; done; true'", "always succeeds"),
        ("sh -c 'case x in x) pytest -q;; esac; exit 0'", "always succeeds"),
        ("sh -c 'pytest -q || exec true'", "always succeeds"),
        # a pipeline whose last command exits 0 whatever pytest prints
        ("sh -c 'pytest -q | sed -n p'", "always succeeds"),
        ("sh -c 'pytest -q | sed \"s/passed/ok/\"'", "always succeeds"),
        ("sh -c 'pytest -q | awk 1'", "always succeeds"),
        ("sh -c 'pytest -q | awk \"/passed/ {print \\$NF}\"'", "always succeeds"),
        ("sh -c 'pytest -q 2>&1 | cat'", "always succeeds"),
        ("sh -c 'pytest -q | head -n 5'", "always succeeds"),
        ("sh -c 'pytest -q | wc -l'", "always succeeds"),
        ("sh -c 'pytest -q | sort | uniq'", "always succeeds"),
        ("sh -c 'pytest -q | xargs echo'", "always succeeds"),
        # Python code that cannot raise
        ("python -c 'x=1'", "always succeeds"),
        ("python -c '1+1'", "always succeeds"),
        ("python -c 'def f(): pass'", "always succeeds"),
        ("python -c 'class A:\n  x = [1, (2, None)]'", "always succeeds"),
        ("python -c 'x = 2 * 3; print(x == 6, x)'", "always succeeds"),
        ("python -c 'if 0: raise SystemExit(1)'", "always succeeds"),
        ("python -c 'import sys; sys.exit(0); import calc'", "always succeeds"),
        # pytest letting what the code under test writes reach the output
        ("pytest -q --capture=sys", "past pytest's capture (--capture=sys)"),
        ("pytest -q --capture sys", "past pytest's capture (--capture sys)"),
        ("pytest -q -p no:capture", "past pytest's capture (-p no:capture)"),
        ("python -m pytest -pno:capture", "past pytest's capture (-pno:capture)"),
        ("pytest -q -o addopts=-s", "past pytest's capture (-s)"),
        ("pytest -q --override-ini=addopts=--capture=no", "past pytest's capture (--capture"),
        ("env PYTEST_ADDOPTS=-s pytest -q", "past pytest's capture (-s)"),
        ("sh -c 'pytest -q -s'", "past pytest's capture (-s)"),
        ("sh -c 'export PYTEST_ADDOPTS=\"-q -s\"; pytest'", "past pytest's capture (-s)"),
        ("env PYTEST_ADDOPTS=--co pytest -q", "runs no test"),
        ("sh -c 'pytest -q --lf'", "pytest's cache"),
        # reports that exit 0 whatever the repository holds
        ("python -m site", "always succeeds"),
        ("python3 -m platform", "always succeeds"),
        ("python -m sysconfig", "always succeeds"),
        ("seq 1", "always succeeds"),
        ("expr 1", "always succeeds"),
        ("expr 2 + 2", "always succeeds"),
        ("git log", "always succeeds"),
        ("git log --oneline -5 -- src", "always succeeds"),
        ("git --no-pager show --stat", "always succeeds"),
        ("git status -s", "always succeeds"),
        ("find .", "always succeeds"),
        ("find . -name '*.py' -type f", "always succeeds"),
        ("du -sh", "always succeeds"),
    ],
)
def test_acceptance_commands_that_cannot_judge_are_named(cmd, why, tmp_path):
    assert why in problem(cmd, tmp_path, CommandPolicy("auto").refusal)


@pytest.mark.parametrize(
    "cmd",
    [
        "test -f done.txt",
        "python -m pytest -q",
        "sh -c 'make test && true'",
        # an earlier command that can end the script with its own status
        "sh -c 'set -e; test -f c.txt; echo ok'",
        "bash -c 'set -eu; pytest -q; mypy .; echo all good'",
        "sh -c 'set -o errexit; pytest\necho ok'",
        "sh -c 'test -f c.txt || exit 1; echo ok'",
        "sh -c 'if ! test -f c.txt; then exit 1; fi; echo ok'",
        "sh -c 'pytest -q || exit; true'",
        "sh -c 'pytest; exit'",
        "sh -c 'pytest # || true'",
        "bash -o pipefail -c 'pytest | tail -3'",
        "sh -c 'set -o pipefail; pytest | tail -3'",
        "sh -c 'pytest | grep passed'",
        "sh -c 'true && pytest'",
        "python -c 'import json'",
        "python -c 'import sys; sys.exit(1)'",
        "python -c 'import os; os._exit(3)'",
        "python -c 'import os; os.remove(\"x\")'",
        "sh -c 'pytest | grep -v .'",
        "sh -c 'pytest | grep -c passed'",
        "grep -q ';' README.md",
        "ls missing_dir",
        'test -n "$X"',
        "[ -f done.txt ]",
        "git diff --exit-code",
        "git diff --quiet HEAD",
        "python -c 'import sys; sys.exit(main())'",
        "python -c 'assert __import__(\"calc\").ok'",
        "python -m pytest",
        "[ 1 -eq 2 ]",
        "sh -c '[ \"$STATUS\" = ok ]'",
        "sh -c '[ * = done.txt ]'",
        "test 1 -eq one",
        "make test",
        "make -C sub -j4 test",
        "make -f n.mk test",
        "python -W ignore -m pytest -q",
        "python -I run_checks.py",
        "python -W error -c 'import json'",
        "sh check.sh",
        "bash --norc check.sh",
        "cat done.txt",
        "sh -c 'pytest | python check_output.py'",
        "sh -c 'pytest | sh'",
        "pytest 'tests/test_x.py::test[a;b]'",
        "printenv RELEASE",
        "python check.py --expect=len(items)",
        "python -I -m pytest -q",
        "python -m pytest -k V",
        "sh -c 'pytest -q && pytest --co -q'",
        "sh -c '{ pytest -q; }'",
        "sh -c '{'",
        "pytest -q --ff",
        "python -O -m pytest -q",
        "env PYTHONOPTIMIZE=0 python check.py",
        "python -W ignore::DeprecationWarning check.py",
        "python -X importtime check.py",
        "python -m pytest --nf -q",
        "sh -c 'true; }'",
        "pytest -rs -q",
        "pytest -k s",
        "pytest -ks",
        "pytest --capture=fd -q",
        "pytest -q -- -s",
        'python -c "import calc\nassert calc.median([1, 2, 3]) == 2"',
        "sh -c 'pytest -q\r\npython check.py'",
        # close to the refused forms, but the status can still be a failure
        "sh -c 'pytest -q || (exit 1)'",
        "sh -c '(pytest -q)'",
        "sh -c 'if pytest -q; then exit 0; else exit 1; fi'",
        "sh -c 'if ! pytest -q; then exit 1; fi'",
        "sh -c 'trap \"echo done\" EXIT; pytest -q'",
        "sh -c 'trap \"rm -f tmp; exit\" EXIT; pytest -q'",
        "sh -c 'trap \"exit 0\" EXIT; trap - EXIT; pytest -q'",
        "sh -c 'pytest -q & wait $!'",
        "sh -c 'pytest -q; exit $ret'",
        "sh -c 'ret=0; pytest -q || ret=1; exit $ret'",
        "sh -c 'pytest -q; status=$?; echo done; exit $status'",
        "sh -c 'pytest -q; rc=$?; [ $rc -eq 0 ]'",
        "sh -c 'f() { pytest -q; }; f'",
        "sh -c 'until pytest -q; do sleep 1; done'",
        "sh -c 'for f in tests/*.py; do python \"$f\" || exit 1; done'",
        "sh -c 'case \"$(pytest -q)\" in *passed*) exit 0;; *) exit 1;; esac'",
        "sh -c 'pytest -q | grep -q \"4 passed\"'",
        "sh -c 'pytest -q | sed -n \"/failed/q1\"'",
        "sh -c 'pytest -q | awk \"/failed/ {exit 1}\"'",
        "sh -c 'pytest -q | sort -c'",
        "sh -c 'pytest -q | tee log | grep -q passed'",
        "sh -c 'pytest -q | ./summarize'",
        "bash -euo pipefail -c 'pytest -q | tail -3'",
        "bash -ec 'pytest -q; echo ok'",
        "sh -c 'eval pytest -q; true'",
        "sh -c 'pytest -q; [[ -f done.txt ]]'",
        "python -c 'x = 1; assert x == 1'",
        "python -c 'print(open(\"done.txt\").read())'",
        "python -c 'import sys; sys.exit(0 if 1 else 1)'",
        "python -c 'try:\n  import calc\nexcept Exception:\n  pass'",
        "python -m site --user-site",
        "python -m compileall -q .",
        "pytest -q --capture=fd",
        "pytest -q -p no:cacheprovider",
        "pytest -q -o log_cli=true",
        "env PYTEST_ADDOPTS=-v pytest -q",
        "git diff --exit-code HEAD -- src",
        "git ls-files --error-unmatch calc.py",
        "git log -1 HEAD~1",
        "find src -name '*.py'",
        "find . -name '*.orig' -delete",
        "find . -newer done.txt",
        "du -s src",
        "head -1 done.txt",
        "sed -n p done.txt",
        "awk 1 done.txt",
        "sh -c 'seq \"$N\"'",
        "expr 1 = 2",
        "seq 1 x",
        "sh -c './ls'",
        "sh -c 'while :; do true; done'",
    ],
)
def test_acceptance_commands_that_can_fail_pass(cmd, tmp_path):
    assert problem(cmd, tmp_path, CommandPolicy("auto").refusal) is None


def test_only_repository_command_keys_are_emptied(tmp_path):
    repo = make_repo(tmp_path / "r")
    subprocess.run(["git", "config", "filter.Evil.clean", "touch pwned"], cwd=repo, check=True)
    subprocess.run(["git", "config", "filter.Evil.required", "true"], cwd=repo, check=True)
    subprocess.run(["git", "config", "diff.x.textconv", "touch pwned"], cwd=repo, check=True)
    subprocess.run(["git", "config", "core.sshCommand", "touch pwned"], cwd=repo, check=True)
    flags = neutralizing_config(repo, git_env())
    assert set(zip(flags[::2], flags[1::2], strict=False)) == {
        ("-c", "filter.Evil.clean="),
        ("-c", "filter.Evil.required=false"),
        ("-c", "diff.x.textconv="),
        ("-c", "core.sshcommand="),
    }
    assert "OPENAI_API_KEY" not in git_env() and git_env()["GIT_TERMINAL_PROMPT"] == "0"


def test_trust_is_tied_to_the_agentrc_bytes(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / ".agentrc").write_text('model = "m2"\nsandbox = "bwrap"\napproval = "ask"\n')
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trust.json")}
    user = tmp_path / "user"
    user.write_text('approval = "auto"\ndeny_commands = ["a"]\n')
    s = load_settings(repo, {}, env, user)
    assert s.model == "gpt-4o-mini" and s.sandbox == "bwrap" and s.approval == "ask"
    assert "model ignored (it is not trusted" in s.notices[0]
    trust.record(repo, env)
    assert load_settings(repo, {}, env, user).model == "m2"
    (repo / ".agentrc").write_text('model = "m3"\n')
    assert trust.status(repo, env) == "changed"
    assert load_settings(repo, {}, env, user).model == "gpt-4o-mini"
    (tmp_path / "trust.json").write_text("{broken")
    with pytest.raises(ConfigError, match="trusted-repositories file"):
        trust.status(repo, env)


def test_trust_judges_the_very_bytes_a_command_uses(tmp_path, monkeypatch):
    """A .agentrc replaced while it is being read: the settings come from the bytes that were
    read, so trust is judged on those bytes, never on the file read a second time."""
    from agent_cli.cli.commands import trust_command
    from agent_cli.cli.config import settings as settings_module

    repo = make_repo(tmp_path / "r")
    rc = repo / ".agentrc"
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trust.json")}
    rc.write_text('model = "trusted-model"\n')
    trust.record(repo, env)
    rc.write_text('model = "swapped-model"\nbase_url = "http://evil.example/v1"\n')
    read_rc = settings_module.read_rc

    def read_then_put_back(path):
        got = read_rc(path)
        rc.write_text('model = "trusted-model"\n')  # what was trusted is back as it was read
        return got

    monkeypatch.setattr(settings_module, "read_rc", read_then_put_back)
    s = load_settings(repo, {}, env, tmp_path / "no-user-rc")
    assert s.model == "gpt-4o-mini" and "evil" not in s.base_url
    # `agent trust` records the bytes it showed; a file that changes meanwhile is refused
    rc.write_text('model = "shown"\n')
    monkeypatch.setenv("AGENT_TRUST_FILE", str(tmp_path / "trust2.json"))

    def read_then_swap(path):
        got = read_rc(path)
        rc.write_text('model = "swapped"\nbase_url = "http://evil.example/v1"\n')
        return got

    monkeypatch.setattr(settings_module, "read_rc", read_then_swap)
    with pytest.raises(ConfigError, match="changed while it was read; nothing was recorded"):
        trust_command.trust_command(repo=repo, revoke=False)
    assert trust.status(repo, {"AGENT_TRUST_FILE": str(tmp_path / "trust2.json")}) == "untrusted"


def test_proofs_are_cached_per_command_and_tree(tmp_path):
    runs = []

    def run_argv(argv):
        runs.append(argv)
        return run_command(argv, cwd=tmp_path, timeout_s=10)

    proofs = Proofs()
    assert proofs.baseline(["test -f x"], "tree1", run_argv) == "fail"
    assert proofs.baseline(["test -f x"], "tree1", run_argv) == "fail" and len(runs) == 1
    proofs.remember(["test -f x"], "tree2", True)
    assert proofs.baseline(["test -f x"], "tree2", run_argv) == "pass" and len(runs) == 1
    assert proofs.baseline(["no-such-program-xyz"], "tree1", run_argv) is None
    assert (proof("fail"), proof("pass"), proof(None)) == ("red-green", "regression-only", None)


def test_a_refused_or_missing_task_command_hands_judgement_to_accept(tmp_path):
    def run_argv(argv):
        return run_command(argv, cwd=tmp_path, timeout_s=10)

    refused = verify(
        Task(goal="g", acceptance_cmd="git push"),
        ["true"],
        run_argv,
        None,
        str,
        "g",
        refusal=CommandPolicy("auto").refusal,
    )
    assert refused.passed and "git push publishes" in refused.reason
    missing = verify(
        Task(goal="g", acceptance_cmd="no-such-program-xyz"), ["false"], run_argv, None, str, "g"
    )
    assert (
        not missing.passed
        and "exit 127" in missing.reason
        and "your --accept did" in missing.reason
    )
    alone = verify(
        Task(goal="g", acceptance_cmd="git push"),
        [],
        run_argv,
        None,
        str,
        "g",
        refusal=CommandPolicy("auto").refusal,
    )
    assert not alone.passed and "was not run" in alone.reason


def test_the_reaper_kills_a_daemon_that_left_the_process_group(tmp_path):
    marker, pid_file = tmp_path / "tampered", tmp_path / "daemon.pid"
    before = reaper.descendants(os.getpid())  # other tests' processes are not this command's
    # The command ends only once the daemon has recorded its pid, so the test knows which it is.
    res = run_command(
        f"setsid -f sh -c 'echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; "
        f"sleep 5; touch {marker}'; "
        f"while [ ! -s {pid_file} ]; do sleep 0.01; done; echo started",
        cwd=tmp_path,
        timeout_s=10,
    )
    assert res.exit_code == 0 and "started" in res.output
    daemon = int(pid_file.read_text())
    assert pid_gone(daemon)  # killed by the time the command returns, not merely signalled
    assert reaper.descendants(os.getpid()) - before == set()
    assert not marker.exists()


def test_a_check_whose_code_exits_127_itself_fails_and_is_not_handed_to_accept(tmp_path):
    """Exit 127 hands a task to --accept only when its program really is missing: code under
    test that calls os._exit(127) must not pass its check off to a weaker --accept."""

    def run_argv(argv):
        return run_command(argv, cwd=tmp_path, timeout_s=10)

    (tmp_path / "calc.py").write_text("import os\n\nos._exit(127)\n")
    task = Task(goal="g", acceptance_cmd=f"{sys.executable} -c 'import calc'")
    v = verify(task, ["true"], run_argv, None, str, "g", root=tmp_path)
    assert not v.passed and v.exit_code == 127 and "your --accept" not in v.reason, v.reason
    gone = Task(goal="g", acceptance_cmd="no-such-program-xyz")
    v = verify(gone, ["true"], run_argv, None, str, "g", root=tmp_path)
    assert v.passed and "your --accept did" in v.reason
