"""kombu's Redis transport, minus a new ``redis.Redis`` object for every command.

kombu's Redis channel builds a fresh client around its connection pool for each command it
sends outside BRPOP (a publish, the unacked bookkeeping of a delivery, an ack). With
redis-py 8, building one costs ~0.35 ms of Python (it fills a table of ~170 response
callbacks), more than the command's own round trip: it was a third of a ``send_task``
and as much again on the worker's side of each delivery. This channel keeps one client per
connection pool instead. A ``redis.Redis`` is safe to share between threads (each command
takes its own connection from the pool), and a new pool (after a reconnect) gets a new
client. Everything else, BRPOP and the unacked restore included, is kombu's.

``BrokerSettings.celery_config()`` names :class:`RedisTransport` as ``broker_transport``,
so producers and workers both use it; the URL still says where Redis is.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis

__all__ = ["RedisTransport"]


class RedisChannel(kombu_redis.Channel):
    _shared_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # BRPOP's own connections: kombu manages them per call
            return super()._create_client(asynchronous=True)  # type: ignore[no-untyped-call]
        client = self._shared_client
        if client is None or client.connection_pool is not self.pool:
            client = self._shared_client = super()._create_client()  # type: ignore[no-untyped-call]
        return client


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel
