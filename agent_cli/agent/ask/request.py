"""Every model request is assembled here, from its most stable part to its most volatile.

Providers' prompt caches (OpenAI, vLLM, SGLang, llama.cpp) reuse the longest prefix a
request shares with an earlier one, so the parts go in this order:

1. the system prompt (rules and the fence rule): fixed for the run;
2. the repository's own instructions (`<repo_instructions>`): fixed for the run;
3. recalled long-term memory (`<retrieved_memory>`): fixed for a task;
4. the attempt's brief: the task, its check, the human's hints, the plan's progress and the
   last failure, all of which hold for a whole attempt at a task (a step request only);
5. pinned notes: change rarely;
6. the working memory: new items are appended at its end between eviction batches;
   then any already-fenced material of this request (the planner's file list, a diff);
7. the previous exchange (the assistant's tool calls and their fenced results); a result that
   the memory block shows in full is not sent a second time: its tool message names the item;
8. the task block and the run's state: for a step, only what changes from step to step (which
   task and attempt, the tool calls left, a nudge), the rest being in the brief;
9. the goal, always the last thing the model reads.

Nothing that changes at every step may go before the working memory, and what changes at
every step is kept short: a prompt cache re-reads everything after the first token that
differs, so the last message is read anew at every step. Planning, executing, verifying,
re-planning and summarising all build their messages through `Request`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_cli.agent.ask.window import Tools, Window, fit
from agent_cli.agent.run.state import GOAL_HEADER
from agent_cli.core import fences
from agent_cli.core.protocols import Message

POINTER = "(in WORKING MEMORY: {marker})"
POINTER_SEEN = "(in WORKING MEMORY: {marker}, the same result {times} times now)"


@dataclass
class Request:
    """The parts of one request; `messages()` lays them out in cache-friendly order."""

    system: str
    goal: str
    instructions: str = ""  # rendered <repo_instructions> blocks
    recalled: str = ""  # rendered <retrieved_memory> block(s)
    brief: str = ""  # what holds for a whole attempt, already escaped (`brief()`)
    pinned: str = ""  # pinned notes, already rendered
    memory: str = ""  # the assembled working memory
    # the memory block assembled again within N tokens, whole items left out (the weakest
    # first, the latest edits last), for a window that needs it smaller; None: its text is cut
    memory_within: Callable[[int], str] | None = None
    context: str = ""  # already-fenced material for this request (a file listing, a diff)
    exchange: list[Message] = field(default_factory=list)  # assistant tool calls + tool results
    in_memory: dict[str, str] = field(default_factory=dict)  # tool_call_id -> its item, rendered
    seen: dict[str, int] = field(default_factory=dict)  # tool_call_id -> times its item came
    task: str = ""  # what to do now (task, criteria, attempt)
    hints: str = ""  # the human's <human_hint> blocks, already escaped by fences.human_hint
    state: str = ""  # the run's progress: plan, facts, last failure, counters
    goal_header: str = GOAL_HEADER

    def messages(self) -> list[Message]:
        """The chat messages, stable parts first and the goal last."""
        out: list[Message] = [{"role": "system", "content": self.system}]
        if self.instructions:
            out.append(
                _user(
                    "The repository's own instructions (from its owner; follow them "
                    "unless the task says otherwise):\n" + self.instructions
                )
            )
        if self.recalled:
            out.append(_user("Reference material recalled from earlier runs:\n" + self.recalled))
        if self.brief:
            out.append(_user(self.brief))
        if self.pinned:
            out.append(_user("PINNED NOTES:\n" + self.pinned))
        if self.memory:
            out.append(_user("WORKING MEMORY:\n" + self.memory))
        if self.context:
            out.append(_user(self.context))
        out += [self._pointed(m) for m in self.exchange]
        out.append(_user(self._final()))
        return out

    def _pointed(self, message: Message) -> Message:
        """A tool result whose item the memory block holds whole, as a pointer to that item.

        Checked against the memory text as sent, so a memory block cut to fit the window
        (window.py) brings the full result back."""
        item = self.in_memory.get(message.get("tool_call_id") or "")
        if message.get("role") != "tool" or not item or item not in self.memory:
            return message
        marker = item[: item.index("]") + 1]  # "[kind id]", see memory.store.Item.header
        times = self.seen.get(message.get("tool_call_id") or "", 1)
        pointer = POINTER_SEEN if times > 1 else POINTER
        return {**message, "content": pointer.format(marker=marker, times=times)}

    def fitted(self, tools: Tools | None, window: Window | None) -> list[Message]:
        """The messages, cut (most volatile part first) to fit `window` with `tools`."""
        return fit(self, tools, window)

    def _final(self) -> str:
        """The volatile tail: task, state and the goal last.

        The task and state carry words of the model (plan goals, summaries) and command output
        (the last failure), so fence tags in them are escaped. The goal is the user's own.
        """
        # The hint blocks are the only fence tags left whole: their text was escaped already.
        head = brief(self.task, self.hints, self.state)
        goal = fences.escape(f"{self.goal_header}\n{self.goal}")
        return f"{head}\n\n{goal}" if head else goal


def brief(task: str, hints: str, state: str) -> str:
    """An attempt's brief: its task block, the human's hints (already escaped by
    `fences.human_hint`) and the run's state, fence tags in the task and state escaped, as in
    the volatile tail."""
    parts = [fences.escape(task), hints, fences.escape(state)]
    return "\n\n".join(part for part in parts if part)


def _user(text: str) -> Message:
    return {"role": "user", "content": text}
