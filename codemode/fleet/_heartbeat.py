"""The host's heartbeat: one key per FleetExecutor, refreshed while it lives.

Workers running this host's jobs look at the key on every lease refresh. When it lapses
(the host died, or its event loop stalled for longer than ``host_ttl_ms``) the program's
pending tool calls reject with :func:`codemode._texts.host_gone_text` and its slot is freed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.asyncio as aioredis

from ._errors import BROKER_ERRORS

__all__ = ["HostHeartbeat"]

log = logging.getLogger("codemode.fleet")


class HostHeartbeat:
    def __init__(self, client: aioredis.Redis, key: str, ttl_ms: int) -> None:
        self.client = client
        self.key = key
        self.ttl_ms = ttl_ms
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def beat(self) -> None:
        await self.client.set(self.key, b"1", px=self.ttl_ms)

    async def start(self) -> None:
        """Write the key once (raising if Redis is unreachable), then keep it fresh."""
        await self.beat()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        interval = self.ttl_ms / 3000
        failing = False
        while not self._stopping:
            await asyncio.sleep(interval)
            if self._stopping:
                return
            try:
                await self.beat()
            except BROKER_ERRORS as exc:
                if not failing:
                    log.warning("host heartbeat: Redis unreachable (%s); retrying", exc)
                failing = True
            else:
                if failing:
                    log.info("host heartbeat: Redis reachable again")
                failing = False

    async def stop(self) -> None:
        """Stop beating and delete the key: this host's running jobs are told at once."""
        self._stopping = True
        if self._task is not None:
            # The flag ends the loop even when a cancel lands inside a Redis command and
            # is lost there (redis-py's asyncio client does not always re-raise it).
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), 2.0)
            self._task = None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await self.client.delete(self.key)
