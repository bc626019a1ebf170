"""Every private asyncio API the host relies on, in one place.

What it relies on (CPython's own asyncio, 3.11 on; :func:`check` names whichever piece an
installed Python lacks, and ``tests/test_private_apis.py`` runs it):

* ``asyncio.tasks._enter_task(loop, task)`` and ``asyncio.tasks._leave_task(loop, task)``:
  make a task the loop's current task, and stop it being so; the calls asyncio's own eager
  tasks make. The eager starter (``eager.py``) runs a tool call's first step under a
  stand-in task with them. A Python without them gets a task per call (:data:`enter_task`
  and :data:`leave_task` are then None): slower, the same behaviour.
* ``Task._log_destroy_pending``: cleared on the parked stand-in, so a loop closed under it
  does not log a pending task destroyed (:func:`quiet_when_destroyed_pending`).
* ``Future._asyncio_future_blocking``: what ``Future.__await__`` sets before it yields the
  future to its task; the stand-in, a coroutine written by hand, parks its task on a future
  the same way (:func:`park_on`).
* ``asyncio.subprocess.Process._transport`` and ``asyncio.StreamReader._transport``: the
  transports under a child's process handle and under the reader of its stderr.
* The unix pipe transports' ``_pipe`` (the file object they own: once it is None, neither
  ``close`` nor ``__del__`` touches a loop) and the subprocess transport's ``_closed`` (set:
  its ``close`` and ``__del__`` do nothing). :func:`detach_transport` uses them when the
  loop that owns a child's pipes is gone (``ChildProcess.forget_loop``).

These are read where they are used, in the same few operations as before they were
gathered here: the per-call path keeps direct references (:data:`enter_task`).
"""

from __future__ import annotations

import asyncio
import asyncio.base_subprocess
import asyncio.subprocess
import asyncio.unix_events
import contextlib
from collections.abc import Callable
from typing import Any

__all__ = [
    "check",
    "detach_transport",
    "enter_task",
    "leave_task",
    "park_on",
    "process_transport",
    "quiet_when_destroyed_pending",
    "reader_transport",
]

_TaskSwitch = Callable[[asyncio.AbstractEventLoop, "asyncio.Task[Any]"], None]

enter_task: _TaskSwitch | None = getattr(asyncio.tasks, "_enter_task", None)
"""``asyncio.tasks._enter_task``, or None on a Python without it."""

leave_task: _TaskSwitch | None = getattr(asyncio.tasks, "_leave_task", None)
"""``asyncio.tasks._leave_task``, or None on a Python without it."""


def quiet_when_destroyed_pending(task: asyncio.Task[Any]) -> None:
    """A task parked on purpose: no "Task was destroyed but it is pending!" if its loop
    closes under it."""
    task._log_destroy_pending = False  # type: ignore[attr-defined]


def park_on(future: asyncio.Future[Any]) -> asyncio.Future[Any]:
    """``future`` marked as ``Future.__await__`` marks it, for a hand-written coroutine to
    yield to its task: the task then waits until the future is done."""
    future._asyncio_future_blocking = True
    return future


def process_transport(proc: asyncio.subprocess.Process | None) -> asyncio.SubprocessTransport | None:
    """The subprocess transport under an ``asyncio`` process handle (None if it has none)."""
    return getattr(proc, "_transport", None)


def reader_transport(reader: asyncio.StreamReader | None) -> asyncio.BaseTransport | None:
    """The transport a stream reader reads from (None if it has none)."""
    return getattr(reader, "_transport", None)


def detach_transport(transport: Any, *, close_pipe: bool) -> None:
    """Leave ``transport`` closed without its loop: with ``close_pipe``, the file object it
    owns is closed here and forgotten (a pipe transport); in any case it is marked closed,
    so a later ``close`` or garbage collection does not reach for the loop."""
    pipe = getattr(transport, "_pipe", None)
    if pipe is not None and close_pipe:
        with contextlib.suppress(OSError):
            pipe.close()
        transport._pipe = None
    transport._closed = True


def _assigns(function: Any, name: str) -> bool:
    """Whether a pure-Python ``__init__`` names the attribute ``name``."""
    code = getattr(function, "__code__", None)
    return code is not None and name in code.co_names


def check() -> list[str]:
    """A sentence for each internal listed in the module's docstring that this Python
    lacks (an empty list: all present). Cheap: nothing is started."""
    problems: list[str] = []
    for name in ("_enter_task", "_leave_task"):
        if not callable(getattr(asyncio.tasks, name, None)):
            problems.append(f"asyncio.tasks has no function {name}: each tool call gets a task of its own.")
    if not hasattr(asyncio.Task, "_log_destroy_pending"):
        problems.append("asyncio.Task has no attribute _log_destroy_pending.")
    if not hasattr(asyncio.Future, "_asyncio_future_blocking"):
        problems.append("asyncio.Future has no attribute _asyncio_future_blocking.")
    if not _assigns(asyncio.subprocess.Process.__init__, "_transport"):
        problems.append("asyncio.subprocess.Process keeps no _transport.")
    if not _assigns(asyncio.StreamReader.__init__, "_transport"):
        problems.append("asyncio.StreamReader keeps no _transport.")
    for cls_name in ("_UnixReadPipeTransport", "_UnixWritePipeTransport"):
        cls = getattr(asyncio.unix_events, cls_name, None)
        if cls is None or not _assigns(cls.__init__, "_pipe"):
            problems.append(f"asyncio.unix_events has no {cls_name} that keeps its _pipe.")
    if not _assigns(asyncio.base_subprocess.BaseSubprocessTransport.__init__, "_closed"):
        problems.append("asyncio.base_subprocess.BaseSubprocessTransport keeps no _closed flag.")
    return problems
