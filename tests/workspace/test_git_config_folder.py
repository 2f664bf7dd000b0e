"""The harness's git config files live in one folder per user: a run killed by SIGKILL (whose
exit handlers never run) leaves nothing new in the temporary directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from workspace.test_git import make_repo

WRITES_CONFIG = (
    "import os, sys; from pathlib import Path; "
    "from agent_cli.workspace.git.safe import safe_env; "
    "env = safe_env(Path(sys.argv[1])); print(env['GIT_CONFIG_GLOBAL'], flush=True); "
    "int(sys.argv[2]) and os.kill(os.getpid(), int(sys.argv[2]))"
)


def _run(repo: Path, tmp: Path, home: Path, sig: int = 0) -> subprocess.CompletedProcess:
    """A process that writes the harness's git config, then is killed by `sig` (0: exits)."""
    env = {**os.environ, "TMPDIR": str(tmp), "HOME": str(home)}
    env.pop("GIT_CONFIG_GLOBAL", None)
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run(
        [sys.executable, "-c", WRITES_CONFIG, str(repo), str(int(sig))],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ada\n\temail = ada@example.com\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return make_repo(tmp_path / "repo"), tmp, home


def test_runs_killed_by_sigkill_leave_only_the_one_folder_of_this_user(tmp_path):
    repo, tmp, home = _setup(tmp_path)
    first = _run(repo, tmp, home, signal.SIGKILL)
    second = _run(repo, tmp, home, signal.SIGKILL)
    assert first.returncode == second.returncode == -signal.SIGKILL
    folder = tmp / f"agent-git-{os.getuid()}"
    assert [p.name for p in tmp.iterdir()] == [folder.name]
    assert first.stdout == second.stdout  # the same file, named by its content
    config = Path(first.stdout.strip())
    assert config.parent == folder and "Ada" in config.read_text()
    assert folder.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in folder.iterdir()] == [config.name]  # no half-written file left


def test_a_folder_of_that_name_that_others_may_enter_is_not_used(tmp_path):
    repo, tmp, home = _setup(tmp_path)
    planted = tmp / f"agent-git-{os.getuid()}"
    planted.mkdir(mode=0o755)
    planted.chmod(0o755)
    ran = _run(repo, tmp, home)
    config = Path(ran.stdout.strip())
    assert config.parent != planted and config.parent.parent == tmp
    assert list(planted.iterdir()) == []
    assert not config.parent.exists()  # a run's own folder goes at its exit


def test_a_link_of_that_name_is_not_followed(tmp_path):
    repo, tmp, home = _setup(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp / f"agent-git-{os.getuid()}").symlink_to(elsewhere)
    config = Path(_run(repo, tmp, home).stdout.strip())
    assert config.parent.parent == tmp and not config.parent.is_symlink()
    assert list(elsewhere.iterdir()) == []


TAKEN_AWAY = (
    "import shutil, sys; from pathlib import Path; "
    "from agent_cli.workspace.git.safe import safe_env; "
    "first = Path(safe_env(Path(sys.argv[1]))['GIT_CONFIG_GLOBAL']); "
    "shutil.rmtree(first.parent); "
    "again = Path(safe_env(Path(sys.argv[1]))['GIT_CONFIG_GLOBAL']); "
    "print(first == again, 'Ada' in again.read_text())"
)


def test_a_folder_taken_away_while_a_run_goes_on_is_made_again(tmp_path):
    repo, tmp, home = _setup(tmp_path)
    env = {**os.environ, "TMPDIR": str(tmp), "HOME": str(home)}
    env.pop("GIT_CONFIG_GLOBAL", None)
    ran = subprocess.run(
        [sys.executable, "-c", TAKEN_AWAY, str(repo)], env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["True", "True"]
