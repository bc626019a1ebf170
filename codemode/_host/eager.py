"""Run a coroutine's first step at once, as a task, without making a task for it.

The host answers each tool call with a coroutine (the dispatch, then the reply). A task
made for it runs its first step a loop turn later, and that task and turn were a large part
of the host's share of a call (``benchmarks/instructions.py --what host`` measures it);
Python 3.12's eager tasks still make one task per call.

:class:`EagerStarter` runs the first step at once, in a context of its own, with a
*stand-in* as the current task: a real task of the starter's, parked. Code that asks for
its current task finds it, so ``asyncio.timeout``, anyio's cancel scopes, sniffio and so
httpx work in a dispatch as in any task. A coroutine that finishes in that step (a dispatch
with its answer at hand) needs nothing more. One that waits is handed to the stand-in,
which goes on with it from where it waited, in the same context; whatever took note of its
current task in the first step (a timeout that will cancel it) has the task that runs it
to the end. A fresh stand-in takes the next call.

What differs from a task of one's own: calls that finish in their first step share the
stand-in as their current task, and a done-callback one of them adds to it runs when the
stand-in ends, not when the call does.

This uses ``asyncio.tasks._enter_task`` / ``_leave_task`` (the same calls asyncio's own
eager tasks make), through ``asyncio_internals.py``; a Python without them gets a task per
coroutine.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any

from .asyncio_internals import enter_task, leave_task, park_on, quiet_when_destroyed_pending

__all__ = ["EagerStarter"]

_current_task = asyncio.current_task

_NOTHING: Any = object()

_Job = tuple[Coroutine[Any, Any, None], contextvars.Context]


class _StandIn(collections.abc.Coroutine[Any, Any, None]):
    """The coroutine of a parked task whose identity eager first steps borrow, until one
    of them waits: then the task goes on with that one.

    Written out as a coroutine object rather than an ``async def``: a task can be
    cancelled before its first step, and Python throws that into an ``async def`` before
    any of its code runs, where nothing could hand it to the job. Here every step, the
    first included, sees whether it has a job: ``send`` and ``throw`` go to the job's
    coroutine, in the job's context, once the job's first wait has been given to the task."""

    __slots__ = ("job", "task", "waited_on", "wake")

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
        self.job: _Job | None = None
        self.waited_on: Any = _NOTHING
        """What the job yielded at its first wait, until the task has been given it."""
        self.wake: asyncio.Future[None] = loop.create_future()
        self.task: asyncio.Task[None] = loop.create_task(self, name=name)
        # Parked and holding nothing until it takes a job: a loop closed under it is no leak.
        quiet_when_destroyed_pending(self.task)

    def take(self, coro: Coroutine[Any, Any, None], context: contextvars.Context, waited_on: Any) -> None:
        self.job, self.waited_on = (coro, context), waited_on
        if not self.wake.done():
            self.wake.set_result(None)

    def send(self, sent: Any) -> Any:
        job = self.job
        if job is None:
            return park_on(self.wake)  # park: the task waits on it
        waited_on = self.waited_on
        if waited_on is not _NOTHING:
            self.waited_on = _NOTHING
            return waited_on  # the job's first wait, now the task's
        coro, context = job
        return context.run(coro.send, sent)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = typ if val is None else val
        if isinstance(exc, type):
            exc = exc()
        job = self.job
        if job is None:
            raise exc  # never needed (its starter closed it, or its loop is going)
        self.waited_on = _NOTHING  # (the job wakes with this instead)
        coro, context = job
        return context.run(coro.throw, exc)

    def close(self) -> None:
        if self.job is not None:
            self.job[0].close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("a stand-in runs as its own task; it is not awaited")


class EagerStarter:
    """Starts coroutines on one loop, each one's first step at once (see the module)."""

    __slots__ = ("_loop", "_name", "_stand_in")

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
        self._loop = loop
        self._name = name
        self._stand_in: _StandIn | None = None

    def start(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Run ``coro`` up to its first wait, now. Returns None if it finished there, else
        the task that goes on with it. From a callback of the loop or from a task (which
        is the current task again when this returns), as asyncio's own eager tasks do."""
        loop = self._loop
        if enter_task is None or leave_task is None:
            return loop.create_task(coro)
        stand_in = self._stand_in
        if stand_in is None:
            stand_in = self._stand_in = _StandIn(loop, self._name)
        task = stand_in.task
        context = contextvars.copy_context()
        outer = _current_task(loop)
        if outer is not None:
            leave_task(loop, outer)
        enter_task(loop, task)
        try:
            waited_on = context.run(coro.send, None)
        except (StopIteration, asyncio.CancelledError):
            return None
        except Exception as exc:  # as a task would: reported, not raised into the caller
            loop.call_exception_handler(
                {"message": "Exception in a coroutine started eagerly", "exception": exc}
            )
            return None
        finally:
            leave_task(loop, task)
            if outer is not None:
                enter_task(loop, outer)
        stand_in.take(coro, context, waited_on)
        self._stand_in = None  # it is this coroutine's task now; the next call gets a new one
        return task

    def close(self) -> None:
        """Let the parked stand-in go (the coroutines already handed on are not touched)."""
        stand_in, self._stand_in = self._stand_in, None
        if stand_in is not None and not self._loop.is_closed():
            stand_in.task.cancel()
