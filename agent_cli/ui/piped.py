"""rich's Console, except that what read its output going away is its caller's to handle.

rich's own way with a closed pipe (`| head` that has read enough, a pager quit) is to exit 1
on the spot: `agent run` then stopped without saving its state, and every other command
exited with a status that says it failed. Here the write raises BrokenPipeError like any
other write to a closed pipe, and the command's caller decides (`cli/app.py`: exit 141,
quietly; `agent run` and `agent batch`: stop as interrupted, state saved).
"""

from __future__ import annotations

import errno
import os

from rich.console import Console


class PipedConsole(Console):
    """A Console whose write to a closed pipe raises BrokenPipeError."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
