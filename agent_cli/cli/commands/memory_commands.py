"""`agent recall` and `agent memory ...`: long-term and working memory from the command line.

Only typer and the standard library are imported here; chromadb, wordllama and rich (through
`console` and `render`) load inside the commands. Errors are raised as AgentError; `cli.main` prints them as one line.
No command creates the state directory, except `memory import`, whose purpose is to fill it.
With `memory_url` set, long-term memory is that Chroma server's instead of `<state>/chroma`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, BinaryIO

import typer

from agent_cli.cli.help import Command

memory_app = typer.Typer(
    help="Look at and maintain what the agent remembers.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

REPO = typer.Option(
    None, "--repo", metavar="DIR", help="Repository (default: the current directory)."
)
JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
NO_MEMORY = "no memory yet at {state} (`agent run` creates it)"
KINDS = ("all", "episode", "fact", "note", "procedure")
NO_COUNTS = {"episodes": 0, "facts": 0, "notes": 0, "procedures": 0, "archive": 0}


def _place(repo: Path | None) -> tuple[Path, Any, Path]:
    """The repository, its settings and its state directory (excluded from git if it exists)."""
    from agent_cli.cli.shared import (
        find_repo,
        prepare_state_dir,
        refuse_tracked_state,
        settings_for,
    )

    top = find_repo(repo)
    settings = settings_for(top)
    state = settings.state_dir(top)
    if not settings.memory_url:  # a store the repository brought along is not yours
        refuse_tracked_state(top, state)
    if state.exists():  # opening a store in it writes (journals), and none of that goes to git
        prepare_state_dir(top, state, create=False)
    return top, settings, state


def _open(settings: Any, state: Path, create: bool = False, reads_only: bool = False) -> Any:
    """Long-term memory: the configured server, or the store under `state` (None when that
    does not exist and `create` is False); opened `reads_only`, it waits for no write lock."""
    from agent_cli.cli.shared import make_embedder, memory_place

    place = memory_place(settings, state)
    if isinstance(place, Path) and not create and not (place / "chroma.sqlite3").exists():
        from agent_cli.memory.longterm.place import probe_dir

        probe_dir(place, 0.0)  # a file there is not "no memory yet": it is refused as it is
        return None
    from agent_cli.memory.longterm.chroma import LongTermMemory
    from agent_cli.memory.longterm.place import NoMemoryYet

    try:  # a server's memory, opened to read only, is not created on it
        return LongTermMemory(
            place, make_embedder(settings), secrets=settings.secrets(), reads_only=reads_only
        )
    except NoMemoryYet:
        return None


def _where(settings: Any, state: Path) -> str:
    """Where long-term memory is: the server (with its tenant and database), or the directory."""
    from agent_cli.cli.shared import memory_place

    return str(memory_place(settings, state))


def _open_to_read(settings: Any, state: Path) -> Any:
    """For a search: the embedded store's recall snapshot when it has one (memory/snapshot.py:
    the same answers, and no chromadb to import), else `_open`."""
    from agent_cli.cli.shared import make_embedder, memory_place

    place = memory_place(settings, state)
    if isinstance(place, Path):
        from agent_cli.memory.longterm import snapshot
        from agent_cli.memory.longterm.place import check_database

        check_database(place)  # the snapshot of a damaged store does not stand in for it
        cols = snapshot.load(place)
        if cols is not None:
            from agent_cli.memory.longterm.lazy import SnapshotMemory

            return SnapshotMemory(cols, place, make_embedder(settings), settings.secrets())
    return _open(settings, state, reads_only=True)


def _memory_or_exit(repo: Path | None) -> Any:
    """Open long-term memory, or say there is none yet and exit 0."""
    _, settings, state = _place(repo)
    mem = _open(settings, state)
    if mem is None:
        typer.echo(NO_MEMORY.format(state=_where(settings, state)), err=True)
        raise typer.Exit(0)
    return mem


def _memory_or_none(repo: Path | None, reads_only: bool = False) -> tuple[Any, str]:
    """Long-term memory (None when there is none yet) and where it is, or would be (`_where`)."""
    _, settings, state = _place(repo)
    return _open(settings, state, reads_only=reads_only), _where(settings, state)


def _skip_final_sweep() -> None:
    """Spare a read-only, short-lived command the interpreter's last pass over chromadb's objects."""
    import gc

    gc.freeze()  # about 0.3 s of CPU at exit with a large store; the process ends right after


def recall_command(
    query: str = typer.Argument(
        ..., metavar="QUERY", help="What to look for, in words.", show_default=False
    ),
    k: int = typer.Option(5, "--k", "-k", metavar="N", help="How many results at most (1 to 100)."),
    kind: str = typer.Option(
        "all", "--kind", metavar="KIND", help="episode, fact, note, procedure or all."
    ),
    min_trust: float = typer.Option(
        0.5,
        "--min-trust",
        metavar="X",
        help="Leave out facts and notes trusted less than X (0 to 1).",
    ),
    as_json: bool = JSON,
    repo: Path | None = REPO,
    all_repos: bool = typer.Option(
        False, "--all-repos", help="Search every repository's memory, not only this one's."
    ),
) -> None:
    """Search long-term memory (episodes, facts, notes, procedures) by meaning."""
    from agent_cli.core.errors import UsageError
    from agent_cli.core.text import blank, shorten, unusable

    if unusable(query):
        raise UsageError(f"the query {unusable(query)}", "give it as plain UTF-8 text")
    if blank(query):  # nothing to search by (a zero-width space shows nothing either)
        raise UsageError("the query is empty", 'say what to look for: agent recall "WORDS"')
    if kind not in KINDS:
        raise UsageError(f"unknown --kind {kind!r}", f"use one of {', '.join(KINDS)}")
    if not 1 <= k <= 100:
        raise UsageError(f"--k {k} is out of range", "pass a number from 1 to 100")
    if not 0.0 <= min_trust <= 1.0:
        raise UsageError(f"--min-trust {min_trust} is out of range", "pass a number from 0 to 1")
    top, settings, state = _place(repo)
    mem = _open_to_read(settings, state)
    if mem is None:
        typer.echo(NO_MEMORY.format(state=_where(settings, state)), err=True)
        if as_json:
            typer.echo("[]")
        return
    from agent_cli.agent.learn.topic import repo_topics
    from agent_cli.cli.shared import own_memory, run_secrets
    from agent_cli.memory.longterm.curation import repo_label, topic_where
    from agent_cli.memory.longterm.records import Result, mark_stale
    from agent_cli.memory.longterm.store import matches
    from agent_cli.ui.shown import shown_values
    from agent_cli.workspace.git.blobs import blob_hash

    here = repo_topics(top, own_memory(settings))
    with mem:
        found = mem.recall(
            query, k=k, kind=kind, min_trust=min_trust, topics=None if all_repos else here
        )
    ours = [matches(r.metadata, topic_where(here)) for r in found]
    # a file it names changed in its own repository: this one's files say nothing of another
    # repository's item, whose `stale` stays false
    mark_stale([r for r, own in zip(found, ours, strict=True) if own], lambda p: blob_hash(top, p))
    secrets = run_secrets(settings, top)  # stored text, in the table or the JSON, as it shows
    results = [Result(**shown_values(r.to_dict(), secrets)) for r in found]
    repos = [repo_label(r.metadata) for r in results]
    if as_json:
        typer.echo(_recall_json(results, repos, ours))
    elif not results:
        typer.echo(f"nothing in memory matches {shorten(query, 200)!r}")
    else:
        from agent_cli.ui.console import print_out
        from agent_cli.ui.render import recall_table

        named = [THIS_REPO if own else r or "none" for r, own in zip(repos, ours, strict=True)]
        print_out(recall_table(results, named if all_repos else None))
    _skip_final_sweep()


SCORE_DIGITS = 4  # a recall's scores in its JSON: the snapshot's and Chroma's agree to these
THIS_REPO = "this repository"  # in the table, the repository of an item of the one recalling


def _recall_json(results: list[Any], repos: list[str], ours: list[bool]) -> str:
    """`agent recall --json`: the same bytes for the same store and query, whether the
    snapshot or Chroma answered (scores rounded to SCORE_DIGITS, metadata keys sorted, as
    `memory export` writes them); each item with the repository it is filed under (`repo`,
    `curation.repo_label`) and whether that is this repository (`this_repo`)."""
    rows = []
    for r, repo, own in zip(results, repos, ours, strict=True):
        row = r.to_dict()
        row["score"] = round(float(row["score"]), SCORE_DIGITS)
        row["metadata"] = dict(sorted(row["metadata"].items()))
        rows.append({**row, "repo": repo, "this_repo": own})
    return json.dumps(rows, indent=2, ensure_ascii=False)


@memory_app.command(
    "show", cls=Command, short_help="The latest run's working memory and long-term counts."
)
def show_command(
    kind: str | None = typer.Option(
        None, "--kind", metavar="KIND", help="Only working-memory items of this kind."
    ),
    as_json: bool = JSON,
    repo: Path | None = REPO,
) -> None:
    """The latest run's working memory (hot items with their score terms, the cold list) and counts."""
    from agent_cli.cli.shared import run_secrets
    from agent_cli.memory.working.scoring import KIND_WEIGHTS
    from agent_cli.ui.shown import shown_values

    if kind is not None and kind not in KIND_WEIGHTS:
        from agent_cli.core.errors import UsageError

        raise UsageError(f"unknown --kind {kind!r}", f"use one of {', '.join(KIND_WEIGHTS)}")
    top, settings, state = _place(repo)
    shown = state.exists() or bool(settings.memory_url)  # a server holds memory without a state dir
    if not shown:
        typer.echo(NO_MEMORY.format(state=state), err=True)
        report: dict[str, Any] = {
            "run_id": None,
            "hot": [],
            "cold": [],
            "stats": {},
            "later_steps": {},
            "counts": dict(NO_COUNTS),
        }
    else:
        report = _working_report(settings, state, kind, top)
        report["counts"] = dict(NO_COUNTS)
        mem = _open(settings, state, reads_only=True)
        if mem is None:
            typer.echo(NO_MEMORY.format(state=_where(settings, state)), err=True)
        else:
            from agent_cli.agent.learn.topic import repo_topics
            from agent_cli.cli.shared import own_memory

            own = own_memory(settings)  # a shared store counts this repository's items only
            with mem:
                report["counts"] = mem.counts(None if own else repo_topics(top, own))
    report = shown_values(report, run_secrets(settings, top))  # stored text, as it shows
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    elif shown:
        from agent_cli.ui.console import command_console, print_out
        from agent_cli.ui.render import working_memory_view

        print_out(*working_memory_view(report, command_console().width))
    _skip_final_sweep()


