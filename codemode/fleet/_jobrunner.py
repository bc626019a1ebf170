"""The worker's side of one job: claim it, hold its lease, relay its tool calls to the host.

::

    claim (Lua, SET NX) ─ taken ──▶ refuse: a started job never runs twice
       │                ─ past start-by ──▶ JOB_EXPIRED to the host, not started
       │                ─ host key gone ──▶ not started
       ▼ started
    lease renewal every lease_ttl/3, on the LeaseKeeper's thread (_leases.py): lease, key
       expiries, admission slot; host key gone ─▶ pending tool calls reject with
       host_gone_text(), later ones at once
    reader (_reader.py; from the first relayed call, or READER_DELAY_S into the run):
       BLPOP down, a call's push riding ahead of it ─▶ ToolReply/FetchReply to the pending
       call by id (stale or garbage dropped), Cancel stops the run
    IsolateExecutor.execute(dispatch=job, outbound=relay_fetch|None|UNSET)
      (a Forwarder: each call's answer goes to the child from the read that brings it)
      (kind=invoke: IsolateExecutor.invoke_handle; kind=release: release_handle)
    ─▶ Finished(outcome) | Failed(fault) on up, admission slot freed, lease deleted

The program's deadline is the isolate executor's own (Celery time limits need prefork).

Retained handles (``_handles.py``): a ``retain`` job runs with a :class:`HandleRoute` as its
dispatch and policy, and a handle in its outcome is kept in :attr:`JobRunner.handles` under a
fleet handle. ``keep_alive`` refreshes this worker's liveness keys and releases the handles
of hosts that are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import msgspec
import redis.asyncio as aioredis
import redis.exceptions

from .. import _texts
from .._config import UNSET
from .._dispatch import CallMessage, Forwarder, tool_error
from .._executor import IsolateExecutor
from .._faults import (
    Disposed,
    ExecutorError,
    HandleExpired,
    HandleLost,
    InvalidRequest,
    JobExpired,
    WorkerCrashed,
)
from .._outbound import OutboundRequest, OutboundResponse
from .._outcome import Outcome
from ._channel import packed_push, push
from ._errors import BROKER_ERRORS, BROKER_LOST_TEXT, RelayRefused
from ._handles import HandleRoute, WorkerHandle, WorkerHandles
from ._keys import JobKeys, admission_key, host_key, worker_key
from ._leases import LeaseKeeper
from ._link import Links
from ._reader import DownReader
from ._scripts import FleetScripts
from ._wire import (
    SCHEMA_VERSIONS,
    Cancel,
    Close,
    DownMessage,
    Failed,
    FetchCall,
    FetchReply,
    Finished,
    JobSpec,
    Started,
    ToolCall,
    ToolReply,
    decode_down,
    encode,
    job_from_celery,
)
from .settings import BrokerSettings

__all__ = ["JobRunner"]

log = logging.getLogger("codemode.fleet.worker")

FINAL_PUSH_ATTEMPTS: Final = 3
READER_DRAIN_S: Final = 0.5
READER_DELAY_S: Final = 0.05
"""When the reply channel's reader starts if no call started it: most jobs end sooner and
never read the channel (a BLPOP, the close that ends it and its wake-up saved), and a
Cancel pushed meanwhile waits in the list until the reader takes it."""
STARTED_DELAY_S: Final = 0.05
"""A quiet start (``JobSpec.quiet_start``): how long a job runs before its Started goes up
on its own. A job that calls a tool sooner sends Started with its first call; one that
finishes sooner sends none (its outcome says it ran). Until then the host, if it looks,
finds the claim (``_session.py``)."""

_Answer = ToolReply | FetchReply | str
"""What a pending call resolves to: the host's reply, or a text the call rejects with."""
_Settle = Callable[[_Answer], object]
"""What a pending call is waiting with: called once, with its answer."""


