"""The tools a task's conversation offers, and their execution.

The built-in tools come first, then every provider's (the MCP servers'), in an order fixed
for the run so that the tool list heading each request stays cacheable; `dispatch` is the
one place a call reaches its tool. A tool never raises into the loop: bad arguments, an
unknown tool, a refused path or command all come back as a `ToolResult` with `ok=False` and
a message for the model.
`malformed` marks the results that mean the reply itself was unusable (bad JSON, unknown
tool, missing arguments); the loop stops after too many of those in a row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_cli.agent.attempt.masked import unmasked
from agent_cli.core import fences, strictjson
from agent_cli.core.errors import AgentError, ToolError
from agent_cli.core.models import ToolCall
from agent_cli.core.redact import redact
from agent_cli.core.text import readable, shorten
from agent_cli.llm.base import function_tool

if TYPE_CHECKING:
    from agent_cli.core.protocols import CommandOutcome, ToolProvider
    from agent_cli.memory.working.memory import WorkingMemory
    from agent_cli.workspace.files import Files

Args = dict[str, Any]

_S = {"type": "string"}
_I = {"type": "integer"}

TOOLS = [
    function_tool(
        "read_file",
        "Read a text file (numbered lines). Large files are paged: "
        "pass start_line/end_line for more.",
        {"path": _S, "start_line": _I, "end_line": _I},
        ["path"],
    ),
    function_tool(
        "write_file",
        "Create or overwrite a file with the full content.",
        {"path": _S, "content": _S},
    ),
    function_tool(
        "edit_file",
        "Replace the exact text `old` (must occur exactly once) by `new`.",
        {"path": _S, "old": _S, "new": _S},
    ),
    function_tool(
        "run", "Run a shell command in the repository root (timeout, output capped).", {"cmd": _S}
    ),
    function_tool(
        "search",
        "Search files for a regular expression; path limits the search.",
        {"pattern": _S, "path": _S},
        ["pattern"],
    ),
    function_tool(
        "list_dir",
        "List one directory level (default: the repository root): directories end in '/', "
        "files show their size in bytes; .git and .agent are left out.",
        {"path": _S},
        [],
    ),
    function_tool(
        "note", "Keep a short note in working memory for later steps and tasks.", {"text": _S}
    ),
    function_tool(
        "unpin",
        "Stop pinning a note (by its id, e.g. m12): it stays in working memory "
        "as an ordinary note, kept or evicted by its score.",
        {"id": _S},
    ),
    function_tool(
        "recall",
        "Bring back items from working memory's cold zone and from "
        "earlier runs, by name or by meaning.",
        {"query": _S},
    ),
    function_tool(
        "finish",
        "End this task with a short summary of what you changed. The "
        "harness then runs the acceptance command.",
        {"summary": _S},
    ),
]
TOOL_NAMES = [t["function"]["name"] for t in TOOLS]
# the built-in tools that never change a file (a provider's tool may)
READ_ONLY = frozenset({"read_file", "search", "list_dir", "note", "unpin", "recall", "finish"})
# What any one tool result may hold, whatever the tool: it is kept in working memory, embedded,
# logged and saved, so a 10 MB file or diff must not be carried around whole.
MAX_RESULT_CHARS = 100_000
_REQUIRED = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in TOOLS}
# each built-in tool's text arguments: a number, a list or null there is refused, not str()-ed
_TEXT = {
    t["function"]["name"]: {
        key
        for key, spec in t["function"]["parameters"]["properties"].items()
        if spec.get("type") == "string"
    }
    for t in TOOLS
}


@dataclass
class ToolResult:
    """What a tool call produced, for the model, working memory and the console."""

    name: str
    text: str
    ok: bool = True
    kind: str = "tool_output"  # the working-memory kind of the result
    summary: str = ""  # one line for the console: what happened
    subject: str = ""  # what the call was about, when the summary does not say (a command)
    malformed: bool = False
    finished: bool = False
    path: str = ""  # the file a read or a write was about, relative to the root
    diff: str = ""  # the whole diff of a change, for the console, when `text` shows less

    def __post_init__(self) -> None:
        # A file name that is not UTF-8 (from list_dir, search, a diff) reaches every request,
        # record and journal line the result goes into: shown with escapes, none fails on it.
        self.text, self.summary = readable(self.text), readable(self.summary)
        self.subject, self.diff = readable(self.subject), readable(self.diff)

    def memory_summary(self) -> str:
        """The summary of the working-memory item made from this result."""
        return (f"{self.subject} -> {self.summary}" if self.subject else self.summary)[:120]


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as a dict, or a malformed ToolResult raised as ValueError."""
    try:
        args = strictjson.loads(call.arguments or "{}")
    except ValueError as e:
        raise ValueError(f"the arguments are unusable: {e}; send a JSON object") from None
    if not isinstance(args, dict):
        raise ValueError("the arguments must be a JSON object")
    required = _REQUIRED.get(call.name, [])
    missing = [k for k in required if k not in args]
    if missing:
        raise ValueError(f"missing required argument(s): {', '.join(missing)}")
    for key in sorted(_TEXT.get(call.name, set())):
        value = args.get(key)
        if not isinstance(value, str) and (key in required or value is not None):
            got = "null" if value is None else type(value).__name__
            raise ValueError(f"the argument {key!r} must be a JSON string, got {got}")
    return args


