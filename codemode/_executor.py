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
import hashlib
import itertools
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ._bulk import BulkResults, Jobs, RetryArg, SyncBulkResults, iterate_sync, map_jobs, map_jobs_ordered
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
from ._dispatch import CallMessage, Dispatcher, RunThreads, dispatch_threads
from ._faults import Disposed, ExecutorError, InvalidRequest, QueueFull, WorkerCrashed
from ._handles import (
    DEFAULT_HANDLE_IDLE_TTL_S,
    HandleTable,
    plain_request,
    response_outcome_result,
)
from ._host.pool import Pool
from ._host.turns import Turns
from ._live import LiveLogs
from ._outbound import handle_fetch
from ._outcome import Outcome
from ._protocol import Fetch, Invoke, Run
from ._request import (
    Dispatch,
    ResolvedRequest,
    check_modules,
    check_outbound,
    resolve_request,
    resolve_timeout,
)
from ._source.bundle import build_module_bundle
from ._source.module_map import normalize_modules
from ._source.normalize import entry_form_problem
from ._source.transform import rewrite_dynamic_imports
from ._texts import ENTRY_FORM
from ._worker import ActiveRun, NeverStarted, SpawnSettings
from .metrics.tally import PoolCensus, Tally

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ._outbound import OutboundPolicy

__all__ = ["IsolateExecutor", "SyncIsolateExecutor"]

_BUNDLE_CACHE = 32
"""Distinct module maps whose bundles an executor keeps built."""
MAX_FETCHES_IN_FLIGHT = 16
"""Requests one run has in flight through the host at once; more wait their turn (on the
run's clock). 5,000 at once took the host's event loop for so long that a 20 s run
settled 16 s late."""


def _network(outbound: Any) -> str:
    """The outbound state a child is told for one run (``Run.network``): no network, every
    request through the host's policy, or the executor's own network (fetched by the host)."""
    if outbound is None:
        return "none"
    return "policy" if callable(outbound) else "host"


def _timed_call(dispatcher: Dispatcher, tally: Tally) -> Callable[[CallMessage], Awaitable[str]]:
    """``dispatcher.call``, each call's latency and outcome counted (metrics on)."""

    async def call(message: CallMessage) -> str:
        started = time.monotonic()
        envelope = await dispatcher.call(message)
        tally.tool_done(envelope, started)
        return envelope

    return call


