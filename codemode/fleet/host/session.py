"""The host's side of one job: wait on its up channel, serve its tool calls and outbound
requests, and turn whatever happens into an Outcome or a typed fault.

::

    queued ──Started, or a claim found by a check──▶ running ──Finished──▶ Outcome
      │                   │ ToolCall / FetchCall ─▶ dispatch / policy (in this host)
      │                   │                        ─▶ ToolReply / FetchReply on down
      │                   ├──Failed──▶ the fault it carries
      │                   └─ lease key gone ──▶ WORKER_CRASHED (started=True)
      ├─ start-by passed, settle wins ──▶ JOB_EXPIRED (started=False)
      └─ (an invocation) its worker's liveness key gone, settle wins ──▶ HANDLE_LOST
    Redis lost anywhere ──▶ BROKER_UNREACHABLE

Nothing here blocks longer than one BLPOP (``MAX_BLOCKING_WAIT_S``) without looking at the
lease or the start-by time, so a job never hangs on a dead worker. Reading the channel
(the BLPOPs, and serving a call where it was read) is ``up_reader.py``'s; what a message
means is decided here.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import redis.asyncio as aioredis

from ... import _texts
from ..._dispatch import Dispatcher, RunThreads
from ..._faults import WorkerCrashed, fault_from_data
from ..._host.eager import EagerStarter
from ..._outbound import NOT_A_RESPONSE, OutboundRequest, checked_response
from ..._outcome import LogEntry, Outcome
from ..._request import ResolvedRequest
from ..errors import BROKER_ERRORS, broker_unreachable
from ..redis.channel import packed_push, push
from ..redis.keys import JobKeys
from ..redis.scripts import FleetScripts
from ..settings import MAX_BLOCKING_WAIT_S, BrokerSettings
from ..wire import (
    Failed,
    FetchCall,
    FetchReply,
    Finished,
    JobSpec,
    LogLine,
    Started,
    ToolCall,
    ToolReply,
    UpMessage,
    decode_up,
    encode,
)
from .up_reader import UpReader
from .watch import JobWatch

__all__ = ["JobSession", "run_policy"]

log = logging.getLogger("codemode.fleet")


async def run_policy(policy: Any, request: OutboundRequest, max_bytes: int) -> FetchReply:
    """Ask the host's outbound policy about one hop; mirrors the in-process executor's texts."""
    try:
        reply = policy(request)
        response = await reply if inspect.isawaitable(reply) else reply
    except httpx.HTTPError as exc:
        return FetchReply(0, error=f"The request to {request.url} failed: {type(exc).__name__}.")
    except Exception as exc:
        return FetchReply(0, error=str(exc) or f"The request to {request.url} was refused.")
    response = checked_response(response)
    if response is None:
        return FetchReply(0, error=NOT_A_RESPONSE)
    if len(response.body) > max_bytes:
        return FetchReply(0, error=_texts.message_ceiling_text("response body", max_bytes))
    return FetchReply(0, response=response)


class JobSession:
    """One submitted job, from the host's side. ``wait()`` returns its Outcome."""

    def __init__(
        self,
        client: aioredis.Redis,
        scripts: FleetScripts,
        settings: BrokerSettings,
        spec: JobSpec,
        request: ResolvedRequest,
        *,
        max_message_bytes: int,
        start_by_monotonic: float,
        threads: RunThreads,
        target: tuple[str, str] | None = None,
        on_log: Callable[[LogEntry], None] | None = None,
    ) -> None:
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.spec = spec
        self.request = request
        self.keys = JobKeys.of(spec.key_prefix, spec.job_id)
        self.max_message_bytes = max_message_bytes
        self.start_by_monotonic = start_by_monotonic
        self.threads = threads
        """This job's share of the host's threads for sync dispatch calls."""
        self.dispatcher = Dispatcher(request.dispatch, max_message_bytes, threads)
        self.target = target
        self.on_log = on_log
        """Told of each LogLine (the job streams its logs: ``JobSpec.stream_logs``)."""
        """``(worker id, its liveness key)`` when only that worker can take the job (an
        invocation): while queued, a missing key means the job will never start."""
        self.started = False
        self.worker = ""
        self.settled = False
        """True once the job has ended for the worker too (an outcome or fault arrived)."""
        self.closed = False
        """Set when the caller left: the loop stops even if a cancel was lost in redis-py."""
        self._replies_ahead: list[bytes] | None = None
        """While the wait loop hands what it read on (calls start at once): the replies
        ready by then, which go ahead of its next BLPOP in the same write (one system call
        and one wake-up fewer per relayed call)."""
        self._starter = EagerStarter(asyncio.get_running_loop(), f"codemode-job-{spec.job_id}-calls")
        self._context = contextvars.copy_context()
        """The caller's context, made with the session: calls served where their message is
        read (see _serve_here) start in a copy of it, as they would in the wait loop's task."""
        self.reader = UpReader(scripts.links, self.keys.up, self._serve_here)
        self._seen_calls: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._lease_check_s = max(0.1, settings.lease_ttl_ms / 3000)
        self.watch = JobWatch(client, scripts, settings, spec, target)

    def with_metadata(self, outcome: Outcome, called_at: float) -> Outcome:
        """``outcome`` as the caller gets it: the host's wall time since ``called_at`` and
        the tool calls this host served (the worker's ``ran_on`` kept as it came)."""
        return msgspec.structs.replace(
            outcome,
            duration_ms=round((time.monotonic() - called_at) * 1000, 3),
            tool_calls=self.dispatcher.calls,
        )

    # ---- the wait loop --------------------------------------------------------------

    async def wait(self) -> Outcome:
        try:
            return await self._loop()
        finally:
            self.threads.shutdown(wait=False)
            self._starter.close()
            for task in list(self._tasks):
                task.cancel()

    async def _loop(self) -> Outcome:
        next_check = self._next_check(time.monotonic())
        replies_ahead: list[bytes] = []
        task = asyncio.current_task()
        while True:
            # A cancel can land inside a redis-py command and be swallowed there: the task
            # still counts it (cancelling()), and the loop honours it here.
            if self.closed or (task is not None and task.cancelling()):
                raise asyncio.CancelledError()
            now = time.monotonic()
            if now >= next_check:
                await self._check()
                now = time.monotonic()
                next_check = self._next_check(now)
            try:
                raw = await self.reader.pop(next_check, replies_ahead)
            except BROKER_ERRORS as exc:
                raise self._broker_lost(exc, "waiting for the job's outcome") from None
            replies_ahead = self.reader.replies_left()
            if raw is not None:
                was_started = self.started
                # A call starts at once, up to its first wait (see _spawn): a quick
                # dispatch has its reply by then, and the reply rides ahead of the next
                # BLPOP (see _reply).
                self._replies_ahead = replies_ahead
                try:
                    outcome = self._receive(raw)
                finally:
                    self._replies_ahead = None
                if outcome is not None:
                    return outcome
                if self.started and not was_started:
                    next_check = self._next_check(time.monotonic())

    def _serve_here(self, raw: bytes) -> list[bytes] | None:
        """The reader's hook (``up_reader.py``): serve ``raw`` where it was read if it is a
        call of a started job, and return the replies it made ready; ``None`` when the wait
        loop must receive it."""
        if self.closed or not self.started:
            return None
        try:
            message: UpMessage = decode_up(raw)
        except msgspec.DecodeError:
            return None  # the loop drops it, and says so
        if not isinstance(message, (ToolCall, FetchCall)):
            return None
        replies_ahead: list[bytes] = []
        self._replies_ahead = replies_ahead
        try:
            self._context.run(self._handle, message)
        finally:
            self._replies_ahead = None
        return replies_ahead

    def _broker_lost(self, exc: BaseException, doing: str) -> BaseException:
        """What a Redis error means here: BROKER_UNREACHABLE, unless the caller has left. A
        cancel that lands while redis-py is sending a command surfaces as a connection
        error, and it is still the cancel."""
        if self.closed:
            return asyncio.CancelledError()
        return broker_unreachable(exc, doing=doing, started=True)

    def _next_check(self, now: float) -> float:
        """Running: look at the lease every third of its TTL. Queued: at the start-by time,
        and at least every blocking wait (a worker may have marked the job)."""
        if self.started:
            return now + self._lease_check_s
        step = MAX_BLOCKING_WAIT_S if self.target is None else self._lease_check_s
        return min(now + step, max(self.start_by_monotonic, now + 0.01))

    def _receive(self, raw: bytes) -> Outcome | None:
        try:
            message: UpMessage = decode_up(raw)
        except msgspec.DecodeError as exc:
            log.warning(
                "job %s: dropped a message on its reply channel that is not one (%d bytes: %s)",
                self.spec.job_id,
                len(raw),
                exc,
            )
            return None
        return self._handle(message)

    def _handle(self, message: UpMessage) -> Outcome | None:
        match message:
            case Started(worker=worker):
                self.started = True
                self.worker = worker
            case ToolCall():
                if self._fresh(message.call_id):
                    self._spawn(self._serve_call(message))
            case FetchCall():
                if self._fresh(message.call_id):
                    self._spawn(self._serve_fetch(message))
            case LogLine(entry=entry):
                self.started = True
                if self.on_log is not None:
                    self.on_log(entry)
            case Finished(outcome=outcome):
                self.settled = True
                return outcome
            case Failed(fault=fault):
                self.settled = True
                raise fault_from_data(fault)
        return None

    def _fresh(self, call_id: int) -> bool:
        """A call id seen before is a duplicate delivery: drop it (its reply went out)."""
        if call_id in self._seen_calls:
            log.warning("job %s: dropped a repeated call %d", self.spec.job_id, call_id)
            return False
        self._seen_calls.add(call_id)
        return True

    async def _check(self) -> None:
        """No message for a while: is the worker still there, is the job still coming?"""
        try:
            if self.started:
                if await self.watch.lease_lost():
                    raise WorkerCrashed(
                        f"Worker {self.worker} stopped renewing its lease on this job (it died "
                        "or lost Redis); the program had started. The fleet never runs a "
                        "started program a second time, so a retry can repeat tool calls it "
                        "already made.",
                        started=True,
                    )
                return
            mark, result = await self.watch.settle_queued()
        except BROKER_ERRORS as exc:
            raise self._broker_lost(exc, "checking on the job") from None
        if result.state == "wait":
            self.start_by_monotonic = time.monotonic() + result.wait_ms / 1000
            return
        fault = self.watch.never_started(mark, result)
        if fault is not None:
            self.settled = True
            raise fault
        # Claimed by a worker: the job runs. Its Started may be in the channel, or not come
        # at all (a quiet start sends none before its first call): from now on, the lease.
        self.started = True
        self.worker = result.holder

    # ---- serving the program's calls ------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        """Serve a call: its first step at once (codemode/_host/eager.py), so that a dispatch
        with its answer at hand is answered before the wait loop's next BLPOP, and only a
        call that waits keeps a task."""
        task = self._starter.start(coro)
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _reply(self, message: ToolReply | FetchReply) -> None:
        if self._replies_ahead is not None:  # the wait loop sends it with its next BLPOP
            self._replies_ahead.extend(
                packed_push(self.keys.down, (encode(message),), self.settings.key_ttl_ms)
            )
            return
        try:
            await push(self.scripts.links, self.keys.down, encode(message), ttl_ms=self.settings.key_ttl_ms)
        except BROKER_ERRORS:
            log.warning("job %s: could not send a reply (Redis unreachable)", self.spec.job_id)

    async def _serve_call(self, call: ToolCall) -> None:
        envelope = await self.dispatcher.call(call)
        await self._reply(ToolReply(call.call_id, envelope))

    async def _serve_fetch(self, call: FetchCall) -> None:
        reply = await run_policy(self.request.outbound, call.request, self.max_message_bytes)
        await self._reply(FetchReply(call.call_id, reply.response, reply.error))

    # ---- leaving early ----------------------------------------------------------------

    async def abandon(self, reason: str) -> bool | None:
        """The caller left before the outcome: make sure the job never starts, or stop it.
        Returns whether a worker had claimed it (its program may have run), or ``None``
        when Redis did not say."""
        if self.settled:
            return self.started
        holder = await self.watch.cancel(reason)
        if holder is None:
            return True if self.started else None
        if not holder:
            return False
        self.started = True  # a quiet start may not have said so yet
        self.worker = self.worker or holder
        return True

    async def withdraw(self, reason: str) -> None:
        """The admission failed on this side (its answer was lost, say), so the job may
        still have been queued: make sure it never starts, and free what it may hold."""
        await self.abandon(reason)
        await self.watch.cleanup()

    async def cleanup(self) -> None:
        """When the job was not settled (the caller left, or a fault on this side): free the
        admission slot and delete the channel now, not when their keys expire."""
        await self.watch.cleanup()
