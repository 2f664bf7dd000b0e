"""A wall-clock bound on one HTTP exchange, headers and body alike.

The HTTP client's read timeout starts again with every byte that arrives, so a server that
trickles its response headers (or its body) a byte at a time is never timed out by it. A
`Watchdog` runs beside the exchange and, at the deadline, calls the `close` it was given
(closing the client closes its connections): the read blocked on that connection fails at
once, and `fired` tells the caller that the deadline, not the server, ended it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType


class Watchdog:
    """Calls `close` once `seconds` have passed inside the `with` block, unless it ended."""

    def __init__(self, seconds: float, close: Callable[[], None]) -> None:
        self.fired = False
        self._close = close
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True  # before closing: the reader that fails next must see it
        try:
            self._close()
        except Exception:  # closing is best effort: the blocked read still fails or ends
            pass

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._timer.cancel()


@contextmanager
def ended_after(
    seconds: float,
    close: Callable[[], None],
    reopen: Callable[[], None],
    ended: Callable[[], BaseException],
) -> Iterator[None]:
    """Run the block under a `Watchdog` that calls `close` (a client's) at `seconds`; when it
    fired, the block's failure is raised as `ended()` (the error that says the exchange went on
    too long), and `reopen` is called to open the client it closed again."""
    watchdog = Watchdog(seconds, close)
    try:
        with watchdog:
            yield
    except Exception:
        if watchdog.fired:
            raise ended() from None
        raise
    finally:
        if watchdog.fired:
            reopen()