def _latest_state(state: Path, top: Path) -> tuple[str | None, dict[str, Any], int]:
    """The newest run id of the repository `top` whose state.json holds working memory, that
    memory, and the step the run had reached when it was saved."""
    from agent_cli.agent.run.store import MAX_STATE_BYTES
    from agent_cli.cli.shared import run_store
    from agent_cli.core import atomic
    from agent_cli.core.errors import StorageError

    runs_of = run_store(state, top)  # a shared `home` holds other repositories' runs too
    runs = state / "runs"
    paths = sorted(runs.glob("*/state.json"), reverse=True) if runs.is_dir() else []
    for path in paths:
        try:
            data = atomic.read_json(path, MAX_STATE_BYTES)
        except (OSError, ValueError) as e:  # ValueError: not a regular file, not strict JSON
            why = str(e).removeprefix(f"{path}: ").removeprefix(f"{path} ")  # named once
            raise StorageError(
                f"{path} cannot be read: {why}", "move the run directory aside"
            ) from None
        if not isinstance(data, dict) or not runs_of.ours(data.get("repo", "")):
            continue
        if isinstance(data.get("memory"), dict) and data["memory"]:  # {}: none saved yet
            steps = data.get("steps")
            return path.parent.name, data["memory"], steps if type(steps) is int else 0
    return None, {}, 0


