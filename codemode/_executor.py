"""``IsolateExecutor``: the embedded default, a pool of isolate children in your process.

Constructing one spawns nothing. The first ``execute`` starts the pool and leaves it warm;
``aclose()`` (alias ``dispose()``), or leaving ``async with``, ends every child. A host that
forgets still leaves no child behind: children die with their host (parent-death signal,
and EOF on their pipe), and an ``atexit`` hook kills any that remain.

The executor keeps the pool's life cycle, the metrics and the public API; a run's life
cycle (placement on a child, its calls, another child when one recycled before taking it)
is ``_host/runs.py``. :class:`~codemode.SyncIsolateExecutor` (``_sync_executor.py``) is the
same executor for sync hosts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._bulk import BulkResults, Jobs, RetryArg, map_jobs, map_jobs_ordered
from ._config import (
    DEFAULT_COUNT_HOST_WAITS,
    DEFAULT_MAX_LOG_ENTRIES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MEMORY_LIMIT_MB,
    DEFAULT_TIMEOUT_MS,
    UNSET,
    Ceilings,
    ExecutorConfig,
    PoolConfig,
    Unset,
    check_child_env,
    check_handle_idle_ttl,
    check_int,
    config_object,
)
from ._contract import JSONValue, LogCallback, ModuleSource, ProviderSpec
from ._dispatch import dispatch_threads
from ._faults import Disposed, ExecutorError, InvalidRequest
from ._handles import DEFAULT_HANDLE_IDLE_TTL_S, HandleTable
from ._host.pool import Pool
from ._host.runs import Runs
from ._host.spawn import SpawnSettings
from ._outcome import Outcome
from ._request import Dispatch, check_modules, check_outbound
from .metrics.tally import PoolCensus, Tally

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ._outbound import OutboundPolicy

__all__ = ["IsolateExecutor"]


class IsolateExecutor:
    """Run programs in fresh V8 isolates inside a pool of supervised child processes.

    ::

        async with IsolateExecutor(timeout=5_000, memory_limit=128,
                                   pool={"max_workers": 2, "max_queue": 100}) as executor:
            outcome = await executor.execute(code="async () => 6 * 7")
            assert outcome.result == 42
    """

    def __init__(
        self,
        *,
        timeout: int = DEFAULT_TIMEOUT_MS,
        memory_limit: int = DEFAULT_MEMORY_LIMIT_MB,
        count_host_waits: bool = DEFAULT_COUNT_HOST_WAITS,
        pool: PoolConfig | Mapping[str, Any] | None = None,
        outbound: OutboundPolicy | Unset | None = UNSET,
        modules: Mapping[str, ModuleSource] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_log_entries: int = DEFAULT_MAX_LOG_ENTRIES,
        ceilings: Ceilings | Mapping[str, Any] | None = None,
        child_env: Mapping[str, str] | None = None,
        max_handles: int | None = None,
        handle_idle_ttl: float = DEFAULT_HANDLE_IDLE_TTL_S,
    ) -> None:
        # Every option is checked here, before anything starts: a mistake in one is
        # INVALID_REQUEST naming it, never a child that fails (a retryable fault) later.
        self.config = ExecutorConfig(
            timeout_ms=timeout,
            memory_limit_mb=memory_limit,
            count_host_waits=count_host_waits,
            max_message_bytes=max_message_bytes,
            max_log_entries=max_log_entries,
            pool=config_object("pool", PoolConfig, pool),
            ceilings=config_object("ceilings", Ceilings, ceilings),
        )
        check_outbound(outbound)
        default_modules = check_modules(modules)
        self._settings = SpawnSettings(
            memory_limit_mb=memory_limit,
            max_message_bytes=max_message_bytes,
            max_log_entries=max_log_entries,
            env=check_child_env(child_env),
            pin_cpus=self.config.pool.pin_cpus,
        )
        self._pool: Pool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._disposed = False
        max_workers = self.config.pool.max_workers
        if max_handles is None:
            max_handles = max(1, max_workers - 1)
        # Each retained handle holds a child of the pool: there cannot be more than children.
        check_int(
            "max_handles", max_handles, minimum=0, maximum=max_workers, unit=" (at most pool.max_workers)"
        )
        self._handles = HandleTable(max_handles, check_handle_idle_ttl(handle_idle_ttl))
        self._dispatch_threads = dispatch_threads(max_workers)
        self._runs = Runs(
            self.config,
            outbound=outbound,
            modules=default_modules,
            handles=self._handles,
            dispatch_threads=self._dispatch_threads,
            pool=self._ensure_pool,
        )
        self._metrics_registry: CollectorRegistry | None = None

    # ---- metrics ------------------------------------------------------------------

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """This executor's Prometheus metrics (``prometheus_client.CollectorRegistry``),
        for the host to serve (docs/observability.md). Counting starts when this is first
        read; it needs ``pip install 'codemode[metrics]'``."""
        if self._metrics_registry is None:
            from .metrics import registry_of

            tally = Tally(self._census)
            self._metrics_registry = registry_of(tally)
            self._runs.tally = tally
            if self._pool is not None:
                self._pool.tally = tally
        return self._metrics_registry

    def _census(self) -> PoolCensus | None:
        pool = self._pool
        return None if pool is None else pool.census()

    # ---- life cycle ---------------------------------------------------------------

    async def __aenter__(self) -> IsolateExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End every child. Calls waiting in line and runs in flight fail with DISPOSED."""
        self._disposed = True
        self._handles.close()
        self._dispatch_threads.shutdown(wait=False, cancel_futures=True)
        if self._pool is None:
            return
        if self._loop is not asyncio.get_running_loop():
            # The pool's loop is gone (or elsewhere): its transports cannot be awaited from
            # here, but its children can still be ended.
            self._pool.kill_now()
            return
        await self._pool.close()

    dispose = aclose

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the live children (empty before the first execute)."""
        return [] if self._pool is None else self._pool.child_pids()

    @property
    def standby_pid(self) -> int | None:
        """The pid of the standby child waiting to replace one that exits (``pool.standby``),
        if one is waiting now."""
        return None if self._pool is None else self._pool.standby_pid()

    def _ensure_pool(self) -> Pool:
        if self._disposed:
            raise Disposed("The executor was disposed; create a new one to run more programs.")
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = Pool(self.config.pool, self._settings)
            self._pool.tally = self._runs.tally
            self._loop = loop
        elif self._loop is not loop:
            raise InvalidRequest(
                "This IsolateExecutor belongs to the event loop that first used it (its children "
                "are that loop's subprocesses). Create one executor per event loop, or use "
                "SyncIsolateExecutor from code that starts a new loop per call."
            )
        return self._pool

    # ---- execute ------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        inputs: JSONValue | Unset = UNSET,
        providers: Sequence[ProviderSpec] | None = None,
        dispatch: Dispatch | None = None,
        outbound: OutboundPolicy | Unset | None = UNSET,
        modules: Mapping[str, ModuleSource] | Unset | None = UNSET,
        timeout: float | Unset | None = UNSET,
        count_host_waits: bool | Unset | None = UNSET,
        retain_handles: bool = False,
        on_log: LogCallback | None = None,
    ) -> Outcome:
        """Run one program; a program's failure comes back in ``Outcome.error``.

        ``inputs`` (JSON data) is passed to the entry function as its one argument.
        ``on_log`` is told of each log entry as the program writes it (see
        :class:`LiveLogs`); the entries are in ``Outcome.logs`` too.

        Raises :class:`ExecutorError` (QUEUE_FULL, WORKER_CRASHED, DISPOSED,
        INVALID_REQUEST, ...) only when the executor itself could not serve the call.
        """
        runs = self._runs
        tally = runs.tally
        if tally is None:
            return await runs.execute(
                code, inputs, providers, dispatch, outbound, modules, timeout, count_host_waits,
                retain_handles, on_log, None,
            )  # fmt: skip
        started = time.monotonic()
        try:
            outcome = await runs.execute(
                code, inputs, providers, dispatch, outbound, modules, timeout, count_host_waits,
                retain_handles, on_log, tally,
            )  # fmt: skip
        except ExecutorError as exc:
            tally.job_fault(exc.code, started)
            raise
        tally.job_done(outcome, started)
        return outcome

    # ---- handles ------------------------------------------------------------------

    async def invoke_handle(
        self, handle: str, request: Mapping[str, object], *, timeout: float | Unset | None = UNSET
    ) -> Outcome:
        """Pass ``request`` (method, url, headers, body) to a retained request handler.

        Returns an Outcome whose ``result`` is the response as data: ``{"status",
        "statusText", "headers", "body"}`` (body as text). A handler that throws, times out
        or runs out of memory comes back in ``error`` like any run; a bound hit during an
        invocation also releases the handle. Raises HANDLE_LOST / HANDLE_EXPIRED.
        """
        if self._disposed:
            raise Disposed("The executor was disposed; its handles are gone.")
        return await self._runs.invoke(handle, request, timeout)

    async def release_handle(self, handle: str) -> None:
        """Dispose a retained isolate; its child serves ordinary runs again."""
        self._handles.release(handle)

    # ---- bulk ---------------------------------------------------------------------

    @property
    def bulk_window(self) -> int:
        """Runs ``map`` keeps in flight unless told otherwise: every child busy and one more
        waiting for each (within ``pool.max_queue``), so no child waits for the next run."""
        pool = self.config.pool
        return pool.max_workers + min(pool.max_workers, pool.max_queue)

    def map(
        self, jobs: Jobs, *, concurrency: int | None = None, retry: RetryArg = UNSET, **options: object
    ) -> BulkResults:
        """Run every job and yield ``(key, Outcome | ExecutorError)`` in completion order.

        ``jobs`` is an iterable or async iterable of :class:`codemode.Job` (or program
        strings, keyed by their index), pulled only as runs end; ``options`` are
        ``execute``'s keywords for every job. QUEUE_FULL is waited out, other faults go
        through ``retry`` (default: :class:`codemode.RetryPolicy`). See docs/bulk.md.
        """
        return map_jobs(self, jobs, concurrency=concurrency, retry=retry, options=options)

    def map_ordered(
        self, jobs: Jobs, *, concurrency: int | None = None, retry: RetryArg = UNSET, **options: object
    ) -> BulkResults:
        """:meth:`map`, yielding in input order (a bounded buffer holds results that
        finish early)."""
        return map_jobs_ordered(self, jobs, concurrency=concurrency, retry=retry, options=options)
