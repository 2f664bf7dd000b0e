"""One exception hierarchy; `cli.py` turns each into a one-line message and an exit code."""

from __future__ import annotations

from agent_cli.core.text import readable

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_ESCALATED = 3
EXIT_BUDGET = 4
EXIT_INTERRUPTED = 130


class AgentError(Exception):
    """Base error: a message saying what went wrong and a hint saying how to fix it, as UTF-8
    text (`readable`: a file name git gave that is not UTF-8 shown as `\\xNN`)."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str = "") -> None:
        message, hint = readable(message), readable(hint)
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and the hint on a single line, for the terminal."""
        text = " ".join(self.message.split())
        if self.hint:
            text += f" ({' '.join(self.hint.split())})"
        return text


class UsageError(AgentError):
    """The command line itself is wrong."""

    exit_code = EXIT_USAGE


class ConfigError(AgentError):
    """A settings file, environment variable or flag has a bad value."""


class ModelError(AgentError):
    """The model endpoint failed: unreachable, refused the key, unknown model, bad reply."""


class ModelRefused(ModelError):
    """The endpoint answered the request with a refusal: a 4xx status other than a rate limit
    (a key it does not take, a model it does not serve, a request it rejects)."""


class MalformedReply(ModelError):
    """The endpoint answered, but not with a chat completion we can read."""


class ContextOverflow(ModelError):
    """The request did not fit the server's context window; shrink it and ask again."""

    def __init__(
        self,
        message: str,
        hint: str = "",
        *,
        prompt_tokens: int | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.prompt_tokens = prompt_tokens
        self.window = window


class StorageError(AgentError):
    """A state file (SQLite, Chroma, state.json) could not be read or written."""


class EmbedderMismatch(StorageError):
    """A memory store was written with another embedder than the one configured."""


class MemoryUnavailable(StorageError):
    """The memory server (memory_url) cannot be reached or refuses us."""


class WorkspaceError(AgentError):
    """The repository or a path in it cannot be used as asked."""


class GitError(WorkspaceError):
    """A git operation cannot be done safely in the repository's current state."""


class ToolError(AgentError):
    """A tool call failed; the message goes back to the model as the tool's result."""


class BudgetExhausted(AgentError):
    """A step or money budget ran out; the state is saved and the run can be resumed."""

    exit_code = EXIT_BUDGET

    def __init__(
        self,
        message: str,
        hint: str = "",
        *,
        budget: str = "",
        used: float = 0.0,
        limit: float = 0.0,
    ) -> None:
        super().__init__(message, hint)
        self.budget, self.used, self.limit = budget, used, limit
