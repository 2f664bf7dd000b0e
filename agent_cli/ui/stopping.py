"""The signals that stop a run as Ctrl-C does: SIGTERM, and SIGHUP when its terminal closes.

Each raises KeyboardInterrupt in the main thread, so the run stops as on Ctrl-C: its state
saved, the model's command stopped, exit 130, resumable. A closed terminal takes its streams
with it (every write to it fails with EIO), so on SIGHUP the standard streams that were that
terminal are pointed at /dev/null first, and the stop is not cut short by its own output.

While a stopped run saves its state (`held`), these signals and Ctrl-C wait: a second
Ctrl-C pressed while the first is being handled is taken once the state is on disk, so it
cannot leave the run recorded as still running.

A stop that lands while Python runs a callback it cannot raise from (a weakref's, such as the
one importlib runs at every import) is not lost: Python reports such a KeyboardInterrupt as
"Exception ignored" and goes on, so while these handlers are in place the report is taken
instead (`sys.unraisablehook`) and the same signal is sent again a moment later, when the
main thread is back in code that can stop.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Handlers = dict[signal.Signals, Any]
# Every signal that stops a run: Ctrl-C, and those `stop_as_interrupt` takes as it.
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
AGAIN_S = 0.05  # how soon a stop a callback swallowed is sent again
_raised: list[int] = []  # the signal each handler here turned into a KeyboardInterrupt, last
_before: list[Callable[[Any], object]] = []  # the unraisable hook `_not_lost` stands in for


def stop_as_interrupt() -> Handlers:
    """Take SIGTERM and SIGHUP as Ctrl-C from now on; returns the handlers to `restore`."""
    ttys = [fd for fd in (0, 1, 2) if _isatty(fd)]

    def on_hangup(signum: int, frame: object) -> None:
        detach(ttys)
        _interrupt(signum, frame)

    if sys.unraisablehook is not _not_lost:
        _before[:] = [sys.unraisablehook]
        sys.unraisablehook = _not_lost
    return {
        signal.SIGTERM: signal.signal(signal.SIGTERM, _interrupt),
        signal.SIGHUP: signal.signal(signal.SIGHUP, on_hangup),
    }


def restore(previous: Handlers) -> None:
    """Put back the handlers `stop_as_interrupt` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    if sys.unraisablehook is _not_lost and _before:
        sys.unraisablehook = _before.pop()


def _not_lost(unraisable: Any) -> None:
    """Send again a stop Python swallowed in a callback (a KeyboardInterrupt it can only report
    as ignored), from a thread of its own once the callback is over; pass anything else on."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        signum = _raised[-1] if _raised else signal.SIGINT  # else Python's own Ctrl-C
        again = threading.Timer(AGAIN_S, os.kill, (os.getpid(), signum))
        again.daemon = True
        again.start()
        return
    if _before:
        _before[0](unraisable)


@contextmanager
def held(signals: tuple[signal.Signals, ...] = STOPS) -> Iterator[None]:
    """Take each of `signals` that arrives during the block once the block is done, not
    inside it: it is raised again after the block, for the handler that was in place.

    Only the main thread takes signals (elsewhere the block runs as it is), and only a
    signal with a handler of Python's is held (one ignored or left to the system is not)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous: Handlers = {}
    for sig in signals:
        if callable(signal.getsignal(sig)):
            previous[sig] = signal.signal(sig, lambda signum, _frame: arrived.append(signum))
    try:
        yield
    finally:
        restore(previous)
    stop: BaseException | None = None
    for signum in dict.fromkeys(arrived):  # each once, in the order they came
        try:
            signal.raise_signal(signum)
        except BaseException as e:  # the first stop is raised after the others had their say
            stop = stop or e
    if stop is not None:
        raise stop


def _interrupt(signum: int, frame: object) -> None:
    _raised[:] = [signum]
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
