"""The host's connection to the fleet: its Redis client and links, its heartbeat, its
clock, and the jobs it has in flight, from admission to the outcome.

::

    submit(request, queue, fields) ─▶ JobSpec (start-by from the Redis clock)
      ─▶ the Celery message (producer.py) ─▶ admit.lua: slot and queue in one step
      ─▶ JobSession.wait() (session.py) ─▶ Outcome | fault
    aclose() ─▶ jobs in flight abandoned, heartbeat key deleted, links and pool closed

Started on the first job (``ensure_started``), not at construction: a FleetExecutor is
made without touching Redis, and one whose Redis is gone fails with BROKER_UNREACHABLE
when it is first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

import redis.asyncio as aioredis

from ..._dispatch import RunThreads
from ..._faults import Disposed, QueueFull
from ..._outcome import LogEntry, Outcome
from ..._request import ResolvedRequest
from ..errors import BROKER_ERRORS, broker_unreachable
from ..redis.client import make_client
from ..redis.clock import RedisClock
from ..redis.keys import admission_key, host_key, worker_key
from ..redis.link import Links
from ..redis.scripts import FleetScripts
from ..settings import BrokerSettings
from ..wire import JobSpec
from .heartbeat import HostHeartbeat
from .producer import CeleryMessages, queue_key
from .session import JobSession

__all__ = ["EXPIRES_MARGIN_S", "HostConnection"]

EXPIRES_MARGIN_S: Final = 1.0
"""Celery's ``expires`` is the producer's clock; the start-by check in Redis is the
authority, so Celery's own discard comes a little later."""


