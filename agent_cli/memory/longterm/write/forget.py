"""`agent memory forget`: one item deleted, an episode with its failure signatures, and in a
store several repositories share, only when it is one of the repository's own.

A shared store (a `home`, a server) holds other repositories' items under the same kind of
ids; recall and `agent memory show` never show them to this repository, so forgetting by id
keeps to the same items: an id that only another repository's documents carry is left alone,
and that is an error saying so rather than "no such item".
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm.store import Collection, Where


def forget(cols: Mapping[str, Collection], item_id: str, where: Where | None) -> int:
    """Delete the documents of `item_id` in every collection (an episode's failure signatures
    with it) that match `where` (None: any repository's); how many went. StorageError when
    none matches `where` but another repository's do. The caller holds the write lock."""
    removed = others = 0
    for name, col in cols.items():
        ids = _ids(col, item_id, name == "episodes", None)
        own = ids if where is None or not ids else _ids(col, item_id, name == "episodes", where)
        others += len(ids - own)
        if own:
            col.delete(ids=sorted(own))
            removed += len(own)
    if others and not removed:
        raise StorageError(
            f"memory item {item_id!r} is another repository's; nothing was forgotten",
            "forget it in that repository, or pass --all-repos",
        )
    return removed


def _ids(col: Collection, item_id: str, episodes: bool, where: Where | None) -> set[str]:
    """The ids of the documents of `item_id` (by id, and in `episodes` by run id) in `where`."""
    ids = set(col.get(ids=[item_id], where=where, include=[])["ids"])
    if episodes:
        run: Where = {"run_id": item_id}
        both: Where = run if where is None else {"$and": [run, where]}
        ids.update(col.get(where=both, include=[])["ids"])
    return ids
