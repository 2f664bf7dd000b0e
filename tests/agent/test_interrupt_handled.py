"""After a Ctrl-C the run handled, the process ends with the run's own exit code, even when
the KeyboardInterrupt came out of code compiled from a string (an import's dataclasses, say):
CPython then marks it as unhandled, and a `python -m` process so marked ends itself by SIGINT
at exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

ENDS = """
import signal, sys
from agent_cli.cli.app import interrupt_handled

try:
    exec("import signal; signal.raise_signal(signal.SIGINT)")  # Ctrl-C in exec'd code
except KeyboardInterrupt:
    pass  # handled: the run goes on to its end
interrupt_handled()
sys.exit(3)
"""


@pytest.mark.slow  # a Python process of its own: the mark is taken at exit
def test_a_handled_ctrl_c_from_code_compiled_from_a_string_ends_nothing_more(tmp_path):
    (tmp_path / "ends.py").write_text(ENDS)
    proc = subprocess.run(
        [sys.executable, "-m", "ends"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3, proc.stderr
