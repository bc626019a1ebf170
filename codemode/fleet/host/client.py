"""``FleetExecutor``: the in-process executor's contract, served by Celery workers over Redis.

Moving from :class:`codemode.IsolateExecutor` changes the constructor and no call::

    async with FleetExecutor(redis_url="redis://redis:6379/0") as executor:
        outcome = await executor.execute(code, providers=..., dispatch=..., timeout=2_000)

One ``execute``::

    validate (INVALID_REQUEST) ─▶ build the job's Celery message (with ``expires``)
      ─▶ admit and enqueue it in one script (QUEUE_FULL: nothing enqueued)
      ─▶ JobSession.wait(): serve tool calls and outbound hops from the up channel until
         Finished (the Outcome) or a fault

Every job of this executor shares one ``redis.asyncio`` connection pool and one host
heartbeat key; the dispatch and the outbound policy run here, in the host, never in a worker.

Retained handles (``retain_handles=True``): the worker that ran the job keeps the isolate,
and ``invoke_handle`` / ``release_handle`` send jobs of kind ``invoke`` / ``release`` to that
worker's own queue; each is served like any job (its own reply channel, the creating
request's dispatch and policy here). See ``handles.py``.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..._bulk import BulkResults, Jobs, RetryArg, map_jobs, map_jobs_ordered
from ..._config import (
    DEFAULT_COUNT_HOST_WAITS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT_MS,
    UNSET,
    Ceilings,
    ExecutorConfig,
    Unset,
    check_int,
    config_object,
)
from ..._contract import JSONValue, LogCallback, ModuleSource, ProviderSpec
from ..._dispatch import dispatch_threads
from ..._faults import (
    Disposed,
    HandleExpired,
    HandleLost,
    InvalidRequest,
    WorkerCrashed,
)
from ..._handles import plain_request
from ..._live import LiveLogs
from ..._outcome import Outcome
from ..._positions import in_raw_text
from ..._request import Dispatch, check_modules, check_outbound, resolve_request, resolve_timeout
from ..errors import BROKER_ERRORS, broker_unreachable
from ..redis.keys import worker_key, worker_queue
from ..settings import WORKER_QUEUE_PREFIX, BrokerSettings
from ..wire import (
    HANDLES_SCHEMA_VERSION,
    INPUTS_SCHEMA_VERSION,
    JOB_SCHEMA_VERSION,
    MAX_FLEET_REQUEST_BYTES,
    MAX_QUEUE_MESSAGE_BYTES,
    Network,
)
from .connection import HostConnection
from .handles import HostHandle, HostHandles, worker_gone_text

if TYPE_CHECKING:
    from ..._outbound import OutboundPolicy

__all__ = ["FleetExecutor"]

HOST_SYNC_RUNS = 8
"""Jobs whose sync dispatch calls can all run at their per-run bound at once (the size of
the host's threads for them: see ``RunThreads``)."""


BULK_WINDOW = 16
"""Jobs ``map`` keeps in flight unless told otherwise (within ``fleet_max_jobs``)."""


def _json_data(modules: Mapping[str, Any]) -> dict[str, Any]:
    try:
        data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(dict(modules)))
    except (TypeError, msgspec.EncodeError):
        raise InvalidRequest("modules must be plain JSON data to travel to a worker.") from None
    return data


MAX_QUEUE_TIMEOUT_MS = 300_000
"""The longest ``queue_timeout``: ``settings.MAX_JOB_SECONDS`` (which the visibility
timeout must exceed) counts five minutes of waiting in the queue."""
MAX_FLEET_JOBS = 1_000_000
"""The largest ``max_jobs``: each admitted job holds an entry in the admission set and may
hold a connection of the host's pool while it runs."""


