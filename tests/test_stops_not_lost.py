"""A stop that lands while Python runs a callback it cannot raise from (ui/stopping.py): the
KeyboardInterrupt a weakref callback swallows ("Exception ignored in ...", as importlib's
module-lock callback does at every import) is sent again, so the run still stops."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The stop arrives inside a weakref callback, then the process goes on working for 10 s.
SCRIPT = """
import os, signal, sys, time, weakref
from agent_cli.ui import stopping
stopping.stop_as_interrupt()
class Lock: pass
lock = Lock()
def callback(_ref):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    sum(range(1000))  # the handler runs here, inside the callback
ref = weakref.ref(lock, callback)
try:
    del lock
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("went on working")
except KeyboardInterrupt:
    print("stopped")
"""


@pytest.mark.slow  # a Python process of its own
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stop_swallowed_by_a_callback_is_taken_once_the_callback_is_over(sig):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, sig], capture_output=True, text=True, timeout=30
    )
    assert proc.stdout.strip() == "stopped", proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr  # taken, not reported as lost