def _timed_forward(
    dispatcher: Dispatcher, tally: Tally | None
) -> Callable[[CallMessage, Callable[[str], object]], None]:
    """``dispatcher.forward``, each call's latency and outcome counted when metrics are on."""
    if tally is None:
        return dispatcher.forward

    def forward(message: CallMessage, answer: Callable[[str], object]) -> None:
        started = time.monotonic()

        def answered(envelope: str) -> None:
            tally.tool_done(envelope, started)
            answer(envelope)

        dispatcher.forward(message, answered)

    return forward


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
        self._outbound = outbound
        self._modules = check_modules(modules)
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
        self._run_ids = itertools.count(1)
        workers = self.config.pool.max_workers
        if max_handles is None:
            max_handles = max(1, workers - 1)
        # Each retained handle holds a child of the pool: there cannot be more than children.
        check_int("max_handles", max_handles, minimum=0, maximum=workers, unit=" (at most pool.max_workers)")
        self._handles = HandleTable(max_handles, check_handle_idle_ttl(handle_idle_ttl))
        self._bundles: dict[str, str] = {}
        self._dispatch_threads = dispatch_threads(self.config.pool.max_workers)
        self._tally: Tally | None = None
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
            self._tally = tally
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
        return [] if self._pool is None else self._pool.worker_pids()

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
            self._pool.tally = self._tally
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
        tally = self._tally
        if tally is None:
            return await self._execute(
                code, inputs, providers, dispatch, outbound, modules, timeout, count_host_waits,
                retain_handles, on_log, None,
            )  # fmt: skip
        started = time.monotonic()
        try:
            outcome = await self._execute(
                code, inputs, providers, dispatch, outbound, modules, timeout, count_host_waits,
                retain_handles, on_log, tally,
            )  # fmt: skip
        except ExecutorError as exc:
            tally.job_fault(exc.code, started)
            raise
        tally.job_done(outcome, started)
        return outcome

    async def _execute(
        self,
        code: str,
        inputs: JSONValue | Unset,
        providers: Sequence[ProviderSpec] | None,
        dispatch: Dispatch | None,
        outbound: OutboundPolicy | Unset | None,
        modules: Mapping[str, ModuleSource] | Unset | None,
        timeout: float | Unset | None,
        count_host_waits: bool | Unset | None,
        retain_handles: bool,
        on_log: LogCallback | None,
        tally: Tally | None,
    ) -> Outcome:
        live = None if on_log is None else LiveLogs(on_log)
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
            inputs=inputs,
            default_outbound=self._outbound,
            default_modules=self._modules,
        )
        bundle_key, bundle, code = self._modules_for(request)
        if entry_form_problem(request.code):
            # Code like `1) || (2` would close the executor's parentheses itself: refuse it
            # as the program's own error, before any child is involved.
            return Outcome(error=ENTRY_FORM)
        pool = self._ensure_pool()
        if request.retain_handles and self._handles.live_count() >= self._handles.max_handles:
            raise QueueFull(
                f"This executor already retains {self._handles.live_count()} handles "
                f"(max_handles={self._handles.max_handles}); release one before retaining "
                "another. Nothing ran."
            )
        attempts = 4 * self.config.pool.max_workers + 4
        waited_from = time.monotonic() if tally is not None else 0.0
        for attempt in range(attempts):
            worker = await pool.acquire(admitted=attempt > 0)
            if tally is not None:
                tally.queue_wait.observe(time.monotonic() - waited_from)
            try:
                outcome = await self._run_on(worker, request, code, bundle_key, bundle, live)
            except NeverStarted:
                continue  # that child recycled before taking the run: nothing ran
            except BaseException:
                if live is not None:
                    live.close()
                raise
            if live is not None:
                await live.delivered()
            return outcome
        raise WorkerCrashed(
            f"No child could take this run: {attempts} children in a row recycled before "
            "starting it. Nothing ran; retry later.",
            started=False,
        )

    def _modules_for(self, request: ResolvedRequest) -> tuple[str, str | None, str]:
        """The run's module bundle (built once per distinct map) and its code with every
        ``import(`` pointed at the bundle's loader. No modules and no ``import(``: nothing."""
        code = rewrite_dynamic_imports(request.code)
        specs = normalize_modules(request.modules) if request.modules else {}
        if code == request.code:
            return "", None, code  # nothing can reach a loader: the isolate needs none
        key = hashlib.sha256(
            msgspec.json.encode(sorted((s.specifier, s.type, s.source) for s in specs.values()))
        ).hexdigest()
        bundle = self._bundles.get(key)
        if bundle is None:
            bundle = build_module_bundle(specs)
            if len(self._bundles) >= _BUNDLE_CACHE:
                self._bundles.pop(next(iter(self._bundles)))
            self._bundles[key] = bundle
        return key, bundle, code

    async def _run_on(
        self,
        worker: Any,
        request: ResolvedRequest,
        code: str,
        bundle_key: str,
        bundle: str | None,
        live: LiveLogs | None = None,
    ) -> Outcome:
        started_at = time.monotonic()
        network = _network(request.outbound)
        send_bundle = bundle if bundle_key and bundle_key not in worker.known_bundles else None
        msg = Run(
            run_id=next(self._run_ids),
            code=code,
            providers=request.providers,
            timeout_ms=request.timeout_ms,
            count_host_waits=request.count_host_waits,
            network=network,
            started_at=started_at,
            retain=request.retain_handles,
            modules_key=bundle_key,
            modules_bundle=send_bundle,
            inputs_json=request.inputs_json,
            stream_logs=live is not None,
        )
        if bundle_key:
            worker.known_bundles.add(bundle_key)
        outcome = await self._drive(worker, request, msg, live)
        if outcome.handle is not None:
            self._handles.add(outcome.handle, worker, request)
        return outcome

    async def _drive(
        self, worker: Any, request: ResolvedRequest, msg: Run | Invoke, live: LiveLogs | None = None
    ) -> Outcome:
        """Hand one run (or invocation) to its worker and serve its calls until it ends."""
        loop = asyncio.get_running_loop()
        started_at = msg.started_at
        max_bytes = self.config.max_message_bytes
        deadline = started_at + msg.timeout_ms / 1000

        threads = RunThreads(self._dispatch_threads)
        dispatcher = Dispatcher(request.dispatch, max_bytes, threads)

        fetch_slots = Turns(MAX_FETCHES_IN_FLIGHT)

        async def on_fetch(fetch: Fetch) -> str:
            async with fetch_slots:
                # With host waits uncounted, the request gets the run's whole bound of its own.
                if msg.count_host_waits:
                    limit = deadline
                else:
                    limit = time.monotonic() + msg.timeout_ms / 1000
                return await handle_fetch(
                    fetch.request_json, request.outbound, deadline=limit, max_bytes=max_bytes
                )

        tally = self._tally
        active = ActiveRun(
            msg=msg,
            future=loop.create_future(),
            on_call=dispatcher.call if tally is None else _timed_call(dispatcher, tally),
            on_fetch=on_fetch,
            forward=None if not dispatcher.forwards else _timed_forward(dispatcher, tally),
            on_log=None if live is None else live.entry,
        )
        worker.begin(active)
        try:
            # Awaited as it is, not shielded: a shield costs every run one more turn of the
            # loop. A caller that stops waiting cancels the future with it; the worker then
            # drops what the run still sends and releases an isolate it would have retained.
            return await active.future
        except asyncio.CancelledError:
            worker.cancel(active, "The caller stopped waiting for this run.")
            raise
        finally:
            threads.shutdown(wait=False)  # the run is over for its caller: drop calls in line

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
        record = self._handles.get(handle)
        request_json = plain_request(request)
        timeout_ms = resolve_timeout(self.config, timeout, record.request.timeout_ms)
        async with record.lock:
            record = self._handles.get(handle)  # it may have died while we waited
            base = record.request
            network = _network(base.outbound)
            msg = Invoke(
                run_id=next(self._run_ids),
                handle_id=int(record.id),
                request_json=request_json,
                timeout_ms=timeout_ms,
                count_host_waits=base.count_host_waits,
                network=network,
                started_at=time.monotonic(),
            )
            outcome = await self._drive(record.worker, base, msg)
            self._handles.touch(record)
        if outcome.error is None:
            return Outcome(result=response_outcome_result(outcome.result), logs=outcome.logs)
        return outcome

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
