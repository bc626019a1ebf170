"""``SyncIsolateExecutor``: :class:`~codemode.IsolateExecutor` for sync hosts.

It runs the async core on a private event-loop thread; every call blocks until the core
answers. The dispatch, ``on_log`` and the jobs of ``map`` run on that thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._bulk import Jobs, RetryArg, SyncBulkResults, iterate_sync
from ._config import (
    DEFAULT_COUNT_HOST_WAITS,
    DEFAULT_MAX_LOG_ENTRIES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MEMORY_LIMIT_MB,
    DEFAULT_TIMEOUT_MS,
    UNSET,
    Ceilings,
    PoolConfig,
    Unset,
)
from ._contract import JSONValue, LogCallback, ModuleSource, ProviderSpec
from ._executor import IsolateExecutor
from ._faults import Disposed
from ._handles import DEFAULT_HANDLE_IDLE_TTL_S
from ._outcome import Outcome
from ._request import Dispatch

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ._outbound import OutboundPolicy

__all__ = ["SyncIsolateExecutor"]


class SyncIsolateExecutor:
    """:class:`IsolateExecutor` for sync hosts: the same arguments, blocking calls.

    ::

        with SyncIsolateExecutor() as executor:
            print(executor.execute(code="async () => 6 * 7").result)  # 42
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
        self._async = IsolateExecutor(
            timeout=timeout,
            memory_limit=memory_limit,
            count_host_waits=count_host_waits,
            pool=pool,
            outbound=outbound,
            modules=modules,
            max_message_bytes=max_message_bytes,
            max_log_entries=max_log_entries,
            ceilings=ceilings,
            child_env=child_env,
            max_handles=max_handles,
            handle_idle_ttl=handle_idle_ttl,
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="codemode-executor", daemon=True)
        self._thread.start()
        self._closed = False

    def _call(self, coro: Any) -> Any:
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result()

    def execute(
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
        """:meth:`IsolateExecutor.execute`, blocking. ``on_log`` and the dispatch are
        called on the executor's own thread."""
        if self._closed:
            raise Disposed("The executor was disposed; create a new one to run more programs.")
        result: Outcome = self._call(
            self._async.execute(
                code,
                inputs=inputs,
                providers=providers,
                dispatch=dispatch,
                outbound=outbound,
                modules=modules,
                timeout=timeout,
                count_host_waits=count_host_waits,
                retain_handles=retain_handles,
                on_log=on_log,
            )
        )
        return result

    def invoke_handle(
        self, handle: str, request: Mapping[str, object], *, timeout: float | Unset | None = UNSET
    ) -> Outcome:
        result: Outcome = self._call(self._async.invoke_handle(handle, request, timeout=timeout))
        return result

    def release_handle(self, handle: str) -> None:
        self._call(self._async.release_handle(handle))

    def map(
        self, jobs: Jobs, *, concurrency: int | None = None, retry: RetryArg = UNSET, **options: object
    ) -> SyncBulkResults:
        """:meth:`IsolateExecutor.map` as a blocking iterator (the jobs are pulled on the
        executor's own thread). Leaving the loop early cancels the runs in flight."""
        return iterate_sync(
            self._loop, self._async.map(jobs, concurrency=concurrency, retry=retry, **options)
        )

    def map_ordered(
        self, jobs: Jobs, *, concurrency: int | None = None, retry: RetryArg = UNSET, **options: object
    ) -> SyncBulkResults:
        """:meth:`map` in input order."""
        return iterate_sync(
            self._loop, self._async.map_ordered(jobs, concurrency=concurrency, retry=retry, **options)
        )

    @property
    def worker_pids(self) -> list[int]:
        return self._async.worker_pids

    @property
    def standby_pid(self) -> int | None:
        return self._async.standby_pid

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """:attr:`IsolateExecutor.metrics_registry`."""
        return self._async.metrics_registry

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
