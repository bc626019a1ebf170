"""Redis time, as the host estimates it.

The fleet's deadlines are Redis time (``TIME`` inside its scripts), so hosts and workers
with skewed clocks agree on them. A job's start-by time travels inside its Celery message,
and the message is written by the admission script itself (see ``host/producer.py``): the host
has to name the start-by time before it hears Redis's clock for that admission. So it
keeps the offset between Redis time and its own monotonic clock, read once when the
executor connects and refreshed by every admission's answer (which carries Redis time).
The estimate is off by at most a round trip plus the drift between two admissions,
against queue timeouts of seconds; a wall-clock step on the host moves nothing
(the offset is to the monotonic clock).
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

__all__ = ["RedisClock"]


class RedisClock:
    def __init__(self) -> None:
        self._offset_ms: float | None = None

    async def sync(self, client: aioredis.Redis) -> None:
        """Read Redis's clock once (raises redis-py's errors when it is unreachable)."""
        seconds, micros = await client.time()
        self.observe(seconds * 1000 + micros // 1000)

    def observe(self, redis_now_ms: int) -> None:
        """Redis said it is ``redis_now_ms`` (just now)."""
        self._offset_ms = redis_now_ms - time.monotonic() * 1000

    def now_ms(self) -> int:
        """Redis time now, estimated."""
        assert self._offset_ms is not None, "RedisClock.sync() first"
        return int(time.monotonic() * 1000 + self._offset_ms)
