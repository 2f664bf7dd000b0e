"""Working-memory views of files that changed since: superseded by a one-line stub.

A `file` item (a read) or an `edit` item (a write) shows a file as it was. After every tool
call, each file that items show is hashed again; an item whose file has changed since, by
the agent's own tools or by a command, is superseded: its text becomes a stub naming the
file and saying it changed, so the old content is not sent again. The latest write of each
file stays as it is: it is what the agent last did to it. The views are saved with the run
(`to_dict`) and carried through its journal, so that a resumed run supersedes what the run
saw before it was resumed as well.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_cli.agent.attempt.toolbox import ToolResult
    from agent_cli.memory.working.memory import WorkingMemory

BlobOf = Callable[[str], "str | None"]


View = tuple[str, str | None, bool]  # (path, blob, write)


@dataclass
class FileViews:
    """Which working-memory items show which file, and the blob id each saw. One item may show
    several files: reads of two files with the same lines are one item (merged as identical)."""

    items: dict[str, list[View]] = field(default_factory=dict)  # id -> what it shows
    latest_write: dict[str, str] = field(default_factory=dict)  # path -> item id

    def saw(self, item_id: str, path: str, blob: str | None, write: bool) -> None:
        """Item `item_id` shows `path` as blob `blob` (after a write when `write`)."""
        views = [v for v in self.items.get(item_id, []) if v[0] != path]
        self.items[item_id] = [*views, (path, blob, write)]
        if write:
            self.latest_write[path] = item_id

    def blob(self, item_id: str, path: str) -> str | None:
        """The blob item `item_id` saw of `path` (None: none, or no such file then)."""
        return next((b for p, b, _ in self.items.get(item_id, []) if p == path), None)

    def to_dict(self) -> dict[str, Any]:
        """The views as JSON-compatible data, for the run's record; see `from_dict`."""
        return {
            "items": {i: [list(v) for v in views] for i, views in self.items.items()},
            "latest_write": dict(self.latest_write),
        }

    @classmethod
    def from_dict(cls, data: Any) -> FileViews:
        """The views `to_dict` saved; an entry of the wrong shape (a record edited by hand) is
        left out, so its item is only no longer tracked."""
        views = cls()
        saved = data if isinstance(data, dict) else {}
        items = saved.get("items")
        for item_id, entries in (items if isinstance(items, dict) else {}).items():
            shown = (
                [(e[0], e[1], e[2]) for e in entries if _view(e)]
                if isinstance(entries, list)
                else []
            )
            if shown:
                views.items[str(item_id)] = shown
        latest = saved.get("latest_write")
        for path, item_id in (latest if isinstance(latest, dict) else {}).items():
            if isinstance(item_id, str) and any(v[0] == path for v in views.items.get(item_id, [])):
                views.latest_write[path] = item_id
        return views

    def changed(self, blob_of: BlobOf) -> list[tuple[str, str, bool]]:
        """(item id, path, write) of items that show a file that differs now, forgotten once
        returned."""
        now: dict[str, str | None] = {}
        out = []
        for item_id, views in list(self.items.items()):
            for path, blob, write in views:
                if self.latest_write.get(path) == item_id:
                    continue
                if path not in now:
                    now[path] = blob_of(path)
                if now[path] != blob:
                    out.append((item_id, path, write))
                    del self.items[item_id]
                    break
        return out


def _view(entry: Any) -> bool:
    """Whether a saved entry is a (path, blob, write) view."""
    return (
        isinstance(entry, list)
        and len(entry) == 3
        and isinstance(entry[0], str)
        and isinstance(entry[1], str | None)
        and isinstance(entry[2], bool)
    )


def stub(path: str, write: bool) -> str:
    """What a superseded item says instead of the old content."""
    what = "this edit" if write else "this read"
    return f"({path} has changed since {what}; read it again for its current content)"


def after_tool(
    views: FileViews,
    memory: WorkingMemory,
    item_id: str | None,
    result: ToolResult,
    blob_of: BlobOf,
) -> list[str]:
    """Track the item a tool result became, then supersede every view now out of date."""
    if item_id and result.path:
        views.saw(item_id, result.path, blob_of(result.path), result.kind == "edit")
    return supersede_changed(views, memory, blob_of)


def supersede_changed(views: FileViews, memory: WorkingMemory, blob_of: BlobOf) -> list[str]:
    """Supersede every view whose file has changed since it was seen (by a tool call, or, for
    a resumed run, before it was resumed); the ids of the items made stubs."""
    gone = []
    for old_id, path, write in views.changed(blob_of):
        if memory.supersede(old_id, stub(path, write)):
            gone.append(old_id)
    return gone
