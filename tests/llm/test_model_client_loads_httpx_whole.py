"""The model client loads the legacy httpx module whole, so that chromadb importing it on a
thread of its own while a request goes out never shows the SDK a half-made module."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_model_client_imports_httpx():
    code = "import sys, agent_cli.llm.openai.chat; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
