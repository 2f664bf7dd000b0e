"""What one run reads from long-term memory and the repository's instructions, what it notices
as it goes (notes, failures, fixes), and what it leaves in long-term memory at the end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agent_cli.agent.ask import facts as model_facts
from agent_cli.agent.ask.window import Window
from agent_cli.agent.learn import digest
from agent_cli.agent.learn import instructions as repo_instructions
from agent_cli.agent.learn import learning as learn
from agent_cli.agent.learn.digest import Digest
from agent_cli.agent.learn.topic import former_topics, topic_of
from agent_cli.core import events
from agent_cli.core.errors import AgentError
from agent_cli.core.models import Fact, Verdict
from agent_cli.core.protocols import LongTermStore
from agent_cli.memory.thresholds import OFFLINE, Thresholds

if TYPE_CHECKING:
    from agent_cli.agent.attempt.runtime import Runtime
    from agent_cli.agent.run.state import AgentState
    from agent_cli.agent.run.store import RunRecord


class RunMemory:
    """The run's side of long-term memory; the Session calls it at each of its moments."""

    def __init__(
        self,
        longterm: LongTermStore,
        root: Path,
        ttl_days: float,
        window: Window,
        read_only: bool = False,
        digest_tokens: int = learn.DIGEST_TOKENS,
        thresholds: Thresholds = OFFLINE,
        own_store: bool = True,
    ) -> None:
        self.longterm = longterm
        self.root = Path(root)
        self.own_store = own_store  # not shared: older, unkeyed items there are this repository's
        self.ttl_days = ttl_days
        self.read_only = read_only  # a plan-only run: recall counts no hits
        self.digest_tokens = digest.share_of(digest_tokens, window.limit)
        self.thresholds = thresholds  # how close an item or episode must be to be recalled
        self._topics: list[str] | None = None  # the topic first, then the former ones
        self.learned = learn.Learned()
        # The instruction files are read when first asked for (once a new run plans, once a
        # resumed one knows when it first began), as they stood when this session started.
        self._instructions: repo_instructions.Instructions | None = None
        self._instructions_tokens = repo_instructions.share_of(window.limit)
        self._instructions_since = repo_instructions.fs_now()
        self._instructions_began: Callable[[str], str | None] | None = None

    @property
    def instructions(self) -> repo_instructions.Instructions:
        """The repository's instruction files that are the owner's, read once."""
        if self._instructions is None:
            self._instructions = repo_instructions.load(
                self.root,
                self._instructions_tokens,
                since=self._instructions_since,
                began=self._instructions_began,
            )
        return self._instructions

    def instructions_since(self, since: int, began: Callable[[str], str | None]) -> None:
        """Take the instruction files as a run that began at `since` (a resumed run's first
        start, ns by `instructions.fs_now`): what the run's earlier sessions made, or anyone
        changed since, is not the owner's (an AGENTS.md the model wrote and a verified task
        committed, say), unless it holds what the commit the run began at held there
        (`began`: a path's blob id in it), as a work tree made again for the resume does."""
        if since:
            self._instructions_since = min(since, self._instructions_since)
            self._instructions_began = began
            self._instructions = None  # a read before this one was as of this session's start

    @property
    def topic(self) -> str:
        """The repository that episodes, procedures, notes and facts are about (`repo_topic`)."""
        return self._read_topics()[0]

    @property
    def former_topics(self) -> list[str]:
        """What earlier versions filed this repository's items under (`topic.former_topics`):
        none in a shared store, where those may be any repository's."""
        return self._read_topics()[1:]

    def _read_topics(self) -> list[str]:
        if self._topics is None:
            from agent_cli.workspace.git.identity import repo_identity

            identity = repo_identity(self.root)
            topic = topic_of(identity, self.root)
            former = former_topics(identity, self.root, self.own_store)
            self._topics = [topic, *(t for t in former if t != topic)]
        return self._topics

    def take_identity(self) -> None:
        """Read which repository this is now, before the model can run a command: a command
        may rewrite the repository's config (`git remote set-url origin` another's URL), and
        the run's reads and writes would then be another repository's."""
        self._read_topics()

    def recall_for_model(self, query: str) -> str:
        """Earlier runs' memory about `query` in this repository, fenced (the model's `recall`
        tool): of the repository the run started in, whatever a command made of its config."""
        from agent_cli.memory.longterm.records import format_for_context, mark_stale

        found = self.longterm.recall(query, k=3, topics=[self.topic, *self.former_topics])
        return format_for_context(mark_stale(list(found), self.blob_of))

    def blob_of(self, path: str) -> str | None:
        from agent_cli.workspace.git.blobs import blob_hash

        return blob_hash(self.root, path)

    def recall(self, goal: str) -> Digest:
        """What a run starts with from long-term memory: the repository's memory digest, a hit
        counted on each item the run has not counted before (a resumed run's earlier
        sessions did)."""
        found = learn.recall_for_run(
            self.longterm,
            goal,
            [self.topic, *self.former_topics],
            self.blob_of,
            count=not self.read_only,
            digest_tokens=self.digest_tokens,
            thresholds=self.thresholds,
            root=self.root,
            counted=set(self.learned.recalled),
        )
        if not self.read_only:
            ids = {r.id for r in found.items if r.kind != "episode"}  # episodes count none
            self.learned.recalled = sorted({*self.learned.recalled, *ids})
        return found

    def noted(self, state: AgentState, item_id: str, text: str) -> None:
        """A note the model took: kept with the task it came from, curated at the end."""
        index = state.current_task()
        task = state.plan[index].goal if index is not None else ""
        self.learned.notes.append({"id": item_id, "text": text, "task": task})

    def verdict(self, rt: Runtime, verdict: Verdict, signatures: list[str], run_id: str) -> None:
        """After a verdict: a pass records a fix; a failure looks up earlier fixes for the retry."""
        index = rt.state.current_task()
        if verdict.passed:
            if index is not None:
                task = rt.state.plan[index]
                self.learned.passed(index, task.goal, task.summary)
            rt.set_fixes("")
            return
        if index is not None and signatures:
            self.learned.failed(index, signatures)
            try:
                rt.set_fixes(learn.fixes_block(self.longterm, signatures, run_id, self.topic))
            except AgentError as e:  # a retry without earlier fixes is still a retry
                rt.emit(events.Notice(text=f"earlier fixes not looked up: {e.one_line()}"))

    def facts(self, rt: Runtime, status: str) -> list[Fact]:
        """The model's facts about the repository, asked for once at the end of a run that ended
        on its own (verified or escalated) with money left; [] on any failure of that request."""
        if status not in ("verified", "escalated") or rt.spent() >= rt.limits.budget_usd:
            return []
        try:
            messages = model_facts.facts_messages(
                rt.state.goal,
                rt.memory.assemble().render(),
                rt.state.render_progress(),
                self.instructions.render(),
                rt.limits.window(),
            )
            found = model_facts.ask_facts(rt.role("planner"), messages, rt.log)
        except AgentError as e:
            rt.log({"type": "facts", "error": e.one_line()})
            rt.emit(events.Notice(text=f"no facts kept from this run: {e.one_line()}"))
            return []
        except KeyboardInterrupt:  # stopping now loses nothing: the run itself is over
            rt.log({"type": "facts", "error": "interrupted"})
            return []
        rt.log({"type": "facts", "facts": [f.model_dump() for f in found]})
        rt.save()  # the request's usage
        return found

    def remember(
        self,
        rt: Runtime,
        run: RunRecord,
        signatures: list[str],
        accept_cmds: list[str],
        facts: list[Fact] | None = None,
    ) -> None:
        """Everything the run learned into long-term memory, then expiry; a notice names
        what was not stored, and why."""
        for former in self.former_topics:  # "" is not adopted: unkeyed items stay as they are
            self.longterm.adopt(former, self.topic)
        self.longterm.upgrade_ids()  # items stored under dated ids get content ids, merged
        kept = learn.remember(
            self.longterm,
            run=run,
            state=rt.state,
            toolbox=rt.toolbox,
            learned=self.learned,
            signatures=signatures,
            topic=self.topic,
            blob_of=self.blob_of,
            ttl_days=self.ttl_days,
            accept_cmds=accept_cmds,
            facts=self.facts(rt, run.status) if facts is None else facts,
        )
        if said := kept.notice():
            rt.emit(events.Notice(text=said))