def _later_steps(state: Path, top: Path, run_id: str, saved: int) -> dict[str, Any]:
    """What the run's journal holds past its saved state: the tool calls it made after
    state.json was last written (at a task's boundary), which `agent run --resume` replays
    into working memory; {"steps": how many, "last_step": the step of the last} ({} when
    none, or when the journal cannot be read: the saved memory is shown all the same)."""
    from agent_cli.agent.run import journal
    from agent_cli.cli.shared import run_store
    from agent_cli.core.errors import AgentError

    try:
        entries = journal.parse(run_store(state, top).journal_lines(run_id))
    except AgentError:
        return {}
    later = [e.step for e in entries if e.step > saved]
    return {"steps": len(later), "last_step": max(later)} if later else {}


def _say_later_steps(state: Path, run_id: str, saved: int, later: dict[str, Any]) -> None:
    """A line on stderr saying the run got past the working memory shown (`_later_steps`)."""
    from agent_cli.agent.run.live import live_ids

    if run_id in live_ids(state):
        typer.echo(
            f"run {run_id} is running, at step {later['last_step']}: shown is its working "
            f"memory as last saved, at step {saved}",
            err=True,
        )
        return
    typer.echo(
        f"run {run_id} went further than its saved working memory (step {saved}): its "
        f"journal holds {later['steps']} later step(s), to step {later['last_step']}, which "
        "`agent run --resume` replays; shown is the memory as saved",
        err=True,
    )


