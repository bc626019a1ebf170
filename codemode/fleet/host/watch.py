"""The host's look at one job it has not heard from, and its ways of making sure a job it
gave up on never starts.

::

    running, quiet for a lease check ─▶ lease gone and nothing on up? ─▶ WORKER_CRASHED
    queued, at its start-by time (or its worker's liveness key gone) ─▶ settle.lua:
        done ─▶ JOB_EXPIRED / HANDLE_LOST (marked: no worker will start it)
        taken by a mark ─▶ JOB_EXPIRED / HOST_GONE / HANDLE_LOST / INVALID_REQUEST (refused:
                           a worker found it unsigned or wrongly signed)
        taken by a worker ─▶ running (the session watches its lease from now on)
        wait ─▶ not due yet
    caller left ─▶ settle.lua with "cancelled" (never starts), or Cancel on down (stop it)

The session (``session.py``) decides when to look and what the answer means for its wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import redis.asyncio as aioredis

from ..._faults import ExecutorError, HandleLost, HostGone, InvalidRequest, JobExpired
from ..redis.channel import push
from ..redis.keys import JobKeys, admission_key
from ..redis.scripts import FleetScripts, SettleResult
from ..settings import BrokerSettings
from ..signing import REFUSED_MARK, refused_text
from ..wire import Cancel, JobSpec, encode
from .handles import worker_gone_text

__all__ = ["MARKS", "JobWatch"]

MARKS: Final = frozenset({"expired", "cancelled", "host-gone", "worker-gone", REFUSED_MARK})
"""Claim values that are not a worker: the job will never start."""
LEAVE_WAIT_S: Final = 2.0
"""How long leaving (cancel, cleanup) waits for Redis: a Redis that is gone cannot be told."""


class JobWatch:
    """Redis's view of one job (``spec``), for its session. ``target``: ``(worker id, its
    liveness key)`` when only that worker can take the job (an invocation)."""

    def __init__(
        self,
        client: aioredis.Redis,
        scripts: FleetScripts,
        settings: BrokerSettings,
        spec: JobSpec,
        target: tuple[str, str] | None,
    ) -> None:
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.spec = spec
        self.target = target
        self.keys = JobKeys.of(spec.key_prefix, spec.job_id)

    async def lease_lost(self) -> bool:
        """Whether the running job's worker is gone: its lease lapsed with nothing on up.
        The worker's last act drops the lease and pushes the outcome at once (``finish``):
        a lease gone with messages waiting is a job that ended while the session was busy
        elsewhere, and it reads the outcome next."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(self.keys.lease)
            pipe.llen(self.keys.up)
            leased, waiting = await pipe.execute()
        return not leased and not waiting

    async def settle_queued(self) -> tuple[str, SettleResult]:
        """Mark a queued job that is due (its start-by time passed, or its only worker is
        gone) so that no worker starts it; the mark tried and what Redis said."""
        mark, force = "expired", False
        if self.target is not None and not await self.client.exists(self.target[1]):
            # Only that worker consumes this job's queue, and it is gone.
            mark, force = "worker-gone", True
        return mark, await self._settle(mark, force)

    async def _settle(self, mark: str, force: bool) -> SettleResult:
        """The settle script on this job: ``mark`` its claim unless a worker holds it
        (``force``: whatever its start-by time)."""
        return await self.scripts.settle(
            self.keys.claim,
            admission_key(self.spec.key_prefix),
            start_by_ms=self.spec.start_by_ms,
            job_id=self.spec.job_id,
            key_ttl_ms=self.settings.key_ttl_ms,
            mark=mark,
            force=force,
        )

    def never_started(self, mark: str, result: SettleResult) -> ExecutorError | None:
        """The fault a settled queued job ends with, or ``None`` when a worker claimed it."""
        if result.state == "done":
            if mark == "worker-gone":
                return HandleLost(self._worker_gone())
            return JobExpired(
                f"No worker started this job within its queue timeout "
                f"({self.settings.queue_timeout_ms} ms); it will not start. Nothing ran. "
                "Retry when the fleet has capacity, or add workers.",
            )
        if result.holder not in MARKS:
            return None
        if result.holder == "worker-gone":
            return HandleLost(self._worker_gone())
        if result.holder == REFUSED_MARK:  # its Failed may still be on up, or lost with it
            return InvalidRequest(refused_text(signed=bool(self.settings.job_key)))
        if result.holder == "host-gone":
            return HostGone(
                "A worker found this host's heartbeat lapsed before it started the job, so "
                "it did not start it (the host's process stalled, or lost Redis, for longer "
                "than its heartbeat TTL). Nothing ran."
            )
        return JobExpired(f"This job was marked {result.holder} before it started; nothing ran.")

    def _worker_gone(self) -> str:
        return worker_gone_text(self.spec.handle, self.target[0] if self.target else "?")

    async def cancel(self, reason: str) -> str | None:
        """Make sure the job never starts, or tell its worker to stop it. Returns the worker
        that had claimed it, ``""`` when none had (it never will), ``None`` when Redis did
        not answer. Best effort, bounded."""
        holder: str | None = None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(LEAVE_WAIT_S):
                result = await self._settle("cancelled", force=True)
                if result.state != "taken" or result.holder in MARKS:
                    return ""
                holder = result.holder  # claimed, whether or not the Cancel gets through
                await push(
                    self.scripts.links,
                    self.keys.down,
                    encode(Cancel(reason)),
                    ttl_ms=self.settings.key_ttl_ms,
                )
        return holder

    async def cleanup(self) -> None:
        """Free the admission slot and delete the up channel now, not when their keys
        expire. Best effort, bounded."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(LEAVE_WAIT_S):
                async with self.client.pipeline(transaction=False) as pipe:
                    pipe.zrem(admission_key(self.spec.key_prefix), self.spec.job_id)
                    pipe.delete(self.keys.up)
                    await pipe.execute()
