"""The call that starts a run (or invokes a retained handler), as the loop sees it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .threads import settle

if TYPE_CHECKING:
    from .engine import Isolate

__all__ = ["Entry", "settle_entry"]


def settle_entry(entry: Entry, task: asyncio.Task[Any]) -> None:
    """An entry that ran as a task (several feeds): its outcome, on its future."""
    if task.cancelled():
        entry.future.cancel()
    else:
        settle(entry.future, None, task.exception())


class Entry:
    """The call that starts a run or invokes a retained handler, as the loop sees it.

    Its return is kept off the loop: the isolate's thread notes it (see
    :meth:`Isolate._entry_returned`), and the loop is woken for it only if the call failed
    or the loop waits for it (:meth:`wait_for_return`). A run's result comes through the
    journal and the take, never through this call, so the usual run learns of its return
    when it looks (:meth:`done`): the call used to be a task of its own, whose return cost
    every run a wake of the loop, a future and the task's steps."""

    __slots__ = ("_isolate", "future", "notify", "returned", "task")

    def __init__(self, isolate: Isolate, future: asyncio.Future[None]) -> None:
        self.future = future
        self._isolate = isolate
        self.returned = False
        """Set on the isolate's thread, under the isolate's pump lock."""
        self.notify = False
        """The loop waits for the return: the isolate's thread wakes it (under the lock)."""
        self.task: asyncio.Task[Any] | None = None
        """An entry whose payload takes several feeds runs as this task instead."""

    def done(self) -> bool:
        """Whether the call has returned (or was stopped); on the loop."""
        return self._resolve_if_returned(notify=False)

    def notify_on_return(self) -> None:
        """Have the call's return resolve :attr:`future` on the loop (it may already have)."""
        self._resolve_if_returned(notify=True)

    def _resolve_if_returned(self, *, notify: bool) -> bool:
        """Resolve :attr:`future` if the isolate's thread saw the call return (``notify``:
        else have it wake the loop when it does); whether the future is done. An entry
        that runs as a task resolves its future itself."""
        if self.future.done():
            return True
        if self.task is not None:
            return False
        with self._isolate._pump_lock:
            self.notify = self.notify or notify
            returned = self.returned
        if returned:
            self.future.set_result(None)
        return returned

    async def wait_for_return(self) -> None:
        """Wait until the call has returned; raises what stopped it."""
        self.notify_on_return()
        await self.future

    def cancel(self) -> None:
        """Stop the call if it still runs (mini-racer terminates the program) and cancel its
        future: its return, if it comes, is ignored."""
        if self.task is not None:
            self.task.cancel()
        else:
            self._isolate._cancel_entry(self)
        self.future.cancel()
