"""The scenario files: one TOML per project, each with its pinned sdist and its pairs."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from projects import Project

HERE = Path(__file__).resolve().parent
NEEDS = ("procedure", "note", "fact", "fix")


@dataclass(frozen=True)
class Edit:
    """One exact replacement in one file (the scripted edit_file call)."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Pair:
    """Run A learns something in the project; run B, later, needs it."""

    id: str
    project: str
    need: str  # procedure | note | fact | fix
    a_goal: str
    b_goal: str
    a_test: str = ""  # the test file run A writes (its acceptance check)
    note: str = ""  # the note run A takes
    fact: str = ""  # the fact run A extracts at its end
    fact_files: tuple[str, ...] = ()
    fix_cmd: str = ""  # fix pairs: the project's own failing test
    breaks: Edit | None = None  # fix pairs: the regression committed before A and before B
    a_summary: str = ""  # fix pairs: how A's second attempt fixed it
    later: tuple[str, str] | None = None  # (path, text appended by a later commit)

    @property
    def kind(self) -> str:
        """The kind of pair, as the ids name it (procedure, pitfall, fact, convention, ...)."""
        return self.id.split("-")[-2]


@dataclass(frozen=True)
class Scenario:
    """One project and its pairs."""

    project: Project
    test_dir: str
    test_cmd: str  # with {file}: the command that works in this repository
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    pairs: tuple[Pair, ...] = field(default=())

    def test_file(self, pair: Pair) -> str:
        name = "test_bench_" + pair.id.replace("-", "_") + ".py"
        return name if self.test_dir in ("", ".") else f"{self.test_dir}/{name}"

    def a_cmd(self, pair: Pair) -> str:
        """Run A's acceptance command."""
        return pair.fix_cmd or self.test_cmd.format(file=self.test_file(pair))


def load(path: Path) -> Scenario:
    """One scenario file, checked."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    proj = data["project"]
    pairs = []
    for p in data["pairs"]:
        if p["need"] not in NEEDS:
            raise ValueError(f"{path.name}: {p['id']}: need must be one of {NEEDS}")
        brk = p.get("break")
        later = p.get("later")
        pairs.append(
            Pair(
                id=p["id"],
                project=proj["name"],
                need=p["need"],
                a_goal=p["a_goal"],
                b_goal=p["b_goal"],
                a_test=p.get("a_test", ""),
                note=p.get("note", ""),
                fact=p.get("fact", ""),
                fact_files=tuple(p.get("fact_files", ())),
                fix_cmd=p.get("fix_cmd", ""),
                breaks=Edit(brk["path"], brk["old"], brk["new"]) if brk else None,
                a_summary=p.get("a_summary", ""),
                later=(later["path"], later["append"]) if later else None,
            )
        )
        if (p["need"] == "fix") != bool(brk):
            raise ValueError(f"{path.name}: {p['id']}: a fix pair, and only one, has a break")
    return Scenario(
        project=Project(proj["name"], proj["version"], proj["sha256"]),
        test_dir=proj["test_dir"],
        test_cmd=proj["test_cmd"],
        sources=tuple(proj["sources"]),
        tests=tuple(proj["tests"]),
        pairs=tuple(pairs),
    )


def load_all(folder: Path = HERE / "scenarios") -> list[Scenario]:
    """Every scenario file in `folder`, by name."""
    return [load(p) for p in sorted(folder.glob("*.toml"))]
