"""The real projects the scenarios run in: PyPI sdists pinned by version and sha256, unpacked
into git repositories; the download and the unpacked tree are cached."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


@dataclass(frozen=True)
class Project:
    """One pinned sdist: what pip downloads and the hash it must have."""

    name: str  # the PyPI name
    version: str
    sha256: str


class HashMismatch(RuntimeError):
    """A downloaded sdist is not the file the scenarios were written against."""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sdist(project: Project, cache: Path) -> Path:
    """The project's verified sdist in `cache`, downloaded with pip when it is not there."""
    where = cache / "sdists" / f"{project.name}-{project.version}"
    found = sorted(where.glob("*.tar.gz")) if where.is_dir() else []
    if not found:
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "-q", "--no-deps"),
                *("--no-binary", ":all:", "-d", str(where)),
                f"{project.name}=={project.version}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found = sorted(where.glob("*.tar.gz"))
    got = sha256_of(found[0])
    if got != project.sha256:
        found[0].unlink()
        raise HashMismatch(f"{found[0].name}: sha256 {got}, the scenarios pin {project.sha256}")
    return found[0]


def unpacked(project: Project, cache: Path) -> Path:
    """The sdist's tree (its one top folder), unpacked once into `cache`."""
    archive = sdist(project, cache)
    dest = cache / "trees" / f"{project.name}-{project.version}"
    if not (dest / ".complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        (top,) = list(tmp.iterdir())
        top.rename(dest)
        shutil.rmtree(tmp)
        for junk in dest.rglob("__pycache__"):
            shutil.rmtree(junk)
        (dest / ".complete").write_text(project.sha256)
    return dest


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with the bench's fixed identity and dates; its stdout."""
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    ).stdout


def repository(project: Project, cache: Path, dest: Path) -> Path:
    """A fresh git repository at `dest` holding the sdist as its first commit on `main`."""
    shutil.copytree(unpacked(project, cache), dest, ignore=shutil.ignore_patterns(".complete"))
    git(dest, "init", "-q", "-b", "main")
    git(dest, "config", "user.email", GIT_ENV["GIT_AUTHOR_EMAIL"])
    git(dest, "config", "user.name", GIT_ENV["GIT_AUTHOR_NAME"])
    (dest / ".gitignore").write_text("__pycache__/\n*.pyc\n.pytest_cache/\n")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"{project.name} {project.version} from its sdist")
    return dest


def commit_files(repo: Path, files: dict[str, str], message: str) -> None:
    """Write `files` (path -> content; a content of "" deletes) and commit them."""
    for rel, content in files.items():
        path = repo / rel
        if content == "" and path.exists():
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