def _fleet_overrides(
    redis_url: object, queue_timeout: object, max_jobs: object, queue: object
) -> dict[str, Any]:
    """The fleet options given to the constructor, checked, as BrokerSettings fields."""
    overrides: dict[str, Any] = {}
    if redis_url is not None:
        if not isinstance(redis_url, str) or not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidRequest(
                f"redis_url must be a redis://, rediss:// or unix:// URL, got {redis_url!r}."
            )
        overrides["redis_url"] = redis_url
    if queue_timeout is not None:
        overrides["queue_timeout_ms"] = check_int(
            "queue_timeout", queue_timeout, maximum=MAX_QUEUE_TIMEOUT_MS, unit=" (ms)"
        )
    if max_jobs is not None:
        overrides["fleet_max_jobs"] = check_int("max_jobs", max_jobs, maximum=MAX_FLEET_JOBS)
    if queue is not None:
        if (
            not isinstance(queue, str)
            or not queue
            or any(ch.isspace() or not ch.isprintable() for ch in queue)
            or queue.startswith(WORKER_QUEUE_PREFIX)
        ):
            raise InvalidRequest(
                "queue must be a non-empty name without whitespace or control characters, "
                f"not starting with {WORKER_QUEUE_PREFIX!r} (a worker's own queue), got {queue!r}."
            )
        overrides["queue"] = queue
    return overrides


def _check_queue_carries(ceilings: Ceilings) -> None:
    """Refuse a request ceiling the fleet's queue cannot carry: a request the in-process
    executor would run must not be refused by the fleet only once it is sent."""
    if ceilings.max_request_bytes > MAX_FLEET_REQUEST_BYTES:
        raise InvalidRequest(
            f"ceilings.max_request_bytes={ceilings.max_request_bytes} is more than the fleet can "
            f"carry: a worker takes queue messages of at most {MAX_QUEUE_MESSAGE_BYTES} bytes, "
            f"which hold a request of at most {MAX_FLEET_REQUEST_BYTES} bytes (base64 in the "
            f"envelope, with room for the headers). Set max_request_bytes to at most "
            f"{MAX_FLEET_REQUEST_BYTES}."
        )


