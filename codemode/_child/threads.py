"""The child's threads besides its loop: the engine thread that prepares and disposes of
isolates, and the Python state each isolate's own thread keeps between its callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CallbackThread", "off_loop", "settle"]


class CallbackThread:
    """The Python thread state of an isolate's thread, kept from its first callback to
    its last.

    ctypes runs a callback that comes from a thread Python does not know on a thread state
    made for it and deleted when it returns: an allocation, and an mmap and munmap of a
    frame stack, for every bell and every finished call (a large part of a tool call's
    CPU in the child). One more reference, taken in
    the first callback, keeps the state between callbacks; :meth:`let_go` has the thread's
    last callback drop it, before the thread ends (a thread state that outlives its
    thread is never freed)."""

    def __init__(self) -> None:
        self._held: int | None = None
        self.letting_go = False

    def enter(self) -> None:
        """At the start of each callback (the callback's own reference holds the GIL)."""
        if self._held is None and not self.letting_go:
            self._held = _gil_ensure()

    def leave(self) -> None:
        """At the end of each callback: the last one drops the kept reference."""
        if self.letting_go and self._held is not None:
            _gil_release(self._held)
            self._held = None

    def let_go(self) -> None:
        """Have the thread's next callback, its last, drop the kept reference (the drain's
        answer is that callback, before the context is freed: see :meth:`Isolate.drain_soon`)."""
        if self._held is not None:
            self.letting_go = True


_gil_ensure = ctypes.pythonapi.PyGILState_Ensure
_gil_ensure.restype = ctypes.c_int
_gil_release = ctypes.pythonapi.PyGILState_Release
_gil_release.argtypes = [ctypes.c_int]
_gil_release.restype = None


class _EngineThread:
    """The child's one thread for the engine's blocking steps: preparing isolates (V8
    creating one is the largest single cost of a run) and disposing of them, off the event
    loop.

    A thread of its own, fed through a ``SimpleQueue``, rather than ``asyncio.to_thread``:
    the default executor's way there and back (a concurrent future with its condition and
    lock, the chaining of two futures, a copy of the context) was a tenth of the Python
    calls the loop made per trivial run. Jobs run one at a time, in order: a disposal
    queued behind a preparation waits for it, and a job that never returns is met
    by the caller's own bound (the child then recycles)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = loop.create_future()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._serve, name="codemode-engine", daemon=True)
                    self._thread.start()
        self._jobs.put((loop, future, fn, args))
        return future

    def _serve(self) -> None:
        while True:
            loop, future, fn, args = self._jobs.get()
            result: Any = None
            failure: BaseException | None = None
            try:
                result = fn(*args)
            except BaseException as exc:  # the caller's to raise
                failure = exc
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits
                loop.call_soon_threadsafe(settle, future, result, failure)
            del loop, future, fn, args, result, failure


def settle(future: asyncio.Future[Any], result: Any, failure: BaseException | None) -> None:
    """On the loop: ``result`` or ``failure`` into ``future``, unless it is already done
    (cancelled by a caller that stopped waiting, or an entry the loop resolved itself)."""
    if future.done():
        return
    if failure is None:
        future.set_result(result)
    else:
        future.set_exception(failure)


_engine_thread = _EngineThread()


def off_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` on the child's engine thread (see :class:`_EngineThread`): a future of
    ``loop`` for its value."""
    return _engine_thread.submit(loop, fn, *args)
