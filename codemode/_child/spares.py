"""The child's supply of isolates: prepared ones waiting for runs, and finished ones
waiting to be disposed.

Preparing an isolate (V8 creating it from the runtime's snapshot, then the runtime's setup)
is most of a trivial run's cost, so the child prepares them between runs, one at a time on
its engine thread, and a run takes one that is ready. A finished isolate is disposed on the
same thread trip as the next preparation, first thing. Nothing is prepared or disposed
while a run is in progress (:meth:`Spares.quiet`): a program that takes the process to its
data limit must fail alone, not take an isolate being created down with it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._protocol import Recycle
from . import runtime
from .limits import MB
from .runtime import LAYOUT
from .threads import off_loop

__all__ = ["DISPOSE_TIMEOUT_S", "SPARE_ISOLATES", "Spares", "boot_values"]

SPARE_ISOLATES = 2
"""Isolates a child keeps prepared. Preparing one costs more CPU than a trivial run, so
with one spare, runs arriving back to back waited for it; a second covers the gap. Each
costs a little resident memory (counted in the child's baseline)."""
DISPOSE_TIMEOUT_S = 2.0
"""How long disposing an isolate may take before the child gives up and recycles."""


def boot_values() -> str:
    """What each isolate gets of its own, for its runtime's setup: a random seed and its
    time origin."""
    return runtime.boot_values(secrets.token_hex(32), time.time() * 1000)


class Spares:
    """Prepared isolates and finished ones, for one child (on its loop)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        memory_limit_mb: int,
        near_data_limit: Callable[[], bool],
        send: Callable[[Any], None],
    ) -> None:
        self.loop = loop
        self._memory_bytes = memory_limit_mb * MB
        self._near_data_limit = near_data_limit
        self._send = send
        self.ready: list[Any] = []
        self._task: asyncio.Task[Any] | None = None
        self.serving = False
        """From taking a run off the queue until its isolate is disposed: no preparation
        starts meanwhile (see quiet)."""
        self.finished: list[Any] = []
        """Isolates whose run ended normally, not yet disposed: the next preparation
        disposes them on its own thread trip (see engine.Isolate.prepare), or, when none comes
        first, the next run's :meth:`quiet` does."""

    async def new_isolate(self) -> Any:
        isolate, preparing = self._preparing(())
        await preparing
        return isolate

    def _preparing(self, close_first: Sequence[Any]) -> tuple[Any, asyncio.Future[None]]:
        """A new isolate and the future of its preparation on the engine thread (after
        ``close_first`` are disposed there)."""
        from .engine import Isolate

        isolate = Isolate(self._near_data_limit)
        return isolate, isolate.prepare(self.loop, boot_values(), self._memory_bytes, LAYOUT, close_first)

    def refill(self) -> None:
        """Refill the stock of prepared isolates, one preparation at a time, between runs."""
        if self._task is None and not self.serving and len(self.ready) < SPARE_ISOLATES:
            self._task = asyncio.ensure_future(self._prepare_one())

    async def _prepare_one(self) -> None:
        try:
            # An isolate that cannot get memory while it is being created takes the process
            # down, and the last one may hold the process's data limit until it is gone:
            # finished isolates are disposed first, on the same trip.
            close_first, self.finished = self.finished, []
            isolate, preparing = self._preparing(close_first)
            if close_first:
                # Disposing stays bounded as it was on a trip of its own (see close); the
                # creation that follows on the same trip takes a small part of the bound.
                await asyncio.wait_for(preparing, DISPOSE_TIMEOUT_S)
            else:
                await preparing
        except TimeoutError:
            self._send(Recycle("the isolate could not be disposed"))
            os._exit(0)
        except Exception:
            return  # the next run creates its own, and reports what stops it
        finally:
            self._task = None
        self.ready.append(isolate)
        self.refill()

    async def quiet(self) -> None:
        """Wait until no other isolate is being disposed or created, so that nothing but the
        run allocates in the engine while it runs. A program that takes the process to its
        data limit must fail alone, with its memory error: an isolate being created at that
        moment cannot get memory, and V8 aborts the whole process for that (SIGABRT, nothing
        on stderr), which the host could only report as a crash."""
        if self._task is not None:
            await asyncio.wait({self._task})
        while self.finished:  # no preparation came to dispose them
            await self.close(self.finished.pop())

    async def take(self) -> Any:
        if self.ready:
            return self.ready.pop(0)
        return await self.new_isolate()

    async def close(self, isolate: Any) -> None:
        """Dispose ``isolate`` on the engine thread; a child whose isolate cannot be disposed
        in time recycles."""
        try:
            await asyncio.wait_for(off_loop(self.loop, isolate.close), DISPOSE_TIMEOUT_S)
        except TimeoutError:
            self._send(Recycle("the isolate could not be disposed"))
            os._exit(0)