class JobRunner:
    """Runs jobs in one worker process, on one event loop, with one executor and client."""

    def __init__(
        self, executor: IsolateExecutor, client: aioredis.Redis, settings: BrokerSettings, worker_id: str
    ) -> None:
        self.executor = executor
        self.client = client
        self.links = Links(client.connection_pool, timeout_s=settings.socket_timeout_s)
        self.scripts = FleetScripts(self.links)
        self.settings = settings
        self.worker_id = worker_id
        self.handles = WorkerHandles(worker_id)
        self.leases = LeaseKeeper(settings, worker_id)
        """Renews the running jobs' leases from a thread of its own (a busy loop delays none)."""
        self._beaten: set[str] = set()
        """Prefixes this worker has written a liveness key under (deleted at close)."""

    async def run(self, data: object) -> str:
        """Run one job (a :class:`JobSpec`, or a Celery message's job data); returns a
        one-line summary for the log."""
        try:
            spec = data if isinstance(data, JobSpec) else job_from_celery(data)
        except (msgspec.ValidationError, RecursionError) as exc:
            log.error("refused a malformed job: %s", exc)
            return f"refused: malformed job ({exc})"
        job = _Job(self, spec)
        return await job.run()

    # ---- liveness and retained handles -------------------------------------------------

    async def keep_alive(self) -> None:
        """Every third of the lease TTL: refresh the liveness keys, release the handles of
        hosts that are gone. Runs until cancelled."""
        interval = self.settings.lease_ttl_ms / 3000
        failing = False
        while True:
            try:
                await self.beat()
            except BROKER_ERRORS as exc:
                if not failing:
                    log.warning("worker %s: liveness refresh failed (%s)", self.worker_id, exc)
                failing = True
            except Exception:  # a bug here must not stop the liveness keys for good
                log.exception("worker %s: liveness refresh failed", self.worker_id)
            else:
                failing = False
            await asyncio.sleep(interval)

    async def beat(self) -> None:
        entries = self.handles.entries()
        prefixes = sorted({self.settings.key_prefix, *(e.prefix for e in entries)})
        async with self.client.pipeline(transaction=False) as pipe:
            for prefix in prefixes:
                pipe.set(worker_key(prefix, self.worker_id), b"1", px=self.settings.lease_ttl_ms)
            for entry in entries:
                pipe.exists(host_key(entry.prefix, entry.host_id))
            results = await pipe.execute()
        self._beaten.update(prefixes)
        for entry, host_alive in zip(entries, results[len(prefixes) :], strict=True):
            if not host_alive and not entry.lock.locked():
                log.info(
                    "worker %s: host %s is gone; releasing its handle %s",
                    self.worker_id,
                    entry.host_id,
                    entry.id,
                )
                self.handles.drop(entry)
                with contextlib.suppress(ExecutorError):
                    await self.executor.release_handle(entry.local)

    async def announce(self, prefix: str) -> None:
        """Write the liveness key under ``prefix`` now (a host's first invocation of a new
        handle must find it)."""
        await self.client.set(worker_key(prefix, self.worker_id), b"1", px=self.settings.lease_ttl_ms)
        self._beaten.add(prefix)

    async def forget(self) -> None:
        """At shutdown: stop renewing leases, and delete the liveness keys, so hosts see
        HANDLE_LOST at once."""
        await asyncio.to_thread(self.leases.close)
        if self._beaten:
            await self.client.delete(*(worker_key(p, self.worker_id) for p in self._beaten))


