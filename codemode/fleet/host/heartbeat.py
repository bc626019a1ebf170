"""The host's heartbeat: one key per FleetExecutor, refreshed while it lives.

Workers running this host's jobs look at the key on every lease refresh. When it lapses
(the host's process died, stalled, or lost Redis for longer than ``host_ttl_ms``) the
program's pending tool calls reject with :func:`codemode._texts.host_gone_text` and its slot
is freed. The key is refreshed from a thread of its own (``redis/beat.py``), with a
synchronous client made from the fleet's settings, not from the event loop: a tool that
blocks the loop makes the host busy, not gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis
import redis.asyncio as aioredis

from ..errors import BROKER_ERRORS
from ..redis.beat import BeatThread
from ..redis.client import sync_client
from ..settings import BrokerSettings

__all__ = ["HostHeartbeat"]

log = logging.getLogger("codemode.fleet")

STOP_WAIT_S = 2.0
"""How long ``stop`` waits for a beat in flight (and for the key's deletion)."""


class HostHeartbeat:
    """The heartbeat key ``key`` of one host: written once on the loop's ``client`` (so a
    Redis that is gone raises there), then refreshed every third of ``host_ttl_ms`` on a
    thread of its own, over a client made from ``settings``."""

    def __init__(self, settings: BrokerSettings, client: aioredis.Redis, key: str) -> None:
        self.settings = settings
        self.client = client
        self.key = key
        self.ttl_ms = settings.host_ttl_ms
        self._sync: redis.Redis | None = None
        self._thread: BeatThread | None = None
        self._failing = False

    async def beat(self) -> None:
        await self.client.set(self.key, b"1", px=self.ttl_ms)

    async def start(self) -> None:
        """Write the key once (raising if Redis is unreachable), then keep it fresh."""
        await self.beat()
        self._sync = sync_client(self.settings)
        self._thread = BeatThread("codemode-host-heartbeat", self.ttl_ms / 3000, self._beat_now)
        self._thread.start()

    def _beat_now(self) -> None:
        """One beat, on the heartbeat's thread."""
        assert self._sync is not None
        try:
            self._sync.set(self.key, b"1", px=self.ttl_ms)
        except BROKER_ERRORS as exc:
            if not self._failing:
                log.warning("host heartbeat: Redis unreachable (%s); retrying", exc)
            self._failing = True
        else:
            if self._failing:
                log.info("host heartbeat: Redis reachable again")
            self._failing = False

    async def stop(self) -> None:
        """Stop beating and delete the key: this host's running jobs are told at once."""
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.stop, STOP_WAIT_S)
        sync, self._sync = self._sync, None
        if sync is not None:
            with contextlib.suppress(Exception):
                sync.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_WAIT_S):
                await self.client.delete(self.key)