class HostConnection:
    """One FleetExecutor's jobs on the fleet: ``submit`` admits a job and waits for it."""

    def __init__(
        self,
        settings: BrokerSettings,
        host_id: str,
        *,
        max_message_bytes: int,
        dispatch_threads: Any,
        on_job_id: Callable[[str], object] | None = None,
    ) -> None:
        self.settings = settings
        self.on_job_id = on_job_id
        """Called with each job's id (its Celery task id) before it is enqueued."""
        self.host_id = host_id
        self.max_message_bytes = max_message_bytes
        self._dispatch_threads = dispatch_threads
        self._client: aioredis.Redis | None = None
        self._scripts: FleetScripts | None = None
        self._producer: CeleryMessages | None = None
        self._clock = RedisClock()
        self._heartbeat: HostHeartbeat | None = None
        self._start_lock: asyncio.Lock | None = None
        self._sessions: dict[str, tuple[JobSession, asyncio.Task[Outcome]]] = {}
        self._housekeeping: set[asyncio.Task[None]] = set()
        self._disposed = False

    async def aclose(self) -> None:
        """Abandon the jobs in flight (their callers get DISPOSED), delete the heartbeat key,
        close the links and the pool."""
        self._disposed = True
        for session, task in list(self._sessions.values()):
            session.closed = True
            task.cancel()
            await session.abandon("The host's executor was disposed.")
        if self._housekeeping:
            await asyncio.wait(list(self._housekeeping), timeout=3.0)
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        if self._scripts is not None:
            await self._scripts.links.aclose()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()

    async def ensure_started(self) -> tuple[aioredis.Redis, FleetScripts, CeleryMessages]:
        """The client, the scripts and the producer, made (and the heartbeat started, the
        clock read) on first use."""
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._disposed:
                raise Disposed("The executor was disposed; create a new one to run more programs.")
            if self._client is None:
                self._client = make_client(self.settings)
                self._scripts = FleetScripts(
                    Links(self._client.connection_pool, timeout_s=self.settings.socket_timeout_s)
                )
            assert self._scripts is not None
            if self._heartbeat is None:
                heartbeat = HostHeartbeat(
                    self.settings, self._client, host_key(self.settings.key_prefix, self.host_id)
                )
                try:
                    await heartbeat.start()
                    await self._clock.sync(self._client)
                except BROKER_ERRORS as exc:
                    raise broker_unreachable(exc, doing="connecting", started=False) from None
                self._heartbeat = heartbeat
            if self._producer is None:
                self._producer = CeleryMessages(self.settings)
            return self._client, self._scripts, self._producer

    async def submit(
        self,
        request: ResolvedRequest,
        queue: str,
        fields: dict[str, Any],
        *,
        target: str | None = None,
        on_log: Callable[[LogEntry], None] | None = None,
    ) -> tuple[JobSession, Outcome]:
        """Admit one job onto ``queue`` and wait for its outcome. ``target`` names the one
        worker that consumes ``queue`` (an invocation or a release); ``on_log`` is told of
        each LogLine the job sends."""
        client, scripts, producer = await self.ensure_started()
        s = self.settings
        spec = JobSpec(
            job_id=uuid.uuid4().hex,
            host_id=self.host_id,
            key_prefix=s.key_prefix,
            start_by_ms=self._clock.now_ms() + s.queue_timeout_ms,
            # A job that may retain its isolate needs its worker's id with its outcome:
            # it gets Started with the claim. Others start quietly (see JobSpec).
            quiet_start=target is None and not fields.get("retain", False),
            **fields,
        )
        message = producer.build(spec, queue=queue, expires_s=s.queue_timeout_ms / 1000 + EXPIRES_MARGIN_S)
        if self.on_job_id is not None:
            self.on_job_id(spec.job_id)  # in the caller's task and context, before it can run
        session = JobSession(
            client,
            scripts,
            s,
            spec,
            request,
            max_message_bytes=self.max_message_bytes,
            start_by_monotonic=time.monotonic() + s.queue_timeout_ms / 1000,
            threads=RunThreads(self._dispatch_threads),
            target=None if target is None else (target, worker_key(s.key_prefix, target)),
            on_log=on_log,
        )
        try:
            admission = await scripts.admit(
                admission_key(s.key_prefix),
                host_key(s.key_prefix, self.host_id),
                queue_key(queue),
                spec.job_id,
                message,
                limit=s.fleet_max_jobs,
                hold_ms=s.queue_timeout_ms + s.key_ttl_ms,
                host_ttl_ms=s.host_ttl_ms,
            )
        except BROKER_ERRORS as exc:
            # The script may have run and only its answer been lost: make sure the job
            # never starts (best effort: a Redis that is gone cannot be told anything).
            self._background(session.withdraw("The job could not be admitted."))
            raise broker_unreachable(exc, doing="admitting the job", started=False) from None
        except asyncio.CancelledError:
            # The message may have gone out: make sure the job never starts.
            self._background(session.abandon("The caller stopped waiting for this run."))
            raise
        self._clock.observe(admission.now_ms)
        if not admission.admitted:
            raise QueueFull(
                f"The fleet already holds {admission.count} queued or running jobs "
                f"(fleet_max_jobs={s.fleet_max_jobs}); nothing was enqueued. Retry later or "
                "raise the bound."
            )
        return session, await self._wait(session)

    async def _wait(self, session: JobSession) -> Outcome:
        task = asyncio.ensure_future(session.wait())
        self._sessions[session.spec.job_id] = (session, task)
        try:
            # Not shielded (a shield costs every job one more turn of the loop): a caller
            # that stops waiting cancels the task with it, as the lines below would.
            return await task
        except asyncio.CancelledError:
            session.closed = True
            task.cancel()
            if self._disposed:
                # A quiet start may not have said Started yet: the claim tells.
                claimed = await asyncio.shield(session.abandon("The host's executor was disposed."))
                if claimed:
                    said = " The program had started."
                elif claimed is None:
                    said = " The program may have started (Redis did not answer)."
                else:
                    said = " Nothing ran."
                raise Disposed(
                    "The executor was disposed while this job ran." + said, started=claimed is not False
                ) from None
            await asyncio.shield(session.abandon("The caller stopped waiting for this run."))
            raise
        except BaseException:
            await session.abandon("The host gave up on this run.")
            raise
        finally:
            self._sessions.pop(session.spec.job_id, None)
            if not session.settled:
                # A settled job's slot is already free (whoever settled it freed it) and
                # its up channel was read empty, which deletes the key: nothing to do.
                self._background(session.cleanup())

    def _background(self, coro: Any) -> None:
        """Housekeeping off the caller's path (the worker already freed the slot)."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._housekeeping.add(task)
        task.add_done_callback(self._housekeeping.discard)
