"""A job's reply channel: two Redis lists, written with an expiry, read with BLPOP.

Lists, not pub/sub: a message pushed while nobody is waiting stays until it is read or its
key expires (a published message with no listener would be lost). Every push re-arms the
key's expiry in the same round trip, so a channel never outlives its job by more than
``key_ttl_ms``.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from broker_config import MAX_BLOCKING_WAIT_S

__all__ = ["pop", "push"]

MIN_WAIT_S = 0.01
"""BLPOP's timeout 0 means "forever": never send it."""


async def push(client: aioredis.Redis, key: str, *messages: bytes, ttl_ms: int) -> None:
    """Append ``messages`` to ``key`` and re-arm its expiry, in one round trip.

    Both commands go out in one write, without MULTI/EXEC (two fewer commands per message
    on the hot path); a key whose PEXPIRE was lost is re-armed by the next heartbeat."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.rpush(key, *messages)
        pipe.pexpire(key, ttl_ms)
        await pipe.execute()


async def pop(client: aioredis.Redis, keys: Sequence[str], wait_s: float) -> bytes | None:
    """The next message on ``keys``, waiting at most ``wait_s`` (clamped to the fleet's
    longest blocking wait, which the socket timeout exceeds); ``None`` when nothing came."""
    wait = min(max(wait_s, MIN_WAIT_S), MAX_BLOCKING_WAIT_S)
    item = await client.blpop(list(keys), timeout=wait)
    if item is None:
        return None
    value = item[1]
    return value if isinstance(value, bytes) else str(value).encode()
