"""kombu's Redis transport, minus a new ``redis.Redis`` object for every command.

kombu's Redis channel builds a fresh client around its connection pool for each command it
sends outside BRPOP (a publish, the unacked bookkeeping of a delivery, an ack). With
redis-py 8, building one costs ~0.35 ms of Python (it fills a table of ~170 response
callbacks), more than the command's own round trip: it was a third of a ``send_task``
and as much again on the worker's side of each delivery. This channel keeps one client per
connection pool instead. A ``redis.Redis`` is safe to share between threads (each command
takes its own connection from the pool), and a new pool (after a reconnect) gets a new
client.

It also takes the unacked record of a delivery off the delivery's path. kombu records each
message it hands to a consumer (``QoS.append``: ZADD to the unacked index, HSET of the
message, in MULTI/EXEC) and waits for Redis's answer before Celery sees the message: a
round trip, and redis-py's pipeline around it, on the consumer's thread ahead of every job.
Here the record is *sent* first, Celery gets the message, and the answer is read after
(``RedisChannel.basic_consume``): the record is in Redis's hands before Celery has the
message, as before, and Celery's hand-off to its pool runs while Redis answers.
Everything else, BRPOP, acks and the unacked restore included, is kombu's.

``BrokerSettings.celery_config()`` names :class:`RedisTransport` as ``broker_transport``,
so producers and workers both use it; the URL still says where Redis is.
"""

from __future__ import annotations

from time import time
from typing import Any

import msgspec
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

__all__ = ["RedisTransport"]


class RedisQoS(kombu_redis.QoS):
    """kombu's QoS, with ``append`` split into a send (:meth:`append`) and the reading of
    Redis's answer (:meth:`read_records`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._unread: list[tuple[Any, int]] = []
        """Records sent whose answers are still to be read, in the order sent."""

    def _send(self, *commands: tuple[Any, ...]) -> tuple[Any, int]:
        """Send ``commands`` as one MULTI/EXEC on a connection of the channel's pool (the
        one kombu's own bookkeeping uses, not BRPOP's); returns the connection, whose
        answers are still to be read (:meth:`_read`), and how many commands it carries."""
        pool = self.channel.pool
        connection = pool.get_connection()
        try:
            connection.send_packed_command(
                connection.pack_commands([("MULTI",), *commands, ("EXEC",)]))
        except BaseException:
            connection.disconnect()
            pool.release(connection)
            raise
        return connection, len(commands)

    def _read(self, sent: tuple[Any, int]) -> None:
        """Read the answers of one :meth:`_send` (MULTI's, each command's QUEUED, EXEC's),
        raise the first error among them as redis-py's pipeline does, and give the
        connection back."""
        connection, commands = sent
        try:
            for _ in range(commands + 1):
                connection.read_response()
            answers = connection.read_response() or ()  # EXEC's: one per command
        except BaseException:
            connection.disconnect()  # answers may be left unread on it
            raise
        finally:
            self.channel.pool.release(connection)
        for answer in answers:
            if isinstance(answer, Exception):  # a command that failed inside the transaction
                raise answer

    def append(self, message: Any, delivery_tag: Any) -> None:
        delivery = message.delivery_info
        # The record kombu's restore reads back (``loads``): the message as it came from the
        # queue, written by msgspec (kombu's encoder was ~40,000 instructions of it a job).
        record = msgspec.json.encode(
            [message._raw, delivery["exchange"], delivery["routing_key"]])
        self._unread.append(self._send(
            ("ZADD", self.unacked_index_key, time(), delivery_tag),
            ("HSET", self.unacked_key, delivery_tag, record)))
        virtual.QoS.append(self, message, delivery_tag)  # type: ignore[no-untyped-call]

    def read_records(self) -> None:
        """Read the answers to the records sent; raise the first failure (as kombu's
        pipeline would have, before the message was handed on)."""
        failure: BaseException | None = None
        while self._unread:
            try:
                self._read(self._unread.pop(0))
            except BaseException as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def ack(self, delivery_tag: Any) -> None:
        """kombu's ack (the record removed, then the tag forgotten) without redis-py's
        pipeline object around its two commands: the same bytes, less Python."""
        self._read(self._send(("ZREM", self.unacked_index_key, delivery_tag),
                              ("HDEL", self.unacked_key, delivery_tag)))
        virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]


class RedisChannel(kombu_redis.Channel):
    QoS = RedisQoS
    _shared_client: Any = None

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str,
                      **kwargs: Any) -> Any:
        """kombu's, with the delivery's unacked record read after ``callback`` (Celery's
        hand-off of the message) instead of before it."""
        def delivered(message: Any) -> Any:
            try:
                return callback(message)
            finally:
                self.qos.read_records()

        return super().basic_consume(queue, no_ack, delivered, consumer_tag, **kwargs)  # type: ignore[no-untyped-call]

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # BRPOP's own connections: kombu manages them per call
            return super()._create_client(asynchronous=True)  # type: ignore[no-untyped-call]
        client = self._shared_client
        if client is None or client.connection_pool is not self.pool:
            client = self._shared_client = super()._create_client()  # type: ignore[no-untyped-call]
        return client


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel
