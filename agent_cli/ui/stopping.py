"""The signals that stop a run as Ctrl-C does: SIGTERM, and SIGHUP when its terminal closes.

Each raises KeyboardInterrupt in the main thread, so the run stops as on Ctrl-C: its state
saved, the model's command stopped, exit 130, resumable. A closed terminal takes its streams
with it (every write to it fails with EIO), so on SIGHUP the standard streams that were that
terminal are pointed at /dev/null first, and the stop is not cut short by its own output.
"""

from __future__ import annotations

import os
import signal
from typing import Any

Handlers = dict[signal.Signals, Any]


def stop_as_interrupt() -> Handlers:
    """Take SIGTERM and SIGHUP as Ctrl-C from now on; returns the handlers to `restore`."""
    ttys = [fd for fd in (0, 1, 2) if _isatty(fd)]

    def on_hangup(signum: int, frame: object) -> None:
        detach(ttys)
        raise KeyboardInterrupt

    return {
        signal.SIGTERM: signal.signal(signal.SIGTERM, _interrupt),
        signal.SIGHUP: signal.signal(signal.SIGHUP, on_hangup),
    }


def restore(previous: Handlers) -> None:
    """Put back the handlers `stop_as_interrupt` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def detach(fds: list[int]) -> None:
    """Point `fds` at /dev/null: what is read gets end of file, what is written goes nowhere."""
    if not fds:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            os.dup2(null, fd)
    finally:
        os.close(null)