def _working_report(settings: Any, state: Path, kind: str | None, top: Path) -> dict[str, Any]:
    """Hot items with score terms, the cold manifest and stats of the repository's latest run."""
    run_id, saved, steps = _latest_state(state, top)
    if run_id is None:
        return {"run_id": None, "hot": [], "cold": [], "stats": {}, "later_steps": {}}
    later = _later_steps(state, top, run_id, steps)
    if later:
        _say_later_steps(state, run_id, steps, later)
    from agent_cli.core.errors import StorageError
    from agent_cli.memory import InMemStore, SqliteStore, WorkingMemory

    # The cold zone is per run (runs/<id>/memory.db); older layouts kept one for all runs.
    db = next(
        (p for p in (state / "runs" / run_id / "memory.db", state / "memory.db") if p.exists()),
        None,
    )
    store = SqliteStore(db, read_only=True) if db else InMemStore()
    # A budget at least as large as what was saved, so looking never evicts anything.
    items = saved.get("items")
    items = items if isinstance(items, list) else []
    saved_cost = sum(
        i["cost"] for i in items if isinstance(i, dict) and type(i.get("cost")) is int
    )  # a state edited by hand is refused by import_state, below
    wm = WorkingMemory(
        store=store, embedder=None, max_tokens=max(settings.memory_max_tokens, saved_cost + 512)
    )
    with contextlib.closing(store):
        try:
            wm.import_state(saved)
        except (KeyError, TypeError, ValueError) as e:
            raise StorageError(
                f"{state / 'runs' / run_id / 'state.json'}: working memory cannot be read: {e}",
                "it was edited or written by another version of agent; move the run directory aside",
            ) from None
        hot = [_hot_row(i, wm.explain(i.id)) for i in wm.hot_items() if kind in (None, i.kind)]
        cold = [e for e in wm.cold_manifest() if kind in (None, e.get("kind"))]
        return {
            "run_id": run_id,
            "hot": hot,
            "cold": cold,
            "stats": wm.stats(),
            "later_steps": later,
        }


