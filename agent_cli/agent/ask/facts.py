"""The end of a run: one request, forced to call `submit_facts`, for what the run learned.

Arguments: `{"facts": [{"text": str, "files": [str, ...]}]}` (`core.models.Facts`): durable
facts about the repository. A reply that is not valid is asked for once more with the reason;
when that fails too, nothing is stored and it is not an error.
"""

from __future__ import annotations

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.structured import Failure, Form, Log, ask
from agent_cli.agent.ask.window import Window
from agent_cli.core.errors import AgentError
from agent_cli.core.models import MAX_FACTS, Fact, Facts
from agent_cli.core.protocols import ChatModel, Message

FACTS = Form(
    "submit_facts",
    "Submit durable facts about this repository that this run learned "
    "(how it is built, tested, laid out; conventions; pitfalls), each with "
    "the files it is about. An empty list is fine.",
    Facts,
    "facts",
)
FACTS_TOOL = FACTS.tool()

TASK = (
    "The run is over. Call submit_facts with the durable facts about this repository that "
    "this run established and a later run would need: how to build and test it, where "
    "things are, conventions, pitfalls. Each fact is one sentence and names the files it is "
    f"about. At most {MAX_FACTS}; none if nothing durable was learned. Do not restate the goal."
)


def facts_messages(
    goal: str, memory: str, state: str, instructions: str = "", window: Window | None = None
) -> list[Message]:
    """The request: the run's working memory and state, the ask, the goal last."""
    return Request(
        system=prompts.load("facts"),
        goal=goal,
        instructions=instructions,
        memory=memory,
        task=TASK,
        state=state,
    ).fitted([FACTS_TOOL], window)


def ask_facts(model: ChatModel, messages: list[Message], log: Log | None = None) -> list[Fact]:
    """The facts of the model's submit_facts (AgentError when the request fails or no valid
    answer came after the re-ask)."""
    got = ask(model, messages, FACTS, log=log)
    if isinstance(got, Failure):
        raise AgentError(f"the model's submit_facts was not valid: {got.error}")
    return got.value.facts
