"""A worker's leases on its running jobs, renewed from a thread of its own.

Each running job holds a lease key in Redis; its host checks it (``host/session.py``) and calls
a job whose lease is gone a crash. The leases are renewed by one :class:`LeaseKeeper` per
worker process, on a :class:`~codemode.fleet.redis.beat.BeatThread` with its own synchronous Redis client, every
third of the lease TTL, for every running job in one pipeline: a busy event loop (many jobs,
a slow step) delays no renewal.

Each renewal (``renew.lua``, one per job) also refreshes the job's keys' expiries and its
admission slot, and answers whether the job's host is still there. A host found gone frees
the slot in the same script, and the job is told on its loop (``host_gone``), where its
pending tool calls reject with :func:`codemode._texts.host_gone_text`.

A lease that is no longer this worker's is left alone: the job ended (its last act drops
the lease) or the lease lapsed while the worker stalled, and writing it again would tell the
host a job runs that it may already have reported crashed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import redis

from ..errors import BROKER_ERRORS
from ..redis.beat import BeatThread
from ..redis.client import sync_client
from ..redis.scripts import lua_source
from ..settings import BrokerSettings

__all__ = ["LeaseKeeper"]

log = logging.getLogger("codemode.fleet.worker")

STOP_WAIT_S: Final = 2.0

HOST_THERE: Final = 1
HOST_GONE: Final = 0
NOT_OURS: Final = -1


@dataclass
class _Held:
    keys: Sequence[str]
    host_gone: Callable[[], object]
    told: bool = False


class LeaseKeeper:
    """Renews the leases of the jobs :meth:`hold` names until :meth:`release`; the thread
    starts with the first job and ends at :meth:`close`."""

    def __init__(self, settings: BrokerSettings, worker_id: str) -> None:
        self.settings = settings
        self.worker_id = worker_id
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: redis.Redis | None = None
        self._script: Any = None
        self._thread: BeatThread | None = None
        self._failing = False
        self._closed = False

    def hold(self, job_id: str, keys: Sequence[str], host_gone: Callable[[], object]) -> None:
        """Renew ``job_id``'s lease from now on (``keys``: lease, host, up, down, claim,
        admission); ``host_gone`` is called once, on the calling loop, if its host lapses."""
        with self._lock:
            if self._closed:
                return
            self._held[job_id] = _Held(tuple(keys), host_gone)
            if self._thread is None:
                self._start()

    def release(self, job_id: str) -> None:
        with self._lock:
            self._held.pop(job_id, None)

    def _start(self) -> None:
        s = self.settings
        self._loop = asyncio.get_running_loop()
        self._client = sync_client(s)
        self._script = self._client.register_script(lua_source("renew"))
        self._thread = BeatThread("codemode-leases", s.lease_ttl_ms / 3000, self.renew)
        self._thread.start()

    def renew(self) -> None:
        """One round: every held lease, in one pipeline (on the keeper's thread)."""
        with self._lock:
            held = list(self._held.items())
        if not held or self._client is None:
            return
        s = self.settings
        pipe = self._client.pipeline(transaction=False)
        for job_id, entry in held:
            self._script(
                keys=entry.keys, args=[self.worker_id, s.lease_ttl_ms, s.key_ttl_ms, job_id], client=pipe
            )
        try:
            results = pipe.execute(raise_on_error=False)
        except BROKER_ERRORS as exc:
            if not self._failing:
                log.warning("worker %s: lease renewal failed (Redis unreachable: %s)", self.worker_id, exc)
            self._failing = True
            return
        if self._failing:
            log.info("worker %s: lease renewal works again", self.worker_id)
        self._failing = False
        for (job_id, entry), result in zip(held, results, strict=True):
            self._settle(job_id, entry, result)

    def _settle(self, job_id: str, entry: _Held, result: object) -> None:
        if isinstance(result, Exception):
            log.warning("job %s: lease renewal refused (%s)", job_id, result)
        elif result == NOT_OURS:
            with self._lock:
                still_held = self._held.get(job_id) is entry
            if still_held:  # not the end of the job: the lease lapsed under it
                log.warning(
                    "job %s: its lease lapsed while it ran (this worker stalled, or lost Redis, "
                    "for longer than the lease TTL); its host may have reported it crashed",
                    job_id,
                )
                self.release(job_id)
        elif result == HOST_GONE and not entry.told:
            entry.told = True
            if self._loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody to tell
                    self._loop.call_soon_threadsafe(entry.host_gone)

    def close(self) -> None:
        """Stop renewing (at shutdown: the jobs have ended or are abandoned)."""
        with self._lock:
            self._closed = True
            self._held.clear()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop(STOP_WAIT_S)
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
