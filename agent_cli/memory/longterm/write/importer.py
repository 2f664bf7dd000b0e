"""`agent memory import`: an export file checked whole, then written in bounded batches.

The file is read twice, one line at a time, and never held: first every record is checked
(`records.read_export`), so that a bad line anywhere imports nothing and says which line and
how many records before it were good; then the records go to the store in batches of at
most `batch` per collection: each batch redacted, compared with what the store holds under
its ids (a record stored already, document and metadata alike, is skipped), embedded and
upserted. A fact exported under an id that is not its content id (an earlier version's) is
stored already, too, when the item under its content id names that id among those it was
merged from (`merged_ids`): the item it became is not brought back beside it, whose
confirmations and hits the next run would add to it again. Memory stays that of one batch,
whatever the file's size. `progress(done, total, skipped)` is called after each batch. A
failure while writing says how many records were written; the same import again continues
where it stopped, since what is stored is skipped (and an upsert by id never makes a
duplicate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from agent_cli.core.errors import AgentError, StorageError
from agent_cli.memory.longterm.curation import CONTENT_UPGRADE, content_id, key_of
from agent_cli.memory.longterm.records import batches, read_export
from agent_cli.memory.longterm.store import BATCH, Collection, Meta, Store

Progress = Callable[[int, int, int], None]  # records done, records in the file, skipped of done
RESUME_HINT = "import the same file again to continue: the records stored already are skipped"


def check(path: Path | str, secrets: Sequence[str] = ()) -> int:
    """How many records the export holds; StorageError naming the first bad line (and how
    many records before it were good) when one is not a record the store could hold, or
    holds one of `secrets` where it could not be masked (`records.parse_record`)."""
    good = 0
    try:
        for _ in read_export(path, secrets):
            good += 1
    except StorageError as e:
        raise StorageError(
            f"{e.message}; nothing was imported ({good:,} valid records before it)", e.hint
        ) from None
    return good


def write(
    store: Store,
    path: Path | str,
    total: int,
    progress: Progress | None = None,
    batch: int = BATCH,
) -> int:
    """Write the checked export's records into `store` in batches; how many were skipped
    because the store held them already. On a failure, the same error saying how far it got."""
    done = skipped = 0
    try:
        for name, ids, docs, metas in batches(read_export(path, store.secrets), batch):
            col = store.cols[name]
            docs, metas = store.redact(docs), store.redact(metas)
            new = _not_stored(store, col, ids, docs, metas)
            if name == "facts":
                new = _not_merged(store, col, new, ids, docs, metas)
            if new:
                store.upsert(
                    col, [ids[i] for i in new], [docs[i] for i in new], [metas[i] for i in new]
                )
            if name == "facts" and any(
                ids[i] != content_id(key_of(docs[i], metas[i])) for i in new
            ):
                store.mark_upgraded("facts", CONTENT_UPGRADE, done=False)  # an older export's ids
            done, skipped = done + len(ids), skipped + len(ids) - len(new)
            if progress is not None:
                progress(done, total, skipped)
    except AgentError as e:
        raise type(e)(
            f"{e.message}; imported {done:,} of {total:,} records before it stopped", RESUME_HINT
        ) from None
    return skipped


def _not_stored(
    store: Store, col: Collection, ids: list[str], docs: list[str], metas: list[Meta]
) -> list[int]:
    """The positions of the records the collection does not hold as they are (by id); of
    one id given twice, the last (an upsert of both would be refused)."""
    last = {i: n for n, i in enumerate(ids)}
    with store.guard("reading"):
        got = col.get(ids=list(last), include=["documents", "metadatas"])
    held = {
        i: (d, m or {})
        for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=False)
    }
    return [n for i, n in last.items() if held.get(i) != (docs[n], metas[n])]


def _not_merged(
    store: Store,
    col: Collection,
    new: list[int],
    ids: list[str],
    docs: list[str],
    metas: list[Meta],
) -> list[int]:
    """Of the positions `new`, those whose record is not merged already: a record under an id
    other than its content id, when the item under its content id lists that id in its
    `merged_ids` (`curation.merged`), is the item it became."""
    older = {n: content_id(key_of(docs[n], metas[n])) for n in new}
    older = {n: cid for n, cid in older.items() if cid != ids[n]}
    if not older:
        return new
    with store.guard("reading"):
        got = col.get(ids=sorted(set(older.values())), include=["metadatas"])
    sources = {
        i: set(str((m or {}).get("merged_ids", "")).split(","))
        for i, m in zip(got["ids"], got["metadatas"], strict=False)
    }
    return [n for n in new if n not in older or ids[n] not in sources.get(older[n], set())]
