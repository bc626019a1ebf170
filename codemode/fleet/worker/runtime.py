"""The worker process's runtime: one event loop thread owning the isolate pool, the Redis
client and the job runner. Celery's pool threads hand jobs to it (see below).

::

    consumer thread: Celery's Request (strategy.py, request.py) ─▶ a pool thread
    pool thread: the task body ─ run_job(job) ─▶ loop thread: JobRunner.run ─▶ IsolateExecutor
    pool thread ◀─ JobEnd (summary, fault code) ─┘               (spawned children run V8)
    revoke (remote control) ─ revoke(job id) ─▶ loop thread: the job ends with CANCELLED

The worker process itself never loads V8: isolates run in children the executor spawns
(never forks), so the worker stays safe to fork and to run under any Celery pool that does
not fork it (threads or solo).

The isolate pool has ``concurrency + max_handles`` children: retained handles never take the
children jobs run on. The loop also runs :meth:`JobRunner.keep_alive` (this worker's liveness
keys; the handles of hosts that are gone are released), from start until close.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..._config import UNSET, Ceilings
from ..._executor import IsolateExecutor
from ..errors import BROKER_ERRORS
from ..redis.client import make_client
from ..redis.keys import worker_queue
from ..settings import BrokerSettings, WorkerSettings
from .gate import StartGate
from .job import JobEnd
from .metrics import FleetTally, WorkerMetrics
from .runner import JobRunner

__all__ = ["WorkerRuntime"]

log = logging.getLogger("codemode.fleet.worker")

T = TypeVar("T")

WARM_UP_CODE = "() => 0"
STOP_TIMEOUT_S = 15.0


class WorkerRuntime:
    """Start once per worker process (``start``), run jobs from any thread, ``close`` at exit."""

    def __init__(self, settings: BrokerSettings, worker: WorkerSettings) -> None:
        self.settings = settings
        self.worker = worker
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.queue = worker_queue(self.worker_id)
        """The queue only this worker consumes (invocations of the handles it holds)."""
        self._keep_alive: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: JobRunner | None = None
        self._executor: IsolateExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._closing = False
        self._jobs: set[concurrent.futures.Future[JobEnd]] = set()
        """Jobs submitted and not yet ended: ``close`` lets them end first."""
        self.tally = FleetTally()
        """The fleet's counts on this worker (``metrics.py``), kept whether or not served."""
        self.gate = StartGate(self._has_free_slot)
        """Where Celery's consumer thread waits for a job it handed over to start (``gate.py``)."""
        self.metrics: WorkerMetrics | None = None
        """The metrics server (``--metrics-port``), once started."""

    def start(self) -> None:
        """Start the loop thread and warm the isolate pool (idempotent, thread-safe)."""
        with self._lock:
            if self._loop is not None:
                return
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="codemode-worker-loop", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            asyncio.run_coroutine_threadsafe(self._setup(), loop).result()
            if self.worker.metrics_port and self._executor is not None:
                self.metrics = WorkerMetrics.serve(
                    self.worker.metrics_port, self._executor, self.tally, self.settings
                )
        log.info("codemode worker %s: isolate pool of %d ready", self.worker_id, self.worker.concurrency)

    async def _setup(self) -> None:
        w = self.worker
        self._executor = IsolateExecutor(
            memory_limit=w.memory_limit_mb,
            max_message_bytes=w.max_message_bytes,
            pool={
                "max_workers": w.concurrency + w.max_handles,
                "max_queue": w.concurrency,
                "pin_cpus": w.pin_cpus,
                "standby": w.standby,
            },
            outbound=None if w.network == "none" else UNSET,
            ceilings=Ceilings(max_timeout_ms=w.max_timeout_ms),
            max_handles=w.max_handles,
            handle_idle_ttl=w.handle_idle_ttl_s,
        )
        outcome = await self._executor.execute(WARM_UP_CODE)
        if outcome.error is not None:
            raise RuntimeError(f"the isolate pool failed its warm-up run: {outcome.error}")
        client = make_client(self.settings)
        self._runner = JobRunner(self._executor, client, self.settings, self.worker_id, self.gate)
        self._runner.tally = self.tally
        self._keep_alive = asyncio.ensure_future(self._runner.keep_alive())

    def submit(self, job: Any) -> concurrent.futures.Future[JobEnd]:
        """Start one job on the loop, from any thread; the future ends with the job and
        holds how it ended. Raises ``RuntimeError`` once the worker is closing (the
        job's message, left unacked, goes back to the queue)."""
        self.start()
        with self._lock:
            if self._closing:
                raise RuntimeError("this worker is shutting down; the job was not started")
            assert self._loop is not None and self._runner is not None
            future = asyncio.run_coroutine_threadsafe(self._runner.run(job), self._loop)
            self._jobs.add(future)
        future.add_done_callback(self._jobs.discard)
        return future

    def _has_free_slot(self) -> bool:
        return len(self._jobs) < self.worker.concurrency

    def call(self, work: Callable[[IsolateExecutor], Coroutine[Any, Any, T]]) -> T:
        """Run ``work`` with this worker's isolate pool on the loop and wait for its end,
        from a Celery pool thread (the canvas task, ``canvas.py``)."""
        self.start()
        assert self._loop is not None and self._executor is not None
        return asyncio.run_coroutine_threadsafe(work(self._executor), self._loop).result()

    def run_job(self, job: Any) -> JobEnd:
        """Run one job to its end; returns how it ended."""
        return self.submit(job).result()

    def revoke(self, job_id: str) -> None:
        """End the job ``job_id`` with CANCELLED, from any thread: now if it runs here, or
        as it starts."""
        loop, runner = self._loop, self._runner
        if loop is None or runner is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing runs
            loop.call_soon_threadsafe(runner.revoke, job_id)

    def cancel_unstarted(self, job: Any) -> None:
        """Tell the host of ``job`` (its data), revoked before it started, that it never
        will (CANCELLED, ``started=False``), from any thread."""
        loop, runner = self._loop, self._runner
        if loop is None or runner is None:
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(runner.cancel_unstarted(job), loop)

    def drain(self) -> None:
        """Take no more jobs, and let the running ones end: each is bounded by its own
        deadline, at most the worker's ``max_timeout_ms`` (a warm shutdown, before Celery
        closes its connection, so their messages are acked)."""
        with self._lock:
            self._closing = True
            running = list(self._jobs)
        if running:
            log.info("codemode worker %s: letting %d running job(s) end", self.worker_id, len(running))
            concurrent.futures.wait(running, self.worker.max_timeout_ms / 1000 + STOP_TIMEOUT_S)

    def close(self) -> None:
        """Let the running jobs end (``drain``), then end the isolate pool and the loop."""
        self.drain()
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        with self._lock:
            if self._closed or self._loop is None:
                self._closed = True
                return
            self._closed = True
            loop = self._loop
        try:
            asyncio.run_coroutine_threadsafe(self._teardown(), loop).result(STOP_TIMEOUT_S)
        except Exception:
            log.exception("codemode worker: teardown failed")
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    async def _teardown(self) -> None:
        if self._keep_alive is not None:
            self._keep_alive.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._keep_alive
        if self._runner is not None:
            with contextlib.suppress(*BROKER_ERRORS, asyncio.TimeoutError):
                async with asyncio.timeout(2.0):
                    await self._runner.forget()
        if self._executor is not None:
            await self._executor.aclose()
        if self._runner is not None:
            await self._runner.links.aclose()
            await self._runner.client.aclose()
