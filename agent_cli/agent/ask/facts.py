"""The end of a run: one request, forced to call `submit_facts`, for what the run learned.

Arguments: `{"facts": [{"text": str, "files": [str, ...]}]}`: durable facts about the
repository. They are the model's words, so they are stored at trust 0.5 (the harness's own
observations are 1.0). A reply that cannot be read stores nothing and is not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.window import Window
from agent_cli.core import strictjson
from agent_cli.core.errors import AgentError
from agent_cli.llm.base import force, function_tool

MAX_FACTS = 10
MAX_TEXT = 400
MAX_FILES = 10
TRUST = 0.5

FACTS_TOOL = function_tool(
    "submit_facts",
    "Submit durable facts about this repository that this run learned "
    "(how it is built, tested, laid out; conventions; pitfalls), each with "
    "the files it is about. An empty list is fine.",
    {
        "facts": {
            "type": "array",
            "maxItems": MAX_FACTS,
            "items": {
                "type": "object",
                "required": ["text", "files"],
                "properties": {
                    "text": {"type": "string"},
                    "files": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
)

TASK = (
    "The run is over. Call submit_facts with the durable facts about this repository that "
    "this run established and a later run would need: how to build and test it, where "
    "things are, conventions, pitfalls. Each fact is one sentence and names the files it is "
    f"about. At most {MAX_FACTS}; none if nothing durable was learned. Do not restate the goal."
)


@dataclass
class Fact:
    """A fact the model submitted: one sentence and the repository files it names."""

    text: str
    files: list[str]


def facts_messages(
    goal: str, memory: str, state: str, instructions: str = "", window: Window | None = None
) -> list[dict]:
    """The request: the run's working memory and state, the ask, the goal last."""
    return Request(
        system=prompts.load("facts"),
        goal=goal,
        instructions=instructions,
        memory=memory,
        task=TASK,
        state=state,
    ).fitted([FACTS_TOOL], window)


def ask_facts(model, messages: list[dict]) -> list[Fact]:
    """The facts in the model's reply; [] when the reply is not a well-formed submit_facts."""
    try:
        reply = model.chat(messages, [FACTS_TOOL], force("submit_facts"))
    except AgentError:
        return []
    calls = [c for c in reply.tool_calls if c.name == "submit_facts"]
    if not calls:
        return []
    return parse_facts(calls[0].arguments)


def parse_facts(arguments: str) -> list[Fact]:
    """The well-formed facts of submit_facts arguments; [] for anything malformed."""
    try:
        data = strictjson.loads(arguments)
    except (TypeError, ValueError):
        return []
    items = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    out: list[Fact] = []
    for item in items[:MAX_FACTS]:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        text = " ".join(item["text"].split())[:MAX_TEXT]
        files = item.get("files") if isinstance(item.get("files"), list) else []
        if text:
            out.append(Fact(text, [f for f in files[:MAX_FILES] if _repo_path(f)]))
    return out


def _repo_path(path: object) -> bool:
    """Whether `path` is a plain relative path inside a repository."""
    if not isinstance(path, str) or not path.strip() or len(path) > 300:
        return False
    parts = PurePosixPath(path).parts
    return not PurePosixPath(path).is_absolute() and ".." not in parts and ".git" not in parts
