"""A job's reply channel: two Redis lists, written with an expiry, read with BLPOP.

Lists, not pub/sub: a message pushed while nobody is waiting stays until it is read or its
key expires (a published message with no listener would be lost). Every push re-arms the
key's expiry in the same command, so a channel never outlives its job by more than
``key_ttl_ms``.

These are the fleet's hottest commands (a relayed tool call is a push and a BLPOP on each
side), so they go over :class:`~codemode.fleet._link.Link` connections, not through the
redis-py client (see ``_link.py``):

* every push of one process shares one link, pipelined: any number in flight, one
  connection (a program may start thousands of calls at once);
* a BLPOP blocks its connection, so each takes an idle link from a stock and gives it
  back; one that is cancelled or fails closes its link instead (its reply may still come).
  A stocked link idle longer than the health-check interval is closed, not reused (a
  half-open socket would swallow the next command).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence

import hiredis
import redis.asyncio as aioredis
import redis.exceptions

from broker_config import MAX_BLOCKING_WAIT_S

from ._link import Link, open_link, pack
from ._scripts import PUSH_SCRIPT

__all__ = ["ReplyChannels"]

MIN_WAIT_S = 0.01
"""BLPOP's timeout 0 means "forever": never send it."""
STALE_AFTER_S = 10.0
"""A stocked link idle this long is closed rather than reused (redis-py's health-check
interval for the fleet's pooled connections)."""


class ReplyChannels:
    """The reply channels' push and pop for one process's event loop."""

    def __init__(self, pool: aioredis.ConnectionPool, *, timeout_s: float) -> None:
        self._pool = pool
        self._timeout_s = timeout_s
        self._pusher: Link | None = None
        self._pusher_lock = asyncio.Lock()
        self._stock: list[Link] = []
        self._sha = hashlib.sha1(PUSH_SCRIPT.encode()).hexdigest()
        self._closed = False

    async def push(self, key: str, *messages: bytes, ttl_ms: int) -> None:
        """Append ``messages`` to ``key`` and re-arm its expiry, in one command (a script:
        atomic, and one reply to wait for)."""
        link = self._pusher
        if link is None or not link.usable or self._stale(link):
            link = await self._new_pusher()
        reply = await link.command(
            pack("EVALSHA", self._sha, 1, key, ttl_ms, *messages))
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            # Redis restarted (or flushed its scripts): send the script itself, once.
            reply = await link.command(
                pack("EVAL", PUSH_SCRIPT, 1, key, ttl_ms, *messages))
        if isinstance(reply, hiredis.ReplyError):
            raise redis.exceptions.ResponseError(str(reply))

    async def pop(self, keys: Sequence[str], wait_s: float) -> bytes | None:
        """The next message on ``keys``, waiting at most ``wait_s`` (clamped to the fleet's
        longest blocking wait, which the socket timeout exceeds); ``None`` when nothing came."""
        wait = min(max(wait_s, MIN_WAIT_S), MAX_BLOCKING_WAIT_S)
        link = await self._take()
        kept = False
        try:
            reply = await link.command(pack("BLPOP", *keys, wait))
            kept = True
        finally:
            if kept and not self._closed:
                link.idle_since = time.monotonic()
                self._stock.append(link)
            else:
                link.close()
        if reply is None:
            return None
        if isinstance(reply, hiredis.ReplyError):
            raise redis.exceptions.ResponseError(str(reply))
        value = reply[1]
        return value if isinstance(value, bytes) else str(value).encode()

    async def aclose(self) -> None:
        """Close every link (a BLPOP in flight fails with ``ConnectionError``)."""
        self._closed = True
        if self._pusher is not None:
            self._pusher.close()
        for link in self._stock:
            link.close()
        self._stock.clear()

    @staticmethod
    def _stale(link: Link) -> bool:
        return not link.busy and link.idle_since < time.monotonic() - STALE_AFTER_S

    async def _open(self) -> Link:
        if self._closed:
            raise redis.exceptions.ConnectionError("The fleet's reply channels were closed.")
        return await open_link(self._pool, self._timeout_s)

    async def _take(self) -> Link:
        stock = self._stock
        while stock:
            link = stock.pop()
            if link.usable and not self._stale(link):
                return link
            link.close()
        return await self._open()

    async def _new_pusher(self) -> Link:
        async with self._pusher_lock:  # concurrent first pushes share one connect
            link = self._pusher
            if link is None or not link.usable or self._stale(link):
                if link is not None:
                    link.close()
                link = self._pusher = await self._open()
            return link
