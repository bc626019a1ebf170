"""A run's life cycle in the in-process executor: from a resolved request to its outcome.

::

    execute(...) ─▶ resolve the request ─▶ module bundle ─▶ pool.acquire() ─▶ a child
        ─▶ Run frame ─▶ its calls served (dispatch threads, fetches) ─▶ Outcome
        the child recycled before it took the run (NeverStarted): nothing ran, next child

A retained handle's invocation takes the same path on the child that holds the handle.
:class:`Runs` belongs to one :class:`~codemode.IsolateExecutor`; the executor keeps the
pool's life cycle, the metrics and the public API.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import msgspec

from .._config import UNSET, ExecutorConfig, Unset
from .._contract import JSONValue, LogCallback, ModuleSource, ProviderSpec
from .._dispatch import CallMessage, Dispatcher, RunThreads
from .._faults import QueueFull, WorkerCrashed
from .._handles import HandleTable, plain_request, response_outcome_result
from .._live import LiveLogs
from .._outbound import handle_fetch
from .._outcome import Outcome
from .._positions import in_raw_text
from .._protocol import Fetch, Invoke, Run
from .._request import Dispatch, ResolvedRequest, resolve_request, resolve_timeout
from .._source.bundle import build_module_bundle
from .._source.module_map import normalize_modules
from .._source.normalize import entry_form_problem
from .._source.transform import rewrite_dynamic_imports
from .._texts import ENTRY_FORM
from .calls import ActiveRun
from .child import ChildProcess, NeverStarted
from .pool import Pool
from .turns import Turns

if TYPE_CHECKING:
    from .._outbound import OutboundPolicy
    from ..metrics.tally import Tally

__all__ = ["MAX_FETCHES_IN_FLIGHT", "Runs"]

_BUNDLE_CACHE = 32
"""Distinct module maps whose bundles an executor keeps built."""
MAX_FETCHES_IN_FLIGHT = 16
"""Requests one run has in flight through the host at once; more wait their turn (on the
run's clock). Thousands at once took the host's event loop for so long that a run settled
late by most of its bound."""


def _network(outbound: Any) -> str:
    """The outbound state a child is told for one run (``Run.network``): no network, every
    request through the host's policy, or the executor's own network (fetched by the host)."""
    if outbound is None:
        return "none"
    return "policy" if callable(outbound) else "host"


def _ms_since(started: float) -> float:
    """Milliseconds of the host's monotonic clock since ``started`` (``Outcome.duration_ms``)."""
    return round((time.monotonic() - started) * 1000, 3)


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


class Runs:
    """The runs of one executor: each request resolved, placed on a child, served to its end."""

    def __init__(
        self,
        config: ExecutorConfig,
        *,
        outbound: OutboundPolicy | Unset | None,
        modules: Mapping[str, ModuleSource] | None,
        handles: HandleTable,
        dispatch_threads: ThreadPoolExecutor,
        pool: Callable[[], Pool],
    ) -> None:
        self.config = config
        self._outbound = outbound
        self._modules = modules
        self.handles = handles
        self._dispatch_threads = dispatch_threads
        self._pool = pool
        """The executor's pool, started by the first run (raises DISPOSED once it is closed)."""
        self._run_ids = itertools.count(1)
        self._bundles: dict[str, str] = {}
        self.tally: Tally | None = None
        """The executor's metrics, once they are on."""

    async def execute(
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
        """One run of ``IsolateExecutor.execute``, handed to another child as long as the
        one it got recycled before taking it (nothing ran)."""
        called_at = time.monotonic()
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
        given = code  # a NormalizedCode: error positions are told in the model's text
        bundle_key, bundle, code = self._modules_for(request)
        if entry_form_problem(request.code):
            # Code like `1) || (2` would close the executor's parentheses itself: refuse it
            # as the program's own error, before any child is involved.
            return Outcome(error=ENTRY_FORM, duration_ms=_ms_since(called_at))
        pool = self._pool()
        handles = self.handles
        if request.retain_handles and handles.live_count() >= handles.max_handles:
            raise QueueFull(
                f"This executor already retains {handles.live_count()} handles "
                f"(max_handles={handles.max_handles}); release one before retaining "
                "another. Nothing ran."
            )
        attempts = 4 * self.config.pool.max_workers + 4
        waited_from = time.monotonic() if tally is not None else 0.0
        for attempt in range(attempts):
            child = await pool.acquire(admitted=attempt > 0)
            if tally is not None:
                tally.queue_wait.observe(time.monotonic() - waited_from)
            try:
                outcome = await self._run_on(child, request, code, bundle_key, bundle, called_at, live)
            except NeverStarted:
                continue  # that child recycled before taking the run: nothing ran
            except BaseException:
                if live is not None:
                    live.close()
                raise
            if live is not None:
                await live.delivered()
            return in_raw_text(outcome, given)
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
        child: ChildProcess,
        request: ResolvedRequest,
        code: str,
        bundle_key: str,
        bundle: str | None,
        called_at: float,
        live: LiveLogs | None = None,
    ) -> Outcome:
        started_at = time.monotonic()
        network = _network(request.outbound)
        send_bundle = bundle if bundle_key and bundle_key not in child.known_bundles else None
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
            child.known_bundles.add(bundle_key)
        outcome = await self._drive(child, request, msg, called_at, live)
        if outcome.handle is not None:
            self.handles.add(outcome.handle, child, request)
        return outcome

    async def _drive(
        self,
        child: ChildProcess,
        request: ResolvedRequest,
        msg: Run | Invoke,
        called_at: float,
        live: LiveLogs | None = None,
    ) -> Outcome:
        """Hand one run (or invocation) to its child and serve its calls until it ends; the
        outcome carries its metadata (the time since ``called_at``, its tool calls, the
        child)."""
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

        tally = self.tally
        active = ActiveRun(
            msg=msg,
            future=loop.create_future(),
            on_call=dispatcher.call if tally is None else _timed_call(dispatcher, tally),
            on_fetch=on_fetch,
            forward=None if not dispatcher.forwards else _timed_forward(dispatcher, tally),
            on_log=None if live is None else live.entry,
        )
        child.begin(active)
        try:
            # Awaited as it is, not shielded: a shield costs every run one more turn of the
            # loop. A caller that stops waiting cancels the future with it; the child then
            # drops what the run still sends and releases an isolate it would have retained.
            outcome = await active.future
        except asyncio.CancelledError:
            child.cancel(active, "The caller stopped waiting for this run.")
            raise
        finally:
            threads.shutdown(wait=False)  # the run is over for its caller: drop calls in line
        return msgspec.structs.replace(
            outcome,
            duration_ms=_ms_since(called_at),
            tool_calls=dispatcher.calls,
            ran_on=f"child {child.id} (pid {child.pid})",
        )

    async def invoke(
        self, handle: str, request: Mapping[str, object], timeout: float | Unset | None = UNSET
    ) -> Outcome:
        """One invocation of a retained handler (``IsolateExecutor.invoke_handle``)."""
        called_at = time.monotonic()
        record = self.handles.get(handle)
        request_json = plain_request(request)
        timeout_ms = resolve_timeout(self.config, timeout, record.request.timeout_ms)
        async with record.lock:
            record = self.handles.get(handle)  # it may have died while we waited
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
            outcome = await self._drive(record.child, base, msg, called_at)
            self.handles.touch(record)
        if outcome.error is None:
            return msgspec.structs.replace(
                outcome, result=response_outcome_result(outcome.result), handle=None
            )
        return outcome
