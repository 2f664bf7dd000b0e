"""A private asyncio event loop on its own thread, so synchronous callers can await coroutines."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running on a daemon thread; `run` waits for one coroutine's result."""

    def __init__(self, name: str = "mcp-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on the loop; its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """`coro`'s result; TimeoutError after `timeout_s` (the coroutine is then cancelled)."""
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None
        except BaseException:
            future.cancel()  # an interrupt in the caller: the coroutine stops too
            raise

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop and its thread."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout_s)
        if not self.thread.is_alive():
            self.loop.close()
