"""The run's journal: one line per tool call in `journal.jsonl`, beside state.json.

state.json is written whole only at a task's boundaries (plan made, attempt started, task
verified or rejected, run end); between them each tool call appends what `--resume` needs
to go on from it: the step counter, the item it added to working memory (and the file it
shows, as the tool saw it), the notes the
model took, the run's usage so far, and, after a tool that may change files, the tree the
work tree holds (so that a resume after a kill tells the run's own changes from the user's). A line whose step is not past state.json's `steps`
is older than the state and is skipped, so a kill between the state's write and the
journal's reset replays nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_cli.agent.attempt.freshness import FileViews
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunUsage
from agent_cli.memory.working.memory import WorkingMemory
from agent_cli.memory.working.scoring import check_kind


class MemoryAdd(BaseModel):
    """An item a tool call added to working memory."""

    model_config = ConfigDict(frozen=True)

    kind: str
    text: str
    summary: str = ""
    path: str = ""  # the file a read or a write shows ("": none)
    blob: str | None = None  # that file's git blob id as the tool saw it (None: no such file)

    @field_validator("kind")
    @classmethod
    def _known(cls, kind: str) -> str:
        """A kind working memory has (a line edited by hand is unreadable, not a crash)."""
        check_kind(kind)
        return kind


@dataclass(frozen=True)
class StepRecord:
    """What the attempt knows of one tool call: the run's step after it, its task, its item."""

    step: int
    task: int
    added: MemoryAdd | None = None
    may_change: bool = False  # the tool may have changed the work tree (a write, a command)


class JournalEntry(BaseModel):
    """One line of journal.jsonl."""

    model_config = ConfigDict(frozen=True)

    step: int = Field(ge=0)
    task: int = Field(ge=0)
    usage: RunUsage
    added: MemoryAdd | None = None
    notes: tuple[str, ...] = ()
    may_change: bool = False  # the tool may have changed the work tree
    tree: str = ""  # then the tree the work tree holds (git's id; "" when git could not say)


def parse(lines: Iterable[str]) -> list[JournalEntry]:
    """The entries of the journal's lines; a torn last line (a kill mid-append) is left out."""
    out = []
    for line in lines:
        try:
            out.append(JournalEntry.model_validate_json(line))
        except ValidationError:
            break
    return out


def last_tree(entries: list[JournalEntry], state: AgentState, saved: str) -> str:
    """The tree the work tree held after the last tool call past the state that may have
    changed it (a killed run's last known work tree); `saved` when there is none, and ""
    (not known) when git could not say then."""
    trees = [e.tree for e in entries if e.step > state.step and e.may_change]
    return trees[-1] if trees else saved


def replay(
    entries: list[JournalEntry],
    state: AgentState,
    memory: WorkingMemory,
    noted: Callable[[str, str], None],
    views: FileViews | None = None,
) -> RunUsage | None:
    """Apply the entries past `state.step` to the state, memory and file `views`; the run's
    usage after them."""
    usage = None
    for entry in entries:
        if entry.step <= state.step:
            continue
        state.step = entry.step
        memory.tick()
        for text in entry.notes:
            noted(memory.note(text), text)
        added = entry.added
        if added is not None:
            item_id = memory.add(added.kind, added.text, summary=added.summary)
            if views is not None and added.path:
                views.saw(item_id, added.path, added.blob, added.kind == "edit")
        usage = entry.usage
    return usage
