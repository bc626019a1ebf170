"""Live logs: a run's ``on_log`` callback, told of each log entry as the program writes it.

The entries are the ones ``Outcome.logs`` keeps, in the same order and under the same
bounds (``max_log_entries``, the line ceiling, the run's budget of log text, with its one
closing warning): the child sends each as it keeps it (``Run.stream_logs``), and only when
a run asked.

A sync callback is called on the event loop as each entry arrives (keep it quick: it holds
the loop); an async one (or a sync one that returns an awaitable) is awaited, one entry
after the other, in order. ``execute`` returns once the last entry's callback has
finished. A callback that raises never fails the run: the exception is logged (logger
``codemode.logs``, with its traceback) and the callback is not called again for that run;
the run goes on, and its entries are all in ``Outcome.logs``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ._outcome import LogEntry

__all__ = ["LiveLogs"]

log = logging.getLogger("codemode.logs")


class LiveLogs:
    """One run's ``on_log``: each entry delivered once, in order, on the loop."""

    __slots__ = ("_callback", "_consumer", "_failed", "_line")

    def __init__(self, callback: Callable[[LogEntry], Awaitable[None] | None]) -> None:
        if not callable(callback):
            from ._faults import InvalidRequest

            raise InvalidRequest(f"on_log must be a callable taking a LogEntry, got {callback!r}.")
        self._callback = callback
        self._failed = False
        self._line: collections.deque[Awaitable[Any]] = collections.deque()
        """Awaitables the callback returned, waiting for the ones before them."""
        self._consumer: asyncio.Task[None] | None = None

    def entry(self, entry: LogEntry) -> None:
        """An entry arrived from the run (on the loop)."""
        if self._failed:
            return
        try:
            returned = self._callback(entry)
        except Exception:
            self._fail()
            return
        if inspect.isawaitable(returned):
            self._line.append(returned)
            if self._consumer is None or self._consumer.done():
                self._consumer = asyncio.ensure_future(self._consume())

    async def _consume(self) -> None:
        while self._line and not self._failed:
            awaitable = self._line.popleft()
            try:
                await awaitable
            except asyncio.CancelledError:
                raise
            except Exception:
                self._fail()

    def _fail(self) -> None:
        log.warning("on_log raised; it is not called again for this run", exc_info=True)
        self._failed = True
        self._drop()

    def _drop(self) -> None:
        while self._line:
            awaitable = self._line.popleft()
            if inspect.iscoroutine(awaitable):
                awaitable.close()

    async def delivered(self) -> None:
        """Wait until every entry that arrived has been delivered."""
        consumer = self._consumer
        if consumer is not None:
            try:
                await asyncio.shield(consumer)
            except asyncio.CancelledError:
                self.close()
                raise

    def close(self) -> None:
        """The run is over for its caller: deliver nothing more."""
        self._failed = True
        if self._consumer is not None:
            self._consumer.cancel()
        self._drop()
