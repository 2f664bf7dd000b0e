"""The shipped fake server where the README documents it: `from agent_cli.llm.fake_server import
FakeOpenAIServer, Behaviour` in a user's tests, and `python -m agent_cli.llm.fake_server SCRIPT.json`.

The server itself lives in `agent_cli.llm.fake`.
"""

from agent_cli.llm.fake.replies import Behaviour
from agent_cli.llm.fake.server import FakeOpenAIServer, fake_embedding, main

__all__ = ["Behaviour", "FakeOpenAIServer", "fake_embedding", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