# The score's terms under the names the table and the JSON share (scoring.explain's name first).
TERMS = {"kind": "weight", "refs": "refs", "goal": "goal", "recency": "recent", "size": "size"}


def _hot_row(item: Any, terms: dict[str, float]) -> dict[str, Any]:
    """One hot item as the table shows it and the JSON prints it: the same names in both."""
    row: dict[str, Any] = {
        "id": item.id,
        "kind": item.kind,
        "pinned": item.pinned,
        "score": terms["total"],
    }
    row.update({shown: terms[name] for name, shown in TERMS.items()})
    row.update(
        {"tokens": item.tokens, "step": item.step, "mentions": item.refs, "summary": item.summary}
    )
    return row


@memory_app.command("forget", cls=Command, short_help="Delete one remembered item.")
def forget_command(
    item_id: str = typer.Argument(
        ..., metavar="ID", show_default=False, help="The id shown by `agent recall`."
    ),
    repo: Path | None = REPO,
    all_repos: bool = typer.Option(
        False, "--all-repos", help="Forget it whichever repository's it is (a shared store)."
    ),
) -> None:
    """Delete one item (an episode with its failure signatures, a fact or a note).

    In a store other repositories share (a `home`, a server) only this repository's items,
    the ones `agent recall` shows here, unless --all-repos."""
    from agent_cli.agent.learn.topic import repo_topics
    from agent_cli.cli.shared import own_memory
    from agent_cli.core.errors import StorageError, UsageError
    from agent_cli.core.text import shorten, unusable

    if unusable(item_id):  # no stored id is: ids are stored as UTF-8 text
        raise UsageError(f"the id {unusable(item_id)}", "pass an id as `agent recall` shows it")
    shown = shorten(item_id, 80)  # an id past this is none a run wrote, and one line says so
    top, settings, state = _place(repo)
    mem, place = _open(settings, state), _where(settings, state)
    if mem is None:
        raise StorageError(
            f"no memory item {shown!r}: there is no memory yet at {place}",
            "`agent run` creates it",
        )
    own = own_memory(settings)
    topics = None if own or all_repos else repo_topics(top, own)
    with mem:
        removed = mem.forget(item_id, topics)
    if not removed:
        raise StorageError(
            f"no memory item {shown!r} in {mem.path}", "`agent recall QUERY` shows the ids"
        )
    typer.echo(f"forgot {item_id} ({removed} document(s))")


@memory_app.command(
    "expire",
    cls=Command,
    short_help="Archive facts, notes and procedures unused for memory_ttl_days.",
)
def expire_command(
    repo: Path | None = REPO,
    all_repos: bool = typer.Option(
        False,
        "--all-repos",
        help="Every repository's items in a shared store, not only this one's.",
    ),
) -> None:
    """Move facts, notes and procedures unused for `memory_ttl_days` into the archive.

    In a store other repositories share (a `home`, a server) only this repository's items,
    those `agent memory show` counts here, unless --all-repos. Archived items are kept
    (`agent memory export` writes them) but no longer recalled; no command brings one back."""
    from agent_cli.agent.learn.topic import repo_topics
    from agent_cli.cli.shared import own_memory

    top, settings, _ = _place(repo)
    own = own_memory(settings)
    topics = None if own or all_repos else repo_topics(top, own)
    with _memory_or_exit(repo) as mem:
        moved = mem.expire(ttl_days=settings.memory_ttl_days, topics=topics)
    whose = " of this repository's" if topics else ""
    typer.echo(f"moved {moved}{whose} item(s) into the archive")