class _Job(Forwarder):
    """One job on this worker; its own dispatch (a Forwarder: :meth:`forward`), unless a
    :class:`HandleRoute` stands between it and a retained isolate."""

    def __init__(self, runner: JobRunner, spec: JobSpec) -> None:
        self.runner = runner
        self.client = runner.client
        self.settings = runner.settings
        self.spec = spec
        self.keys = JobKeys.of(spec.key_prefix, spec.job_id)
        self.host_key = host_key(spec.key_prefix, spec.host_id)
        self.admission = admission_key(spec.key_prefix)
        self.pending: dict[int, _Settle] = {}
        """The calls sent up and not answered yet, by call id."""
        self._pushes: set[asyncio.Task[None]] = set()
        """Pushes of calls that could not ride ahead of the reader's BLPOP (referenced till done)."""
        self.ids = itertools.count(1)
        self.host_gone = False
        self.broker_lost = False
        self.ended = False
        self.run_task: asyncio.Task[Any] | None = None
        self.reader: DownReader | None = None
        self.dropped = 0
        self.announced = not spec.quiet_start
        """Whether the host has (or is about to have) this job's Started."""
        self._announcing: asyncio.Task[None] | None = None

    # ---- the job's life ---------------------------------------------------------------

    async def run(self) -> str:
        started_at = time.monotonic()
        if self.spec.v not in SCHEMA_VERSIONS:
            known = " and ".join(f"v{v}" for v in SCHEMA_VERSIONS)
            fault = InvalidRequest(f"This worker reads job schema {known}, not v{self.spec.v}; nothing ran.")
            await self._final(Failed(fault.to_data()))
            return f"refused job {self.spec.job_id}: schema v{self.spec.v}"
        expired = JobExpired(
            "No worker started this job before its start-by time; nothing "
            "ran. Retry when the fleet has capacity, or add workers."
        )
        try:
            claim = await self.runner.scripts.claim(
                [self.keys.claim, self.keys.up, self.keys.lease, self.host_key, self.admission],
                worker=self.runner.worker_id,
                start_by_ms=self.spec.start_by_ms,
                lease_ttl_ms=self.settings.lease_ttl_ms,
                key_ttl_ms=self.settings.key_ttl_ms,
                job_id=self.spec.job_id,
                started=encode(Started(self.runner.worker_id)),
                expired=encode(Failed(expired.to_data())),
                announce=self.announced,
            )
        except BROKER_ERRORS as exc:
            log.warning("job %s: Redis unreachable at claim (%s); not started", self.spec.job_id, exc)
            return f"not started {self.spec.job_id}: Redis unreachable"
        if claim.state == "taken":
            log.warning(
                "job %s was already claimed by %s; refusing to run it again "
                "(a started program never runs twice)",
                self.spec.job_id,
                claim.holder,
            )
            return f"refused job {self.spec.job_id}: already claimed by {claim.holder}"
        if claim.state != "started":
            log.info("job %s not started: %s", self.spec.job_id, claim.state)
            return f"not started {self.spec.job_id}: {claim.state}"
        loop = asyncio.get_running_loop()
        self.runner.leases.hold(
            self.spec.job_id,
            [self.keys.lease, self.host_key, self.keys.up, self.keys.down, self.keys.claim, self.admission],
            self._host_lapsed,
        )
        start_reader = loop.call_later(READER_DELAY_S, self._start_reader)
        announce = None if self.announced else loop.call_later(STARTED_DELAY_S, self._announce)
        self.run_task = asyncio.ensure_future(self._execute())
        try:
            final: Finished | Failed = await self.run_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # The worker itself is stopping: end everything, tell the host if we can.
                self.run_task.cancel()
                start_reader.cancel()
                if self.reader is not None:
                    self.reader.stop(close=True)
                with contextlib.suppress(Exception):
                    await asyncio.shield(
                        self._final(
                            Failed(
                                Disposed(
                                    "The worker shut down during this run; the program had started.",
                                    started=True,
                                ).to_data()
                            )
                        )
                    )
                raise
            final = Failed(
                Disposed("The caller cancelled this run; the program had started.", started=True).to_data()
            )
        finally:
            self.ended = True
            self.runner.leases.release(self.spec.job_id)
            start_reader.cancel()
            if announce is not None:
                announce.cancel()
            self._fail_pending("This run has ended.")
        await self._final(final, reader=self.reader)
        elapsed = (time.monotonic() - started_at) * 1000
        kind = "finished" if isinstance(final, Finished) else f"failed {final.fault.code}"
        what = "job" if self.spec.kind == "run" else f"{self.spec.kind} job"
        return f"{kind} {what} {self.spec.job_id} in {elapsed:.1f} ms"

    async def _execute(self) -> Finished | Failed:
        try:
            if self.spec.kind == "invoke":
                outcome = await self._invoke()
            elif self.spec.kind == "release":
                outcome = await self._release()
            else:
                outcome = await self._run_program()
        except ExecutorError as exc:
            return Failed(exc.to_data())
        except Exception as exc:  # a bug here must still reach the caller as a fault
            log.exception("job %s: the worker failed while running it", self.spec.job_id)
            return Failed(
                WorkerCrashed(
                    f"Worker {self.runner.worker_id} failed while running the program; the "
                    "program had started.",
                    started=True,
                    causes=(f"{type(exc).__name__}: {exc}",),
                ).to_data()
            )
        return Finished(outcome)

    async def _run_program(self) -> Outcome:
        # A run that may retain its isolate gets a route as its dispatch and policy: the
        # isolate keeps them for its whole life, and each invocation points them at itself.
        route = HandleRoute(self) if self.spec.retain else None
        calls: Forwarder = self if route is None else route
        relay_fetch = self.relay_fetch if route is None else route.relay_fetch
        outbound: Any
        if self.spec.network == "none":
            outbound = None
        elif self.spec.network == "host":
            outbound = relay_fetch
        else:
            outbound = UNSET
        try:
            outcome = await self.runner.executor.execute(
                self.spec.code,
                providers=[{"name": p.name, "tools": list(p.tools)} for p in self.spec.providers],
                dispatch=calls,
                outbound=outbound,
                modules=self.spec.modules,
                timeout=self.spec.timeout_ms,
                count_host_waits=self.spec.count_host_waits,
                retain_handles=self.spec.retain,
            )
        finally:
            if route is not None:
                route.job = None
        if outcome.handle is None or route is None:
            return outcome
        entry = self.runner.handles.add(
            outcome.handle, host_id=self.spec.host_id, prefix=self.spec.key_prefix, route=route
        )
        log.info("job %s: retained handle %s for host %s", self.spec.job_id, entry.id, self.spec.host_id)
        try:
            await self.runner.announce(self.spec.key_prefix)
        except BROKER_ERRORS as exc:
            log.warning("job %s: could not write the liveness key (%s)", self.spec.job_id, exc)
        return msgspec.structs.replace(outcome, handle=entry.id)

    def _request(self) -> dict[str, Any]:
        """The invocation's request, back from ``plain_request``'s JSON (body as bytes)."""
        try:
            data = msgspec.json.decode(self.spec.request_json or "")
            if not isinstance(data, dict):
                raise ValueError("not an object")
            body = data.get("body")
            if isinstance(body, str):
                data["body"] = body.encode("latin-1")
        except (msgspec.DecodeError, ValueError) as exc:  # UnicodeEncodeError is one
            raise InvalidRequest(f"The invocation's request is malformed ({exc}); nothing ran.") from None
        return data

    def _held(self) -> WorkerHandle:
        return self.runner.handles.lookup(self.spec.handle, self.spec.host_id)

    async def _invoke(self) -> Outcome:
        request = self._request()
        entry = self._held()
        async with entry.lock:
            entry = self._held()  # released while this invocation waited?
            entry.route.job = self
            try:
                return await self.runner.executor.invoke_handle(
                    entry.local, request, timeout=self.spec.timeout_ms
                )
            except (HandleLost, HandleExpired):
                self.runner.handles.drop(entry)
                raise
            finally:
                entry.route.job = None

    async def _release(self) -> Outcome:
        entry = self._held()
        async with entry.lock:
            entry = self._held()
            self.runner.handles.drop(entry)
            await self.runner.executor.release_handle(entry.local)
        return Outcome()

    async def _final(self, final: Finished | Failed, reader: DownReader | None = None) -> None:
        """Send the outcome, free the slot, drop the lease, and end the reader cleanly (a
        message of its own on down wakes its BLPOP, so its connection stays reusable)."""
        final_msg = encode(final)
        if reader is not None:
            reader.stop()
        close_msg = encode(Close()) if reader is not None and reader.in_flight else None
        for attempt in range(FINAL_PUSH_ATTEMPTS):
            try:
                # One script: ~0.2 ms less client work than the same six commands as a
                # MULTI/EXEC pipeline, before the host's outcome goes out.
                await self.runner.scripts.finish(
                    [self.keys.up, self.keys.down, self.admission, self.keys.lease],
                    key_ttl_ms=self.settings.key_ttl_ms,
                    job_id=self.spec.job_id,
                    final=final_msg,
                    close=close_msg,
                )
                break
            except BROKER_ERRORS as exc:
                if attempt == FINAL_PUSH_ATTEMPTS - 1:
                    log.warning(
                        "job %s: could not send its outcome (Redis unreachable: %s)", self.spec.job_id, exc
                    )
                    break
                await asyncio.sleep(0.5 * (attempt + 1))
        if reader is not None:
            await reader.drained(READER_DRAIN_S)
            reader.stop(close=True)

    # ---- liveness ---------------------------------------------------------------------

    def _host_lapsed(self) -> None:
        """The lease keeper found this job's host key gone (its slot is freed already)."""
        if self.ended or self.host_gone:
            return
        log.warning(
            "job %s: host %s stopped its heartbeat (its process died, stalled, or lost Redis); "
            "failing its pending calls",
            self.spec.job_id,
            self.spec.host_id,
        )
        self.host_gone = True
        self._fail_pending(_texts.host_gone_text())

    def _fail_pending(self, text: str) -> None:
        pending, self.pending = self.pending, {}
        for settle in pending.values():
            settle(text)

    # ---- the down channel -------------------------------------------------------------

    def _on_down(self, raw: bytes | None) -> bool:
        """A message on down (``None``: the reader's BLPOP timed out), inside the reader's
        link (``_reader.py``); returns whether the reader parks (no call is pending)."""
        if raw is None:
            return False
        try:
            message: DownMessage = decode_down(raw)
        except msgspec.DecodeError as exc:
            self.dropped += 1
            log.warning(
                "job %s: dropped a message on its reply channel that is not a reply (%d bytes: %s)",
                self.spec.job_id,
                len(raw),
                exc,
            )
            return False
        match message:
            case Close():
                if self.reader is not None:
                    self.reader.stop()
            case Cancel(reason=reason):
                log.info("job %s: cancelled by its host (%s)", self.spec.job_id, reason)
                if self.run_task is not None:
                    self.run_task.cancel()
            case ToolReply(call_id=call_id) | FetchReply(call_id=call_id):
                # (a tool call's answer goes to the child from here)
                if not self._settle(call_id, message):
                    log.info("job %s: dropped a stale reply to call %d", self.spec.job_id, call_id)
                    return False
                return not self.pending
        return False

    def _on_down_lost(self, exc: BaseException) -> None:
        if self.ended:
            return
        log.warning("job %s: reply channel lost (%s)", self.spec.job_id, exc)
        self.broker_lost = True
        self._fail_pending(BROKER_LOST_TEXT)

    def _announce(self) -> None:
        """A quiet start that ran STARTED_DELAY_S without a call: send its Started now."""
        if self.announced or self.ended:
            return
        self.announced = True
        self._announcing = asyncio.ensure_future(self._send_started())  # referenced till done

    async def _send_started(self) -> None:
        try:
            await push(
                self.runner.links,
                self.keys.up,
                encode(Started(self.runner.worker_id)),
                ttl_ms=self.settings.key_ttl_ms,
            )
        except BROKER_ERRORS as exc:  # the host's lease check tells it the job runs
            log.warning("job %s: could not send Started (%s)", self.spec.job_id, exc)

    def _start_reader(self) -> None:
        """The run has gone READER_DELAY_S without a call: read down alone."""
        if not self.ended:
            self._reader().start()

    def _reader(self) -> DownReader:
        if self.reader is None:
            self.reader = DownReader(
                self.runner.links,
                self.keys.down,
                park_s=READER_DELAY_S,
                on_message=self._on_down,
                on_lost=self._on_down_lost,
            )
        return self.reader

    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None:
        """The job's dispatch: send a tool call up; ``answer`` gets its envelope inside the
        read that brings the host's reply."""
        provider, tool = call.provider, call.tool

        def settle(reply: _Answer) -> None:
            if isinstance(reply, ToolReply):
                answer(reply.envelope)
            elif isinstance(reply, str):
                answer(tool_error(reply))
            else:
                answer(
                    tool_error(
                        f"The host answered the call to {provider}.{tool} with a reply of the wrong kind."
                    )
                )

        self._send(lambda call_id: ToolCall(call_id, provider, tool, call.args_json), settle)

    async def _ask(self, message_for: Any) -> _Answer:
        """Send one call up and wait for its answer (or a text the call rejects with)."""
        future: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()

        def settle(answer: _Answer) -> None:
            if not future.done():
                future.set_result(answer)

        call_id = self._send(message_for, settle)
        try:
            return await future
        finally:
            self.pending.pop(call_id, None)

    def _send(self, message_for: Any, settle: _Settle) -> int:
        """Send one call up, its push riding ahead of the reader's next BLPOP when it can;
        ``settle`` gets its answer once (at once, if the host or Redis is known gone).
        Returns the call's id."""
        call_id = next(self.ids)
        if self.host_gone:
            settle(_texts.host_gone_text())
            return call_id
        if self.broker_lost:
            settle(BROKER_LOST_TEXT)
            return call_id
        self.pending[call_id] = settle
        messages = [encode(message_for(call_id))]
        if not self.announced:  # a quiet start's first call: Started goes up just before it
            self.announced = True
            messages.insert(0, encode(Started(self.runner.worker_id)))
        if not self._ride(call_id, messages):
            task = asyncio.ensure_future(self._push_alone(call_id, messages))
            self._pushes.add(task)
            task.add_done_callback(self._pushes.discard)
        return call_id

    async def _push_alone(self, call_id: int, messages: list[bytes]) -> None:
        """A call's push on a link of its own (the reader is reading already)."""
        try:
            await push(self.runner.links, self.keys.up, *messages, ttl_ms=self.settings.key_ttl_ms)
        except BROKER_ERRORS as exc:
            log.warning(
                "job %s: could not send a call to its host (%s: %s)",
                self.spec.job_id,
                type(exc).__name__,
                exc,
            )
            self.broker_lost = True
            self._settle(call_id, BROKER_LOST_TEXT)
        except redis.exceptions.ResponseError as exc:  # refused: this call fails, not Redis
            self._push_failed(call_id, str(exc))
        except Exception as exc:  # a bug: the call must still be answered
            log.exception("job %s: a call's push failed", self.spec.job_id)
            self._push_failed(call_id, f"{type(exc).__name__}: {exc}")

    def _ride(self, call_id: int, messages: list[bytes]) -> bool:
        """Send a call's push ahead of the reader's next BLPOP, in one write, when the
        reader has none in flight (not started yet, or parked after a reply); whether it
        did. Otherwise the reader is reading (or starts to) before the call is pushed on
        its own: the reply must find it waiting."""
        if self.ended:
            return False
        return self._reader().ride(
            packed_push(self.keys.up, messages, self.settings.key_ttl_ms),
            functools.partial(self._push_failed, call_id),
        )

    def _push_failed(self, call_id: int, error: str) -> None:
        self._settle(call_id, f"The worker could not send this call to its host ({error}).")

    def _settle(self, call_id: int, answer: _Answer) -> bool:
        """Give a pending call its answer (it leaves the pending calls); whether it was
        pending."""
        settle = self.pending.pop(call_id, None)
        if settle is None:
            return False
        settle(answer)
        return True

    async def relay_fetch(self, request: OutboundRequest) -> OutboundResponse:
        """The worker executor's outbound policy: each hop is decided by the host's policy."""
        answer = await self._ask(lambda call_id: FetchCall(call_id, request))
        if isinstance(answer, str):
            raise RelayRefused(answer)
        if isinstance(answer, FetchReply):
            if answer.response is not None:
                return answer.response
            raise RelayRefused(answer.error or f"The request to {request.url} was refused.")
        raise RelayRefused("The host answered this request with a reply of the wrong kind.")
