"""The fleet's redis-py clients, made from its settings in one place.

* :func:`make_client`: the ``redis.asyncio`` client of a host or a worker's event loop,
  with a pool sized for every job the fleet admits. The fleet's scripts and reply channels
  run over links made from its pool's settings (``link.py``).
* :func:`sync_client`: a synchronous client for a thread that must not use a loop's client
  (the host's heartbeat, a worker's leases, its dead letters and pings).

Neither retries a command on its own: a retried RPUSH whose first reply was lost would
deliver a tool call twice, so the fleet decides itself what a lost connection means.
"""

from __future__ import annotations

from typing import Final

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..settings import BrokerSettings

__all__ = ["POOL_HEADROOM", "make_client", "sync_client"]

POOL_HEADROOM: Final = 64
"""Connections a client may open beyond one per job in flight: the host's heartbeat, its
clock, cleanups of jobs whose callers left."""


def make_client(settings: BrokerSettings) -> aioredis.Redis:
    """A ``redis.asyncio`` client with the fleet's socket settings and no silent retries.

    The fleet's scripts and reply channels run over links made from this client's pool
    settings (``link.py``); the client itself sends the rest: a job's lease check, the
    host's heartbeat, cleanups. Every job in flight may hold a connection for one of those
    at a time, and the fleet admits at most ``fleet_max_jobs``: the pool has room for all of
    them plus headroom. (redis-py's default pool refuses a 101st connection, which failed
    every job past the 100th in flight from one host with BROKER_UNREACHABLE.)"""
    pool = aioredis.ConnectionPool.from_url(
        settings.redis_url,
        retry=AsyncRetry(NoBackoff(), 0),
        max_connections=settings.fleet_max_jobs + POOL_HEADROOM,
        **settings.redis_kwargs(),
    )
    client: aioredis.Redis = aioredis.Redis.from_pool(pool)
    return client


def sync_client(settings: BrokerSettings) -> redis.Redis:
    """A synchronous client with the fleet's socket settings and no silent retries, for a
    thread of its own (thread-safe; it connects on first use, not here)."""
    return redis.Redis.from_url(settings.redis_url, retry=Retry(NoBackoff(), 0), **settings.redis_kwargs())
