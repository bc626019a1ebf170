"""The pool of child processes behind one executor.

::

    execute ─▶ acquire() ─ idle child ─▶ ChildProcess.begin(Run) ══pipe══▶ child ─▶ isolate
                  │ none idle: wait for a child that is starting, else in line
                  │            (at most pool.max_queue callers past the starting children)
                  │ line full: QUEUE_FULL at once, nothing ran
    Done ─▶ child idle ─▶ next caller in line
    child exits (crash, kill, planned recycle) ─▶ its run alone fails ─▶ slot respawned
                                                   (the standby child adopted)

Slots are numbered from 1; a replacement keeps its slot's number, so "Worker 1" in a
fault names the same place across restarts. The first ``acquire`` starts every slot; the
pool stays warm until ``close``.

With ``pool.standby`` (the default) the pool also keeps one standby child once its slots
are full: started with V8 loaded, holding no isolate, pinned to no core, serving nothing.
A slot whose child exits adopts it (its slot and core travel in ``Adopt``; it prepares
and answers Ready), and a new standby starts in the background. Starting a child costs
an interpreter, its imports and the engine; adopting one costs the isolate preparation
alone. A standby that dies is not a fault (no caller had it): the next replacement
starts a child from scratch and a standby after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections import deque
from typing import Any

from .._config import PoolConfig
from .._faults import Disposed, ExecutorError, QueueFull, WorkerCrashed
from ..metrics.tally import PoolCensus, Tally, exit_cause
from .child import ChildProcess
from .spawn import SpawnSettings

__all__ = ["Pool"]

log = logging.getLogger("codemode.pool")

_LIVE_PIDS: set[int] = set()
"""Every child pid of every pool in this process, killed at interpreter exit."""


def kill_all_children() -> None:
    for pid in list(_LIVE_PIDS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _LIVE_PIDS.clear()


import atexit  # noqa: E402

atexit.register(kill_all_children)


class Pool:
    def __init__(self, config: PoolConfig, settings: SpawnSettings) -> None:
        self.config = config
        self.settings = settings
        self._slots: dict[int, ChildProcess | None] = {i: None for i in range(1, config.max_workers + 1)}
        self._starting: set[int] = set()
        self._spawning: set[ChildProcess] = set()
        self._idle: deque[ChildProcess] = deque()
        self._waiters: deque[asyncio.Future[ChildProcess]] = deque()
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._standby: ChildProcess | None = None
        """The spare child a slot adopts when its own exits (``pool.standby``)."""
        self._standby_starting = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tally: Tally | None = None
        """The executor's metrics, when they are on: children that exit are counted here."""

    # ---- children -----------------------------------------------------------------

    def _fill(self) -> None:
        for slot, child in self._slots.items():
            if child is None and slot not in self._starting and not self._closed:
                self._starting.add(slot)
                self._background(self._spawn(slot))

    def _background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _spawn(self, slot: int) -> None:
        standby, self._standby = self._standby, None
        if standby is not None and standby.alive:
            child = standby
        else:
            child = ChildProcess(slot, self.settings, self._on_exit, self._offer)
        self._spawning.add(child)
        try:
            if child is standby:
                child.adopt(slot)
            else:
                await child.start()
                if child.pid is not None:
                    _LIVE_PIDS.add(child.pid)
            await child.wait_ready()
        except ExecutorError as exc:
            self._spawning.discard(child)
            await child.wait_exit(2.0)
            if child is standby and not self._closed:
                await self._spawn(slot)  # the standby died before it was ready: start cold
                return
            self._starting.discard(slot)
            self._fail_one_waiter(exc)
            return
        except asyncio.CancelledError:
            self._spawning.discard(child)
            child.kill()
            raise
        except Exception as exc:
            self._spawning.discard(child)
            child.kill()
            self._starting.discard(slot)
            self._fail_one_waiter(
                WorkerCrashed(f"Worker {slot} failed to start.", causes=(f"{type(exc).__name__}: {exc}",))
            )
            return
        self._spawning.discard(child)
        self._starting.discard(slot)
        if not self.settings.probed:
            self.settings = dataclasses.replace(self.settings, probed=True)
        if self._closed:
            child.shutdown()
            return
        self._slots[slot] = child
        self._offer(child)
        self._keep_standby()

    def _keep_standby(self) -> None:
        """Start the standby child, once every slot has its child (they come first)."""
        if (
            self.config.standby
            and self._standby is None
            and not self._standby_starting
            and not self._starting
            and not self._closed
        ):
            self._standby_starting = True
            self._background(self._start_standby())

    async def _start_standby(self) -> None:
        child = ChildProcess(0, self.settings, self._on_exit, self._offer, standby=True)
        self._spawning.add(child)
        try:
            await child.start()
        except Exception as exc:  # no caller waits on it: the next replacement starts cold
            log.warning("the standby child could not start (%s)", exc)
            return
        finally:
            self._spawning.discard(child)
            self._standby_starting = False
        if child.pid is not None:
            _LIVE_PIDS.add(child.pid)
        if self._closed:
            child.kill()
            return
        self._standby = child

    def _fail_one_waiter(self, exc: ExecutorError) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(exc)
                break
        if self._waiters and not self._closed:
            self._fill()  # the others still wait: try again for them

    def _offer(self, child: ChildProcess) -> None:
        """A child is free: give it to the first caller in line, else park it."""
        if not child.alive or self._closed:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(child)
                return
        self._idle.append(child)

    def _on_exit(self, child: ChildProcess) -> None:
        if child.pid is not None:
            _LIVE_PIDS.discard(child.pid)
        if child is self._standby:
            self._standby = None  # it served nothing: not a crash, and nothing to replace
            log.info("the standby child exited")
            return
        if self._slots.get(child.id) is child:
            self._slots[child.id] = None
        with contextlib.suppress(ValueError):
            self._idle.remove(child)
        returncode = child.proc.returncode if child.proc is not None else None
        if self._closed:  # stopped by close(): nothing to replace
            log.debug("child %s stopped (the pool is closing)", child.id)
            return
        if child.recycling or returncode == 0 or not child.ready.done():
            log.info("child %s exited (planned); replacing it", child.id)
        else:
            log.warning("child %s exited unexpectedly (status %s); replacing it", child.id, returncode)
        if self.tally is not None:
            ready = child.ready.done() and not child.ready.cancelled() and child.ready.exception() is None
            self.tally.child_exited(
                exit_cause(
                    planned=child.recycling,
                    ready=ready,
                    out_of_memory=child.stderr.said_out_of_memory,
                    returncode=returncode,
                )
            )
        self._fill()

    # ---- callers ------------------------------------------------------------------

    def _coming_free(self) -> int:
        """Slots that will take the first caller in line with no run of a caller ending:
        their child is starting (or replacing one that exited), or it is finishing the
        cleanup of a run whose caller already has its outcome (held until it says Idle).
        A child that retains a handle is not among them: it serves that handle's caller."""
        return sum(
            1
            for child in self._slots.values()
            if child is None or (child.held and child.run is None and child.retained is None)
        )

    async def acquire(self, *, admitted: bool = False) -> ChildProcess:
        """A child for one run: an idle one, else a place in line.

        Admission: at most ``max_workers`` runs in flight plus ``max_queue`` callers waiting.
        A caller waiting for a child that is starting (or cleaning up after a run that is
        over) takes that child's capacity, not a place in line, so a cold pool (or one
        replacing a child) admits what a warm one does. ``admitted``: the caller was admitted already and its child recycled before
        taking its run (nothing ran); it is not refused now."""
        if self._closed:
            raise Disposed("The executor was disposed; create a new one to run more programs.")
        self.loop = asyncio.get_running_loop()
        while self._idle:
            child = self._idle.popleft()
            if child.alive:
                return child
        coming_free = self._coming_free()
        if not admitted and len(self._waiters) >= self.config.max_queue + coming_free:
            raise QueueFull(
                f"Every child is busy and the line is full: {self.config.max_workers} runs "
                f"in flight or starting (pool.max_workers={self.config.max_workers}) and "
                f"{len(self._waiters) - coming_free} calls waiting "
                f"(pool.max_queue={self.config.max_queue}); nothing ran. Retry later or raise "
                "the bound."
            )
        self._fill()
        waiter: asyncio.Future[ChildProcess] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._offer(waiter.result())
            raise

    def census(self) -> PoolCensus:
        """Children by state and callers in line, now (read by a metrics scrape, from any
        thread: lengths only, nothing that iterates what the loop changes)."""
        idle = len(self._idle)
        present = sum(1 for child in tuple(self._slots.values()) if child is not None)
        return PoolCensus(
            busy=max(0, present - idle),
            idle=idle,
            starting=len(self._starting),
            waiting=len(self._waiters),
            admission_limit=self.config.max_workers + self.config.max_queue,
        )

    def child_pids(self) -> list[int]:
        return [c.pid for c in self._slots.values() if c is not None and c.pid is not None]

    def children(self) -> list[ChildProcess]:
        return [c for c in self._slots.values() if c is not None]

    def _standby_list(self) -> list[ChildProcess]:
        return [] if self._standby is None else [self._standby]

    def standby_pid(self) -> int | None:
        """The standby child's pid once it is loaded and waiting (a slot adopts one that is
        still loading too: it is further along than a new child)."""
        standby = self._standby
        return standby.pid if standby is not None and standby.alive and standby.waiting else None

    def kill_now(self) -> None:
        """End every child at once, without the event loop that started them."""
        self._closed = True
        for child in self.children() + list(self._spawning) + self._standby_list():
            if child.pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child.pid, signal.SIGKILL)
                _LIVE_PIDS.discard(child.pid)
            # Its transports belong to a loop that may be closed: garbage collection must
            # not try to schedule their closing on it.
            child.forget_loop()

    async def close(self) -> None:
        """End every child; calls in line fail with DISPOSED, runs in flight too."""
        if self._closed:
            return
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(
                    Disposed("The executor was disposed while this call waited; nothing ran.")
                )
        starting = list(self._tasks)
        for task in starting:
            task.cancel()
        children = self.children() + list(self._spawning) + self._standby_list()
        self._standby = None
        self._spawning.clear()
        for child in children:
            active = child.run
            if active is not None and not active.future.done():
                active.future.set_exception(
                    Disposed(
                        "The executor was disposed during this run; the program had started.", started=True
                    )
                )
            if child.ready.done():
                child.shutdown()
            else:
                child.kill()
        await asyncio.gather(*(c.wait_exit(2.0) for c in children), return_exceptions=True)
        if starting:
            # Let the cancelled starts finish (their child is gone): a start left pending
            # when the loop closes is destroyed mid-await, and Python complains at exit.
            await asyncio.wait(starting, timeout=2.0)
        for child in children:
            if child.pid is not None:
                _LIVE_PIDS.discard(child.pid)
        self._idle.clear()
