"""Start a coroutine at once, and make a task only for what is left of it.

The host answers each tool call in a coroutine of its own. As a task, a call whose dispatch
answers without waiting (an async dispatch that has its answer at hand) still cost a task
object and a loop turn before it began. Run eagerly, such a call is answered in the loop
iteration that read it, and a task is made only when the coroutine truly waits. (Python
3.12's ``eager_task_factory`` does this for every task of a loop; this is the same for one
call site, on every supported Python.)
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["start_eagerly"]


def start_eagerly(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run ``coro`` up to its first wait, in a context of its own (as a task would), and
    return the task that runs the rest, or None if it ended there. What it raises in that
    first step propagates to the caller."""
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_Rest(coro, waiting_on), context=context)


class _Rest(Coroutine[Any, Any, None]):
    """What is left of a started coroutine, for a task to run: its first step hands the
    task what the coroutine already waits on; later steps, and a cancellation (even one
    before the task's first step), go to the coroutine itself."""

    __slots__ = ("_coro", "_waiting_on")
    _NOTHING: Any = object()

    def __init__(self, coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on = waiting_on

    def send(self, value: Any) -> Any:
        waiting_on = self._waiting_on
        if waiting_on is not _Rest._NOTHING:
            self._waiting_on = _Rest._NOTHING
            return waiting_on
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._waiting_on = _Rest._NOTHING
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, None]:
        raise TypeError("a started coroutine's rest is for a task to run, not to await")
