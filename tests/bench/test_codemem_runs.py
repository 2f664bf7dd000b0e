"""How the coding-memory benchmark runs: what its cache of runs A depends on and keeps, its
scratch folder, and a project whose runs A fail (a miss of every system, not a crash)."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "codemem"))

import learn
import run
import scenarios


def _scenario() -> scenarios.Scenario:
    return scenarios.load_all()[0]


def test_the_cache_key_of_runs_a_covers_the_benchmarks_code_and_the_checks_pytest(
    tmp_path, monkeypatch
):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "learn.py").write_text("steps = ['plan', 'note']\n")
    monkeypatch.setattr(learn, "BENCH_SOURCE", bench)
    monkeypatch.setattr(learn, "AGENT_SOURCE", tmp_path / "agent_cli")  # none: quicker
    monkeypatch.setattr(learn, "checker_version", lambda: "3.11.2 pytest 8.3.4")
    first = learn.source_key(_scenario())
    assert learn.source_key(_scenario()) == first
    (bench / "learn.py").write_text("steps = ['plan']\n")  # runs A take no note any more
    second = learn.source_key(_scenario())
    assert second != first
    monkeypatch.setattr(learn, "checker_version", lambda: "3.11.2 pytest 9.0.0")
    assert learn.source_key(_scenario()) not in (first, second)


def test_runs_a_that_failed_are_not_cached_and_run_again(tmp_path, monkeypatch):
    calls: list[int] = []

    def learned(scn, cache, work, failed):
        calls.append(1)
        (work / scn.project.name).mkdir(parents=True, exist_ok=True)
        return learn.Learned(scn, work / scn.project.name, [], {}, failed)

    monkeypatch.setattr(learn, "source_key", lambda scn: "key")
    scn, cache = _scenario(), tmp_path / "cache"
    monkeypatch.setattr(
        learn, "learn", lambda s, c, w: learned(s, c, w, ["p-1: exit 3, escalated"])
    )
    assert learn.learn_cached(scn, cache, tmp_path / "w1").failed
    assert not (cache / "learned").exists() or not any((cache / "learned").rglob("done.json"))
    assert learn.learn_cached(scn, cache, tmp_path / "w2").failed and len(calls) == 2
    monkeypatch.setattr(learn, "learn", lambda s, c, w: learned(s, c, w, []))
    assert not learn.learn_cached(scn, cache, tmp_path / "w3").failed
    assert not learn.learn_cached(scn, cache, tmp_path / "w4").failed
    assert len(calls) == 3  # the runs A that all ended verified came from the cache


def test_without_work_the_scratch_folder_is_removed_when_the_run_is_interrupted(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made: list[Path] = []

    def interrupted(args, chosen, work):
        made.append(work)
        (work / "inflection").mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "measure", interrupted)
    assert run.main(["--quick", "--projects", "inflection"]) == 130
    assert made and not made[0].exists()
    assert capsys.readouterr().err.strip() == "bench/codemem/run.py: interrupted"
    kept = tmp_path / "kept"
    assert run.main(["--quick", "--projects", "inflection", "--work", str(kept)]) == 130
    assert (kept / "inflection").is_dir()  # --work DIR is the user's: kept


def _tiny_project(cache: Path, folder: Path) -> None:
    """A pinned sdist of a tiny project in `cache`, and a scenario file in `folder` whose
    one pair's run A fails: a fix pair whose check fails whatever the run does."""
    files = {
        "tiny/__init__.py": 'def shout(word):\n    """Upper case."""\n    return word.upper()\n',
        "tests/test_tiny.py": "from tiny import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A'\n",
        "tests/test_broken.py": "def test_broken():\n    assert 1 == 2\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"tiny-1.0/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    (cache / "sdists" / "tiny-1.0").mkdir(parents=True)
    (cache / "sdists" / "tiny-1.0" / "tiny-1.0.tar.gz").write_bytes(buf.getvalue())
    folder.mkdir()
    (folder / "tiny.toml").write_text(
        f"""[project]
name = "tiny"
version = "1.0"
sha256 = "{hashlib.sha256(buf.getvalue()).hexdigest()}"
test_dir = "tests"
test_cmd = "python -m pytest -q -p no:cacheprovider {{file}}"
sources = ["tiny/__init__.py"]
tests = ["tests/test_tiny.py"]

[[pairs]]
id = "tiny-fix-1"
need = "fix"
a_goal = "shout tests fail, make them pass"
fix_cmd = "python -m pytest -q -p no:cacheprovider tests/test_broken.py"
break = {{ path = "tiny/__init__.py", old = "return word.upper()", new = "return word.lower()" }}
a_summary = "shout lowered the case"
b_goal = "shout prints lower case again"
"""
    )


@pytest.mark.slow
def test_a_project_whose_runs_a_all_fail_is_reported_and_its_pairs_are_misses(
    tmp_path, monkeypatch, capsys
):
    """No item learned at all (the distractors and the poison from fixed shapes), a fix pair's
    regression taken off main again, nothing cached, and the scratch folder removed."""
    cache, folder = tmp_path / "cache", tmp_path / "scenarios"
    _tiny_project(cache, folder)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    saved = dict(os.environ)  # the benchmark isolates its runs in its own environment
    try:
        code = run.main(["--scenarios", str(folder), "--cache", str(cache), "--sizes", "10"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert "\nrun A failed: tiny-fix-1: exit 3, escalated (" in out
    assert "tiny: the runs A learned nothing of kind" not in out  # a fix pair needs no item
    assert "| agent | 0% |" in out and "| trivial | 0% |" in out
    assert not list(tmp_path.glob("codemem-*"))
    assert not list(cache.glob("learned/*/done.json"))