class Toolbox:
    """Executes tool calls against the repository, the shell and working memory."""

    def __init__(
        self,
        *,
        files: Files,
        run_command: Callable[[str], CommandOutcome],
        is_test: Callable[[str], bool],
        memory: WorkingMemory,
        recall_longterm: Callable[[str], str] | None = None,
        secrets: tuple[str, ...] = (),
        providers: Sequence[ToolProvider] = (),
    ) -> None:
        self.files = files
        self.run_command = run_command
        self.is_test = is_test
        self.memory = memory
        self.recall_longterm = recall_longterm
        self.secrets = secrets
        self.commands: list[tuple[str, int | None]] = []
        self.touched: set[str] = set()
        self.tools_used: list[str] = []  # the distinct tools called, in the order first called
        self.on_note: Callable[[str, str], None] | None = None  # (item id, text): kept by the run
        self.providers = list(providers)
        self.tools = list(TOOLS)  # fixed for the run: the head of every request
        for provider in self.providers:
            self.tools += [t for t in provider.specs() if t["function"]["name"] not in TOOL_NAMES]
        self.names = [t["function"]["name"] for t in self.tools]

    def specs(self) -> list[dict[str, Any]]:
        """Every tool a task's conversation offers: the built-ins, then the providers'."""
        return self.tools

    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call; every failure becomes an error result for the model."""
        if call.name not in self.names:
            return ToolResult(
                call.name,
                f"error: unknown tool {call.name!r}; the tools are: {', '.join(self.names)}",
                ok=False,
                malformed=True,
                summary="unknown tool",
            )
        try:
            args = parse_arguments(call)
        except ValueError as e:
            return ToolResult(
                call.name, f"error: {e}", ok=False, malformed=True, summary=shorten(e, 100)
            )
        try:
            if call.name not in self.tools_used:
                self.tools_used.append(call.name)
            result = self.dispatch(call.name, args)
        except AgentError as e:
            result = ToolResult(
                call.name, f"error: {e.one_line()}", ok=False, summary=shorten(e.message, 100)
            )
        except (TypeError, ValueError, OSError, OverflowError, RecursionError) as e:
            result = ToolResult(
                call.name, f"error: {type(e).__name__}: {e}", ok=False, summary=shorten(e, 100)
            )
        result.text = redact(clip_middle(result.text, MAX_RESULT_CHARS), self.secrets)
        # The summary heads the result in working memory, outside its fence, and often quotes
        # the model's arguments (a planted file name, a command).
        result.summary = fences.escape(redact(result.summary, self.secrets))
        result.subject = fences.escape(redact(result.subject, self.secrets))
        return result

    def dispatch(self, name: str, args: Args) -> ToolResult:
        """Run the tool `name` (a built-in, or a provider's) with parsed arguments."""
        if name in TOOL_NAMES:
            run: Callable[[Args], ToolResult] = getattr(self, f"_{name}")
            return run(args)
        provider = next(p for p in self.providers if p.owns(name))
        reply = provider.call(name, args)
        return ToolResult(
            name,
            reply.text,
            ok=reply.ok,
            summary=reply.summary,
            subject=name.removeprefix("mcp__").replace("__", ".", 1),
        )

    def _read_file(self, a: Args) -> ToolResult:
        start, end = _int(a, "start_line"), _int(a, "end_line")
        text = self.files.read(str(a["path"]), start, end)
        where = (
            f" lines {a.get('start_line') or 1}-{a.get('end_line') or 'end'}"
            if a.get("start_line") or a.get("end_line")
            else ""
        )
        return ToolResult(
            "read_file",
            text,
            kind="file",
            summary=f"read {a['path']}{where}",
            path=self._rel(a["path"]),
        )

    def _write_file(self, a: Args) -> ToolResult:
        diff = self.files.write(str(a["path"]), str(a["content"]), self._unmask)
        self.touched.add(str(a["path"]))
        return ToolResult(
            "write_file",
            without_removed(diff),
            kind="edit",
            summary=f"wrote {a['path']}",
            path=self._rel(a["path"]),
            diff=diff,
        )

    def _edit_file(self, a: Args) -> ToolResult:
        diff = self.files.edit(str(a["path"]), str(a["old"]), str(a["new"]), self._unmask)
        self.touched.add(str(a["path"]))
        return ToolResult(
            "edit_file",
            without_removed(diff),
            kind="edit",
            summary=f"edited {a['path']}",
            path=self._rel(a["path"]),
            diff=diff,
        )

    def _unmask(self, text: str, original: str, what: str) -> str:
        """What the model sent, with the lines it was shown masked taken back (masked.py)."""
        return unmasked(text, original, self.secrets, what)

    def blob_of(self, path: str) -> str | None:
        """The git blob id of the repository file `path` now; None when there is no such file."""
        from agent_cli.workspace.git.blobs import blob_hash

        return blob_hash(self.files.root, path)

    def _rel(self, path: object) -> str:
        """`path` as the repository-relative path of the file it names."""
        return self.files.rel(self.files.resolve(str(path)))

    def _run(self, a: Args) -> ToolResult:
        cmd = str(a["cmd"])
        res = self.run_command(cmd)
        self.commands.append((cmd, res.exit_code))
        status = (
            f"timed out after {res.timeout_s:g} s" if res.timed_out else f"exit {res.exit_code}"
        )
        said = f"{status}; what it printed until then follows" if res.timed_out else status
        kind = "test_result" if self.is_test(cmd) else "tool_output"
        return ToolResult(
            "run",
            f"$ {cmd}\n[{said}]\n{res.output}",
            ok=res.exit_code == 0,
            kind=kind,
            summary=status,
            subject=cmd[:80],
        )

    def _search(self, a: Args) -> ToolResult:
        text = self.files.search(str(a["pattern"]), a.get("path") or None)
        return ToolResult("search", text, summary=f"search {a['pattern']!r}")

    def _list_dir(self, a: Args) -> ToolResult:
        path = str(a.get("path") or ".")
        return ToolResult("list_dir", self.files.list_dir(path), summary=f"list {path}")

    def _note(self, a: Args) -> ToolResult:
        # A blank note would be pinned into every request and kept in long-term memory, which
        # takes no item without text: refused here, where the model can still say what it meant.
        if not str(a["text"]).strip():
            raise ToolError("the note is empty", "give the text to keep as `text`")
        # Notes are shown unfenced, kept in memory.db and state, and may quote what the model saw.
        text = fences.escape(redact(str(a["text"]), self.secrets))
        item_id = self.memory.note(text)
        if self.on_note is not None:
            self.on_note(item_id, text)
        return ToolResult("note", f"noted as {item_id}", kind="note", summary="note")

    def _recall(self, a: Args) -> ToolResult:
        query = str(a["query"])
        if not query.strip():
            raise ToolError(
                "the query is empty", "give an item's id (m12), a file's path or words to recall by"
            )
        ids = self.memory.recall(query, k=3)
        parts = [
            f"restored to working memory: {', '.join(ids)}"
            if ids
            else _cooling(self.memory.cooling(query, k=3))
        ]
        if self.recall_longterm:
            parts.append(self.recall_longterm(query) or "nothing relevant from earlier runs")
        return ToolResult(
            "recall",
            "\n".join(parts),
            kind="recalled",
            summary=f"recall {query[:60]!r}: {len(ids)} restored",
        )

    def _unpin(self, a: Args) -> ToolResult:
        item_id = str(a["id"]).strip()
        if not item_id:
            pinned = ", ".join(i.id for i in self.memory.hot_items() if i.pinned) or "none"
            raise ToolError("the id is empty", f"give a pinned note's id; pinned now: {pinned}")
        self.memory.unpin(item_id)
        return ToolResult(
            "unpin",
            f"{item_id} is now an ordinary note",
            kind="note",
            summary=f"unpinned {item_id}",
        )

    def _finish(self, a: Args) -> ToolResult:
        return ToolResult("finish", str(a["summary"]), summary="finish", finished=True)


def _cooling(cooling: list[tuple[str, int]]) -> str:
    """What a recall that restored nothing says: which matches are still cooling down."""
    if not cooling:
        return "nothing matching in the cold zone of working memory"
    held = ", ".join(f"{i} ({n} more step{'s' if n != 1 else ''})" for i, n in cooling)
    return (
        f"nothing restored: the matching items were evicted just now and are cooling down: "
        f"{held}; recall them after that"
    )


def clip_middle(text: str, limit: int) -> str:
    """`text` cut to its first and last `limit // 2` characters, the cut said."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def _int(args: Args, key: str) -> int | None:
    """The whole number `args[key]` (a JSON number, or digits in a string), None when absent;
    ToolError naming the argument for anything else (a fraction, a word, true)."""
    value = args.get(key)
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ToolError(f"{key} must be a whole number, got {value!r}") from None


def without_removed(diff: str) -> str:
    """A change's diff as the model reads it (a rewrite's or an edit's): what the file holds now
    around each change, and a count of the lines it replaced instead of those lines, so content
    the change superseded (an earlier write of the same file, say) is never sent again."""
    kept, removed, in_hunk = [], 0, False
    for line in diff.removesuffix("\n").split("\n"):  # a form feed or CR in one ends no line
        in_hunk = in_hunk or line.startswith("@@")
        if in_hunk and line.startswith("-"):
            removed += 1
        else:
            kept.append(line)
    if not removed:
        return diff
    return "\n".join([*kept, f"[{removed} replaced lines not repeated]"])


def fenced(result: ToolResult) -> str:
    """The result as the model reads it: inside a tool_output fence."""
    return fences.tool_output(result.name, result.text)
