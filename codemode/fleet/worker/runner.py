"""The worker process's job runner: one event loop, one isolate executor, one Redis client
and its links, and what outlives a single job (the lease keeper, retained handles, this
worker's liveness keys).

Each job runs as a :class:`~.job.Job`. ``keep_alive`` refreshes this worker's liveness keys
every third of the lease TTL and releases the handles of hosts that are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from typing import Final

import msgspec
import redis.asyncio as aioredis

from ..._executor import IsolateExecutor
from ..._faults import Cancelled, ExecutorError
from ..errors import BROKER_ERRORS
from ..redis.keys import JobKeys, admission_key, host_key, worker_key
from ..redis.link import Links
from ..redis.scripts import FleetScripts
from ..settings import BrokerSettings
from ..wire import Failed, JobSpec, encode, job_from_celery
from .gate import StartGate
from .handles import WorkerHandles
from .job import Job, JobEnd
from .leases import LeaseKeeper
from .metrics import FleetTally

__all__ = ["JobRunner"]

log = logging.getLogger("codemode.fleet.worker")

REVOKED_EARLY_KEPT: Final = 1000
"""Revokes of jobs not (yet) running here that a worker remembers, in case the job starts."""
NOT_STARTED_TEXT: Final = "An operator revoked this job before it started; nothing ran."


class JobRunner:
    """Runs jobs in one worker process, on one event loop, with one executor and client."""

    def __init__(
        self,
        executor: IsolateExecutor,
        client: aioredis.Redis,
        settings: BrokerSettings,
        worker_id: str,
        gate: StartGate,
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
        self.tally = FleetTally()
        """The fleet's counts (claims by state): the runtime's, served with its metrics."""
        self.gate = gate
        """Opened as each job starts its run, or ends without one (``gate.py``)."""
        self.jobs: dict[str, Job] = {}
        """The jobs running here, by id (a revoke finds them here)."""
        self._revoked_early: OrderedDict[str, None] = OrderedDict()
        """Ids revoked while their job was not running here: one that starts is cancelled."""

    async def run(self, data: object) -> JobEnd:
        """Run one job (a :class:`JobSpec`, or a Celery message's job data); returns how it
        ended."""
        try:
            spec = data if isinstance(data, JobSpec) else job_from_celery(data)
        except (msgspec.ValidationError, RecursionError) as exc:
            log.error("refused a malformed job: %s", exc)
            return JobEnd(f"refused: malformed job ({exc})")
        job = Job(self, spec)
        if self._revoked_early.pop(spec.job_id, False) is None:
            job.cancelled = True
        self.jobs[spec.job_id] = job
        try:
            return await job.run()
        finally:
            self.jobs.pop(spec.job_id, None)
            self.gate.open(spec.job_id)  # refused, or ended: the consumer waits no more

    def revoke(self, job_id: str) -> None:
        """End the job ``job_id`` with CANCELLED if it runs here, or if it starts later."""
        job = self.jobs.get(job_id)
        if job is not None:
            job.revoke()
            return
        self._revoked_early[job_id] = None
        while len(self._revoked_early) > REVOKED_EARLY_KEPT:
            self._revoked_early.popitem(last=False)

    async def cancel_unstarted(self, data: object) -> None:
        """A job revoked before it started (Celery discarded its message): make sure no
        worker starts it, and tell its host CANCELLED (``started=False``)."""
        try:
            spec = data if isinstance(data, JobSpec) else job_from_celery(data)
        except (msgspec.ValidationError, RecursionError):
            return
        keys = JobKeys.of(spec.key_prefix, spec.job_id)
        admission = admission_key(spec.key_prefix)
        try:
            settled = await self.scripts.settle(
                keys.claim,
                admission,
                start_by_ms=spec.start_by_ms,
                job_id=spec.job_id,
                key_ttl_ms=self.settings.key_ttl_ms,
                mark="cancelled",
                force=True,
            )
            if settled.state != "done":
                return  # claimed already: that worker ends it, or it has ended
            fault = Failed(Cancelled(NOT_STARTED_TEXT).to_data())
            await self.scripts.finish(
                [keys.up, keys.down, admission, keys.lease],
                key_ttl_ms=self.settings.key_ttl_ms,
                job_id=spec.job_id,
                final=encode(fault),
                close=None,
            )
        except BROKER_ERRORS as exc:
            log.warning("job %s: could not tell its host it was revoked (%s)", spec.job_id, exc)

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