@memory_app.command(
    "export", cls=Command, short_help="Write all of long-term memory to a JSONL file."
)
def export_command(
    file: Path = typer.Argument(
        ...,
        metavar="FILE",
        show_default=False,
        help="The JSONL file to write (- for standard output).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace FILE when it exists."),
    repo: Path | None = REPO,
) -> None:
    """Write every episode, fact, note, procedure and archived item to a JSONL file (no vectors).

    FILE is written whole or not at all (a new file that replaces it at the end); an existing
    FILE is replaced only with --force."""
    import os

    from agent_cli.core import atomic
    from agent_cli.core.errors import StorageError, UsageError

    to_stdout = str(file) == "-"
    if not to_stdout and os.path.lexists(file) and not force:
        raise UsageError(
            f"{file} exists; nothing was written",
            "pass --force to replace it, or name another file",
        )
    mem, place = _memory_or_none(repo, reads_only=True)
    where = "standard output" if to_stdout else str(file)
    try:
        if to_stdout:
            written = _export(mem, sys.stdout.buffer)
            sys.stdout.flush()
        else:
            with atomic.replacing(file) as out:
                written = _export(mem, out)
    except BrokenPipeError:
        raise  # its reader stopped reading: the command ends as every command does (app.py)
    except OSError as e:
        if to_stdout:  # what went out before it stopped is not a whole export
            raise StorageError(
                f"standard output cannot be written: {e.strerror or e}; the export is "
                "incomplete (what reached its reader is not all of memory)",
                "let the reader read to the end, or export to a FILE",
            ) from None
        raise StorageError(
            f"{where} cannot be written: {e.strerror or e}; nothing was exported",
            "name a regular file in a directory you can write to, or - for standard output",
        ) from None
    if mem is None:  # an empty export: what a script that exports then imports expects
        typer.echo(NO_MEMORY.format(state=place), err=True)
    source = f" from {mem.path}" if mem is not None else ""
    typer.echo(f"exported {written} record(s){source} to {where}", err=to_stdout)


def _export(mem: Any, out: BinaryIO) -> int:
    """Every record of `mem` written to `out` (none without a store); how many."""
    if mem is None:
        return 0
    with mem:
        return int(mem.export(out))


@memory_app.command("import", cls=Command, short_help="Read long-term memory from a JSONL export.")
def import_command(
    file: Path = typer.Argument(
        ..., metavar="FILE", show_default=False, help="A JSONL file from `agent memory export`."
    ),
    repo: Path | None = REPO,
) -> None:
    """Read records from an export, re-embedding them with the configured embedder."""
    from agent_cli.core.errors import UsageError

    if not file.is_file():
        raise UsageError(f"{file} is not a file", "pass a file written by `agent memory export`")
    from agent_cli.cli.shared import prepare_state_dir

    top, settings, state = _place(repo)
    if not settings.memory_url:  # a server keeps nothing under the state directory
        prepare_state_dir(top, state, create=True)
    shown = _ImportProgress()
    with _open(settings, state, create=True) as mem:
        added = mem.import_(file, progress=shown)
    stored = f" ({shown.skipped:,} of them stored already)" if shown.skipped else ""
    typer.echo(f"imported {added} record(s) into {mem.path}{stored}")


class _ImportProgress:
    """Says on stderr how far an import got, every `every_s` seconds while it runs."""

    def __init__(self, every_s: float = 2.0) -> None:
        import time

        self.clock, self.every_s = time.monotonic, every_s
        self.last, self.skipped = self.clock(), 0

    def __call__(self, done: int, total: int, skipped: int) -> None:
        self.skipped = skipped
        if done >= total or self.clock() - self.last < self.every_s:
            return
        self.last = self.clock()
        stored = f" ({skipped:,} stored already)" if skipped else ""
        typer.echo(f"imported {done:,} of {total:,} records{stored}", err=True)


@memory_app.command(
    "reindex", cls=Command, short_help="Re-embed everything with the configured embedder."
)
def reindex_command(repo: Path | None = REPO) -> None:
    """Re-embed everything with the configured embedder (after changing `embedding_model`)."""
    with _memory_or_exit(repo) as mem:
        count = mem.reindex()
    typer.echo(f"re-embedded {count} record(s) with {mem.embedder.name}")
