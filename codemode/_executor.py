"""``IsolateExecutor``: the embedded default, a pool of isolate children in your process.

Constructing one spawns nothing. The first ``execute`` starts the pool and leaves it warm;
``aclose()`` (alias ``dispose()``), or leaving ``async with``, ends every child. A host that
forgets still leaves no child behind: children die with their host (parent-death signal,
and EOF on their pipe), and an ``atexit`` hook kills any that remain.

:class:`SyncIsolateExecutor` is the same executor for sync hosts: it runs the async core on
a private event-loop thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
import time
from collections.abc import Mapping
from typing import Any

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
)
from ._dispatch import call_dispatch
from ._faults import Disposed, InvalidRequest
from ._outbound import handle_fetch
from ._outcome import Outcome
from ._pool import Pool
from ._protocol import Call, Fetch, Run
from ._request import ResolvedRequest, resolve_request
from ._worker import ActiveRun, NeverStarted, SpawnSettings

__all__ = ["IsolateExecutor", "SyncIsolateExecutor"]


def _pool_config(pool: PoolConfig | Mapping[str, Any] | None) -> PoolConfig:
    if pool is None:
        return PoolConfig()
    if isinstance(pool, PoolConfig):
        return pool
    if isinstance(pool, Mapping):
        unknown = set(pool) - {"max_workers", "max_queue"}
        if unknown:
            raise InvalidRequest(f"pool takes max_workers and max_queue, not {sorted(unknown)}.")
        return PoolConfig(**pool)
    raise InvalidRequest("pool must be a PoolConfig or a mapping with max_workers/max_queue.")


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
        outbound: Any = UNSET,
        modules: Mapping[str, Any] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_log_entries: int = DEFAULT_MAX_LOG_ENTRIES,
        ceilings: Ceilings | None = None,
        child_env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = ExecutorConfig(
            timeout_ms=timeout,
            memory_limit_mb=memory_limit,
            count_host_waits=count_host_waits,
            max_message_bytes=max_message_bytes,
            max_log_entries=max_log_entries,
            pool=_pool_config(pool),
            ceilings=ceilings or Ceilings(),
        )
        if outbound is not UNSET and outbound is not None and not callable(outbound):
            raise InvalidRequest("outbound must be left out, None, or a callable policy.")
        self._outbound = outbound
        self._modules = modules
        self._settings = SpawnSettings(
            memory_limit_mb=memory_limit,
            max_message_bytes=max_message_bytes,
            max_log_entries=max_log_entries,
            env=dict(child_env) if child_env is not None else None,
        )
        self._pool: Pool | None = None
        self._disposed = False
        self._run_ids = itertools.count(1)

    # ---- life cycle ---------------------------------------------------------------

    async def __aenter__(self) -> IsolateExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End every child. Calls waiting in line and runs in flight fail with DISPOSED."""
        self._disposed = True
        if self._pool is not None:
            await self._pool.close()

    dispose = aclose

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the live children (empty before the first execute)."""
        return [] if self._pool is None else self._pool.worker_pids()

    def _ensure_pool(self) -> Pool:
        if self._disposed:
            raise Disposed("The executor was disposed; create a new one to run more programs.")
        if self._pool is None:
            self._pool = Pool(self.config.pool, self._settings)
        return self._pool

    # ---- execute ------------------------------------------------------------------

    async def execute(
        self,
        code: Any = None,
        *,
        providers: Any = None,
        dispatch: Any = None,
        outbound: Any = UNSET,
        modules: Any = UNSET,
        timeout: Any = UNSET,
        count_host_waits: Any = UNSET,
        retain_handles: Any = False,
    ) -> Outcome:
        """Run one program; a program's failure comes back in ``Outcome.error``.

        Raises :class:`ExecutorError` (QUEUE_FULL, WORKER_CRASHED, DISPOSED,
        INVALID_REQUEST, ...) only when the executor itself could not serve the call.
        """
        request = resolve_request(
            self.config,
            code=code,
            providers=providers,
            dispatch=dispatch,
            outbound=outbound,
            modules=modules,
            timeout=timeout,
            count_host_waits=count_host_waits,
            retain_handles=retain_handles,
            default_outbound=self._outbound,
            default_modules=self._modules,
        )
        pool = self._ensure_pool()
        for _attempt in range(3):
            worker = await pool.acquire()
            try:
                return await self._run_on(worker, request)
            except NeverStarted:
                continue
        raise Disposed("No child could take this run; the executor is shutting down.")

    async def _run_on(self, worker: Any, request: ResolvedRequest) -> Outcome:
        loop = asyncio.get_running_loop()
        started_at = time.monotonic()
        network = "none" if request.outbound is None else ("policy" if callable(request.outbound) else "host")
        msg = Run(
            run_id=next(self._run_ids),
            code=request.code,
            providers=request.providers,
            timeout_ms=request.timeout_ms,
            count_host_waits=request.count_host_waits,
            network=network,
            started_at=started_at,
        )
        max_bytes = self.config.max_message_bytes
        deadline = started_at + request.timeout_ms / 1000

        async def on_call(call: Call) -> str:
            return await call_dispatch(request.dispatch, call.provider, call.tool, call.args_json, max_bytes)

        async def on_fetch(fetch: Fetch) -> str:
            # With host waits uncounted, the request gets the run's whole bound of its own.
            if request.count_host_waits:
                limit = deadline
            else:
                limit = time.monotonic() + request.timeout_ms / 1000
            return await handle_fetch(
                fetch.request_json, request.outbound, deadline=limit, max_bytes=max_bytes
            )

        active = ActiveRun(msg=msg, future=loop.create_future(), on_call=on_call, on_fetch=on_fetch)
        worker.begin(active)
        try:
            return await asyncio.shield(active.future)
        except asyncio.CancelledError:
            worker.cancel(active, "The caller stopped waiting for this run.")
            raise


class SyncIsolateExecutor:
    """:class:`IsolateExecutor` for sync hosts: the same arguments, blocking calls.

    ::

        with SyncIsolateExecutor() as executor:
            print(executor.execute(code="async () => 6 * 7").result)  # 42
    """

    def __init__(self, **kwargs: Any) -> None:
        self._async = IsolateExecutor(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="codemode-executor", daemon=True)
        self._thread.start()
        self._closed = False

    def _call(self, coro: Any) -> Any:
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result()

    def execute(self, code: Any = None, **kwargs: Any) -> Outcome:
        if self._closed:
            raise Disposed("The executor was disposed; create a new one to run more programs.")
        result: Outcome = self._call(self._async.execute(code, **kwargs))
        return result

    @property
    def worker_pids(self) -> list[int]:
        return self._async.worker_pids

    def dispose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._call(self._async.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    close = dispose

    def __enter__(self) -> SyncIsolateExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()
