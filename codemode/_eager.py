"""Start a coroutine's task eagerly where Python can: up to its first wait, at once.

The host answers each tool call in a task of its own. A task that Python schedules runs
its first step a loop turn later: an async dispatch that has its answer at hand still cost
that turn and its bookkeeping. Python 3.12+ can start a task eagerly
(``asyncio.Task(..., eager_start=True)``): the coroutine runs at once, *as the current
task* (so ``asyncio.timeout``, anyio and httpx inside a dispatch work as in any task), and
a task that finished there is never scheduled. On 3.11 the task is scheduled as usual.
(Running the coroutine's first step by hand, without a task, is not an option: code that
asks for its current task finds none.)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

__all__ = ["EAGER", "start_task"]

EAGER = sys.version_info >= (3, 12)
"""Whether tasks started here run their first step at once."""


def start_task(coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
    """A task for ``coro`` on ``loop``, the running loop (passed: on 3.11, asking for the
    running loop costs a ``getpid`` system call), started eagerly where Python can (it may
    be done already when this returns)."""
    if EAGER:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return loop.create_task(coro)