class FleetExecutor:
    """Run programs on a fleet of Celery workers; the same ``execute`` as IsolateExecutor.

    ``redis_url`` defaults to ``CODEMODE_REDIS_URL``. ``timeout``, ``count_host_waits``,
    ``outbound``, ``modules``, ``max_message_bytes`` and ``ceilings`` mean what they mean
    for :class:`codemode.IsolateExecutor`; ``memory_limit``, the isolate pool and the
    bounds on retained handles (``max_handles``, the idle TTL) are each worker's own.
    Fleet-only: ``queue_timeout`` (ms a job may wait for a worker before it fails with
    JOB_EXPIRED), ``max_jobs`` (the fleet-wide admission bound), ``queue``, and
    ``on_job_id``: called with each job's id before the job is enqueued, in the caller's
    task (a context variable set around ``execute`` tells which call it is). The id is the
    Celery task id that ``celery inspect``, Flower and ``celery control revoke`` show.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        timeout: int = DEFAULT_TIMEOUT_MS,
        count_host_waits: bool = DEFAULT_COUNT_HOST_WAITS,
        outbound: Any = UNSET,
        modules: Mapping[str, Any] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        ceilings: Ceilings | Mapping[str, Any] | None = None,
        queue_timeout: int | None = None,
        max_jobs: int | None = None,
        queue: str | None = None,
        settings: BrokerSettings | None = None,
        on_job_id: Callable[[str], object] | None = None,
    ) -> None:
        # Every option is checked here, before anything connects: a mistake in one is
        # INVALID_REQUEST naming it, never a retryable fault later.
        overrides = _fleet_overrides(redis_url, queue_timeout, max_jobs, queue)
        if settings is not None and not isinstance(settings, BrokerSettings):
            raise InvalidRequest(
                f"settings must be a codemode.fleet.settings.BrokerSettings or None, got {type(settings).__name__}."
            )
        try:
            base = settings if settings is not None else BrokerSettings.from_env()
            self.settings = dataclasses.replace(base, **overrides)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"fleet settings: {exc}") from None
        self.config = ExecutorConfig(
            timeout_ms=timeout,
            count_host_waits=count_host_waits,
            max_message_bytes=max_message_bytes,
            ceilings=config_object("ceilings", Ceilings, ceilings),
        )
        _check_queue_carries(self.config.ceilings)
        check_outbound(outbound)
        self._outbound = outbound
        if on_job_id is not None and not callable(on_job_id):
            raise InvalidRequest(
                f"on_job_id must be a callable taking the job id, got {type(on_job_id).__name__}."
            )
        self._modules = check_modules(modules)
        if self._modules is not None:
            _json_data(self._modules)
        self.host_id = uuid.uuid4().hex
        self._dispatch_threads = dispatch_threads(HOST_SYNC_RUNS)
        self._connection = HostConnection(
            self.settings,
            self.host_id,
            max_message_bytes=self.config.max_message_bytes,
            dispatch_threads=self._dispatch_threads,
            on_job_id=on_job_id,
        )
        self._handles = HostHandles()
        self._disposed = False

    # ---- life cycle -----------------------------------------------------------------

    async def __aenter__(self) -> FleetExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop: calls in flight fail with DISPOSED, their jobs are cancelled, the host's
        heartbeat key is deleted and the connection pool closed. The workers release this
        host's retained handles when they see the heartbeat key gone."""
        if self._disposed:
            return
        self._disposed = True
        self._handles.close()
        self._dispatch_threads.shutdown(wait=False, cancel_futures=True)
        await self._connection.aclose()

    dispose = aclose

    # ---- execute --------------------------------------------------------------------

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
        """Run one program on a worker; a program's failure comes back in ``Outcome.error``.

        ``inputs`` and ``on_log`` as in ``IsolateExecutor.execute``: the inputs travel with
        the job, and each log entry comes up the job's reply channel as it is written.

        Raises :class:`codemode.ExecutorError` when the fleet could not serve the call:
        QUEUE_FULL and BROKER_UNREACHABLE at submit (nothing enqueued), JOB_EXPIRED (queued
        past ``queue_timeout``, never started), WORKER_CRASHED (``started=True``),
        HOST_GONE, DISPOSED, INVALID_REQUEST.
        """
        if self._disposed:
            raise Disposed("The executor was disposed; create a new one to run more programs.")
        for candidate in (modules, self._modules):
            # Modules travel to a worker as JSON: refuse anything else as INVALID_REQUEST
            # before the core measures them (it would raise TypeError on such data).
            if isinstance(candidate, Mapping):
                _json_data(candidate)
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
        live = None if on_log is None else LiveLogs(on_log)
        module_data = None if request.modules is None else _json_data(request.modules)
        network: Network = (
            "none" if request.outbound is None else "default" if request.outbound is UNSET else "host"
        )
        fields: dict[str, Any] = {
            "v": HANDLES_SCHEMA_VERSION if request.retain_handles else JOB_SCHEMA_VERSION,
            "code": request.code,
            "providers": request.providers,
            "network": network,
            "modules": module_data,
            "timeout_ms": request.timeout_ms,
            "count_host_waits": request.count_host_waits,
            "retain": request.retain_handles,
        }
        if request.inputs_json is not None:
            fields["v"] = INPUTS_SCHEMA_VERSION
            fields["inputs_json"] = request.inputs_json
        if live is not None:
            fields["stream_logs"] = True
        called_at = time.monotonic()
        try:
            session, outcome = await self._connection.submit(
                request, self.settings.queue, fields, on_log=None if live is None else live.entry
            )
        except BaseException:
            if live is not None:
                live.close()
            raise
        if live is not None:
            await live.delivered()
        outcome = session.with_metadata(outcome, called_at)
        if outcome.handle is not None:
            self._handles.add(
                outcome.handle,
                worker=session.worker,
                prefix=self.settings.key_prefix,
                request=request,
                network=network,
            )
        return in_raw_text(outcome, code)  # a NormalizedCode: positions in the model's text

    # ---- handles --------------------------------------------------------------------

    async def invoke_handle(
        self, handle: str, request: Mapping[str, object], *, timeout: float | Unset | None = UNSET
    ) -> Outcome:
        """Pass ``request`` (method, url, headers, body) to a retained request handler, on
        the worker that holds it; the same contract as ``IsolateExecutor.invoke_handle``.

        The invocation is a job sent to that worker's own queue: its tool calls and fetches
        are served here by the creating request's dispatch and policy. Raises HANDLE_LOST
        (released, unknown, or its worker is gone: at once when the worker's liveness key is
        missing), HANDLE_EXPIRED (the worker's idle TTL passed), WORKER_CRASHED
        (``started=True``: the worker died during the invocation; the handle is lost too),
        and what ``execute`` raises (QUEUE_FULL, BROKER_UNREACHABLE, JOB_EXPIRED, ...).
        """
        if self._disposed:
            raise Disposed("The executor was disposed; its handles are gone.")
        record = self._handles.get(handle)
        request_json = plain_request(request)
        timeout_ms = resolve_timeout(self.config, timeout, record.request.timeout_ms)
        async with record.lock:
            record = self._handles.get(handle)  # it may have ended while we waited
            return await self._to_holder(
                record,
                {
                    "kind": "invoke",
                    "request_json": request_json,
                    "timeout_ms": timeout_ms,
                },
            )

    async def release_handle(self, handle: str) -> None:
        """Dispose a retained isolate on its worker (one round trip); later calls raise
        HANDLE_LOST. Raises what ``invoke_handle`` raises when the handle already ended."""
        if self._disposed:
            raise Disposed("The executor was disposed; its handles are gone.")
        record = self._handles.get(handle)
        try:
            await self._to_holder(record, {"kind": "release", "timeout_ms": record.request.timeout_ms})
        finally:
            self._handles.mark(record, "released")

    # ---- bulk -----------------------------------------------------------------------

    @property
    def bulk_window(self) -> int:
        """Jobs ``map`` keeps in flight unless told otherwise: ``BULK_WINDOW``, within the
        fleet's admission bound."""
        return min(BULK_WINDOW, self.settings.fleet_max_jobs)

    def map(
        self, jobs: Jobs, *, concurrency: int | None = None, retry: RetryArg = UNSET, **options: object
    ) -> BulkResults:
        """The same contract as :meth:`codemode.IsolateExecutor.map`: ``(key, Outcome |
        ExecutorError)`` in completion order, QUEUE_FULL waited out. See docs/bulk.md."""
        return map_jobs(self, jobs, concurrency=concurrency, retry=retry, options=options)

    def map_ordered(
        self, jobs: Jobs, *, concurrency: int | None = None, retry: RetryArg = UNSET, **options: object
    ) -> BulkResults:
        """:meth:`map` in input order."""
        return map_jobs_ordered(self, jobs, concurrency=concurrency, retry=retry, options=options)

    async def _to_holder(self, record: HostHandle, fields: dict[str, Any]) -> Outcome:
        """Send one handle job to the worker that holds ``record``, and map its faults onto
        the handle's state."""
        client, _scripts, _producer = await self._connection.ensure_started()
        key = worker_key(record.prefix, record.worker)
        try:
            alive = await client.exists(key)
        except BROKER_ERRORS as exc:
            raise broker_unreachable(exc, doing="looking for the handle's worker", started=False) from None
        if not alive:
            text = worker_gone_text(record.id, record.worker)
            self._handles.mark(record, "lost", text)
            raise HandleLost(text)
        base = record.request
        called_at = time.monotonic()
        try:
            session, outcome = await self._connection.submit(
                base,
                worker_queue(record.worker),
                {
                    "v": HANDLES_SCHEMA_VERSION,
                    "code": "",
                    "handle": record.id,
                    "providers": base.providers,
                    "network": record.network,
                    "count_host_waits": base.count_host_waits,
                    **fields,
                },
                target=record.worker,
            )
        except HandleExpired as exc:
            self._handles.mark(record, "expired", str(exc))
            raise
        except HandleLost as exc:
            self._handles.mark(record, "lost", str(exc))
            raise
        except (WorkerCrashed, Disposed) as exc:
            # The worker, or the isolate child holding the handle, died (or the worker shut
            # down) while the invocation ran: the isolate is gone with it.
            self._handles.mark(
                record,
                "lost",
                (
                    f"Handle {record.id} is lost: the process that held its isolate on worker "
                    f"{record.worker} died during an invocation ({exc.code}); run the program "
                    "again."
                ),
            )
            raise
        return session.with_metadata(outcome, called_at)
