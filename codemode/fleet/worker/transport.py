"""kombu's Redis transport: one ``redis.Redis`` per pool, the unacked record after the
hand-off, and no message that can stop the consumer.

kombu's Redis channel builds a fresh client around its connection pool for each command it
sends outside BRPOP (a publish, the unacked bookkeeping of a delivery, an ack). With
redis-py 8, building one costs more Python than the command's own round trip (it fills a
table of response callbacks), on both sides of each delivery. This channel keeps one client per
connection pool instead. A ``redis.Redis`` is safe to share between threads (each command
takes its own connection from the pool), and a new pool (after a reconnect) gets a new
client.

It also takes the unacked record of a delivery off the delivery's path. kombu records each
message it hands to a consumer (``QoS.append``: ZADD to the unacked index, HSET of the
message, in MULTI/EXEC) and waits for Redis's answer before Celery sees the message: a
round trip, and redis-py's pipeline around it, on the consumer's thread ahead of every job.
Here Celery gets the message first (for a job: the job starts on the worker's loop), then
the record is sent and its answer read (``RedisChannel.basic_consume``). A worker that dies
in that fraction of a millisecond loses the message, as one dying between kombu's BRPOP
and its record always could; the job's host still gets its answer from its own deadline
(nothing ran: JOB_EXPIRED; claimed: WORKER_CRASHED). The record and the ack each go as one small script (``RECORD``, ``FORGET``)
where kombu sends MULTI, two commands and EXEC: as atomic, and one reply to parse instead
of four. Everything else (sending BRPOP, the unacked restore) is kombu's, on the same keys.

A delivery settled inside the callback that received it (Celery rejects a task it does
not know before returning) has its record dropped unsent (``RedisQoS.ack``): a record sent
after its ack would stay in the unacked hash and be redelivered after every visibility
timeout.

No message can stop the consumer. kombu's ``_brpop_read`` decodes what BRPOP popped and
hands it on, and an exception there (a message that is not JSON, an envelope of the wrong
shape, a body that is not base64, a task name Celery cannot look up) ends the worker with
"Unrecoverable error", once per such message. Here the popped bytes are screened first
(:func:`screen`: size, UTF-8, JSON, the envelope's shape) and whatever raises on the rest
of the way is caught around the delivery: either way the message is settled and dropped to
the queue's dead-letter list with its reason (``deadletter.py``). Redis's own errors still
propagate (Celery reconnects). The override relies on kombu's private ``Channel._brpop_read``
and what it uses: ``client.parse_response(connection, "BRPOP")``, ``sep``,
``_queue_cycle.rotate``, ``_in_poll``, ``_flush_brpop_reauth`` (from kombu 5.7) and
``connection._deliver(payload, queue)``; for broadcasts (Celery's remote control, over
pub/sub), ``_receive_one`` and ``_deliver_fanout_message``.

``BrokerSettings.celery_config()`` names :class:`RedisTransport` as ``broker_transport``,
so producers and workers both use it; the URL still says where Redis is.
"""

from __future__ import annotations

import json
import logging
from queue import Empty
from time import time
from typing import Any, Literal

import msgspec
import redis.exceptions
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from ..redis.scripts import lua_source
from ..wire import MAX_QUEUE_MESSAGE_BYTES
from .deadletter import drop

__all__ = ["KOMBU_INTERNALS", "RedisTransport", "Refused", "check_kombu_api", "screen"]

log = logging.getLogger("codemode.fleet.worker")


RECORD = lua_source("record")
"""kombu's unacked record of a delivery: its tag in the index (scored by the time), the
message in the hash (``record.lua``)."""
FORGET = lua_source("forget")
"""kombu's ack: the record out of both (``forget.lua``)."""


KOMBU_INTERNALS = (
    (kombu_redis.Channel, "_brpop_read"),
    (kombu_redis.Channel, "_receive_one"),
    (kombu_redis.Channel, "_deliver_fanout_message"),
    (kombu_redis.Channel, "_in_poll"),
    (kombu_redis.Channel, "sep"),
    (kombu_redis.QoS, "append"),
    (kombu_redis.QoS, "ack"),
    (kombu_redis.QoS, "reject"),
    (virtual.Transport, "_deliver"),
)
"""What of kombu's Redis transport this module overrides or calls (its docstring says how);
:func:`check_kombu_api` checks each is there (``_queue_cycle``, an attribute kombu's channel
sets on each instance, is met at the first BRPOP instead)."""


def check_kombu_api(internals: tuple[tuple[type, str], ...] = KOMBU_INTERNALS) -> None:
    """Raise ``RuntimeError`` naming each internal of kombu's Redis transport that the
    installed kombu no longer has (at worker start, and in the tests): a release that moved
    them must be checked against codemode/fleet/worker/transport.py before it is used."""
    missing = [
        f"{owner.__module__}.{owner.__qualname__}.{name}"
        for owner, name in internals
        if not hasattr(owner, name)
    ]
    if missing:
        raise RuntimeError(
            f"The installed kombu has no {', '.join(missing)}: codemode's Redis transport "
            "(codemode/fleet/worker/transport.py) overrides or calls them; update it for this "
            "kombu release, or pin kombu below it."
        )


class Refused(Exception):
    """A popped message no worker can take; the text says why."""


class _DeliveryInfo(msgspec.Struct):
    exchange: str
    routing_key: str


class _Properties(msgspec.Struct):
    delivery_tag: str
    delivery_info: _DeliveryInfo
    body_encoding: Literal["base64", "utf-8"] | None = None


class _Envelope(msgspec.Struct):
    """What kombu reads of a message in its Redis envelope without checking it; what the
    consumer makes of the rest (Celery: the task its headers name) is its own to check."""

    properties: _Properties
    headers: dict[str, Any] | None = None
    body: str = ""
    content_type: str | None = msgspec.field(default=None, name="content-type")
    content_encoding: str | None = msgspec.field(default=None, name="content-encoding")


def screen(item: bytes) -> dict[str, Any]:
    """The envelope kombu would decode from ``item``, once it is one a consumer can take;
    raises :class:`Refused` saying what is wrong with it."""
    if len(item) > MAX_QUEUE_MESSAGE_BYTES:
        raise Refused(f"{len(item)} bytes, over the {MAX_QUEUE_MESSAGE_BYTES} a queue message may have")
    try:
        text = item.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 text ({exc})") from None
    try:
        # kombu's own decoder, as its _brpop_read would use
        payload = loads(text)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, RecursionError) as exc:
        raise Refused(f"not JSON ({type(exc).__name__}: {exc})") from None
    try:
        msgspec.convert(payload, _Envelope)
    except msgspec.ValidationError as exc:
        raise Refused(f"not a message in kombu's envelope ({exc})") from None
    except RecursionError:
        raise Refused("not a message in kombu's envelope (nested too deeply)") from None
    result: dict[str, Any] = payload
    return result


class RedisQoS(kombu_redis.QoS):
    """kombu's QoS, with ``append`` split into making the record (:meth:`append`, before
    Celery has the message) and sending it and reading Redis's answer (:meth:`send_records`,
    once Celery has handed the message on)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._unsent: list[tuple[float, Any, bytes]] = []
        """Records made and not yet sent (:meth:`send_records`)."""
        self._unread: list[Any] = []
        """Records sent whose answers are still to be read, in the order sent."""

    def _send(self, script: str, *args: Any) -> Any:
        """Send one ``EVAL`` of ``script`` (keys: the unacked index, then the unacked hash)
        on a connection of the channel's pool (the one kombu's own bookkeeping uses, not
        BRPOP's); returns the connection, whose answer is still to be read (:meth:`_read`).
        One script where kombu sends MULTI, two commands and EXEC: atomic all the same, and
        one reply to read instead of four."""
        pool = self.channel.pool
        connection = pool.get_connection()
        try:
            connection.send_command("EVAL", script, 2, self.unacked_index_key, self.unacked_key, *args)
        except BaseException:
            connection.disconnect()
            pool.release(connection)
            raise
        return connection

    def _read(self, connection: Any) -> None:
        """Read the answer of one :meth:`_send` (an error reply raises) and give the
        connection back."""
        try:
            connection.read_response()
        except redis.exceptions.ResponseError:
            raise  # the reply was read: the connection is fine
        except BaseException:
            connection.disconnect()  # its answer may be left unread on it
            raise
        finally:
            self.channel.pool.release(connection)

    def append(self, message: Any, delivery_tag: Any) -> None:
        delivery = message.delivery_info
        # The record kombu's restore reads back (``loads``): the message as it came from the
        # queue, written by msgspec (cheaper than kombu's encoder, on every delivery).
        record = msgspec.json.encode([message._raw, delivery["exchange"], delivery["routing_key"]])
        self._unsent.append((time(), delivery_tag, record))
        virtual.QoS.append(self, message, delivery_tag)  # type: ignore[no-untyped-call]

    def send_records(self) -> None:
        """Send the records made, then read Redis's answers; raise the first failure (as
        kombu's pipeline would have, before the message was handed on)."""
        while self._unsent:
            self._unread.append(self._send(RECORD, *self._unsent.pop(0)))
        failure: BaseException | None = None
        while self._unread:
            try:
                self._read(self._unread.pop(0))
            except BaseException as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _unsend(self, delivery_tag: Any) -> bool:
        """Drop the record of ``delivery_tag`` if it was made and not sent (the delivery is
        settled inside the callback that received it); says whether there was one."""
        for index, (_at, tag, _record) in enumerate(self._unsent):
            if tag == delivery_tag:
                del self._unsent[index]
                return True
        return False

    def ack(self, delivery_tag: Any) -> None:
        """kombu's ack (the record removed, then the tag forgotten) as one script instead of
        redis-py's pipeline around its two commands; a record not sent yet is just dropped."""
        if not self._unsend(delivery_tag):
            self._read(self._send(FORGET, delivery_tag))
        virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]

    def restore_by_tag(self, tag: Any, client: Any = None, leftmost: bool = False) -> None:
        """kombu's restore of one unacked record to its queue; a record that cannot be
        restored (written by something other than a consumer: not JSON, not kombu's
        ``[message, exchange, routing_key]``) raised out of every sweep, for good. It is
        forgotten and kept in ``unacked.dead``."""
        try:
            super().restore_by_tag(tag, client=client, leftmost=leftmost)  # type: ignore[no-untyped-call]
        except (redis.exceptions.RedisError, OSError):
            raise
        except Exception as exc:
            with self.channel.conn_or_acquire(client) as conn:
                record = conn.hget(self.unacked_key, tag)
                conn.pipeline().zrem(self.unacked_index_key, tag).hdel(self.unacked_key, tag).execute()
                reason = f"an unacked record that cannot be restored ({type(exc).__name__}: {exc})"
                drop(conn, self.unacked_key, record or b"", reason)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        """kombu's reject: without requeue, an ack (the record goes); with it, kombu's
        requeue, which reads the record back from Redis, so it is sent first."""
        if not requeue:
            self.ack(delivery_tag)
            return
        self.send_records()
        super().reject(delivery_tag, requeue=True)  # type: ignore[no-untyped-call]


class RedisChannel(kombu_redis.Channel):
    QoS = RedisQoS
    _shared_client: Any = None

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any) -> Any:
        """kombu's, with the delivery's unacked record sent after ``callback`` (Celery's
        hand-off of the message) instead of before it. A message whose body kombu could
        not read (a compression it cannot undo) is refused here: Celery would ack it with
        a log line and no dead letter."""

        def delivered(message: Any) -> Any:
            if message.errors:
                error = message.errors[0][1]
                raise Refused(f"its body could not be read ({type(error).__name__}: {error})")
            try:
                return callback(message)
            finally:
                self.qos.send_records()

        return super().basic_consume(queue, no_ack, delivered, consumer_tag, **kwargs)  # type: ignore[no-untyped-call]

    def _brpop_read(self, **options: Any) -> bool:
        """kombu's, with the popped message handed to :meth:`_take` instead of decoded
        and delivered unguarded."""
        try:
            try:
                dest_item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()  # the next BRPOP reconnects
                raise
            if not dest_item:
                raise Empty()
            dest, item = dest_item
            queue = bytes_to_str(dest).rsplit(self.sep, 1)[0]  # type: ignore[no-untyped-call]
            self._queue_cycle.rotate(queue)
            self._take(queue, item)
            return True
        finally:
            self._in_poll = None  # type: ignore[assignment]
            flush_reauth = getattr(self, "_flush_brpop_reauth", None)  # kombu 5.7 and later
            if flush_reauth is not None:
                flush_reauth()

    def _take(self, queue: str, item: bytes) -> None:
        """Deliver one popped message, or drop it with its reason: nothing a message holds
        may raise out of here, only Redis's own errors."""
        try:
            payload = screen(item)
        except Refused as exc:
            drop(self._create_client(), queue, item, str(exc))
            return
        try:
            self.connection._deliver(payload, queue)
        except (redis.exceptions.RedisError, OSError):
            raise
        except Exception as exc:
            tag = payload["properties"]["delivery_tag"]
            if tag in self.qos._delivered:  # settle it: no unacked record, no redelivery
                self.qos.ack(tag)
            reason = (
                str(exc)
                if isinstance(exc, Refused)
                else f"the consumer could not take it ({type(exc).__name__}: {exc})"
            )
            drop(self._create_client(), queue, item, reason)

    def _receive_one(self, c: Any) -> Any:
        """kombu's read of one broadcast (pub/sub: Celery's remote control), which drops
        a message that is not JSON itself but lets a decoder's RecursionError out."""
        try:
            return super()._receive_one(c)  # type: ignore[no-untyped-call]
        except RecursionError:
            log.error("dropped a broadcast nested past the JSON decoder's limit")
            return False

    def _deliver_fanout_message(self, message: Any, exchange: str) -> bool:
        """kombu's delivery of a decoded broadcast, guarded as :meth:`_take` guards a
        queue's message: one that is not kombu's envelope, or that its consumer cannot take,
        is dropped to the dead-letter list of the queue it was for."""
        queue = self._fanout_to_queue.get(exchange, exchange)
        try:
            msgspec.convert(message, _Envelope)
            self.connection._deliver(message, queue)
        except (redis.exceptions.RedisError, OSError):
            raise
        except Exception as exc:
            if isinstance(exc, msgspec.ValidationError):
                reason = f"a broadcast not in kombu's envelope ({exc})"
            else:
                reason = f"the consumer could not take a broadcast ({type(exc).__name__}: {exc})"
            try:
                text = json.dumps(message)
            except (ValueError, TypeError, RecursionError):
                text = repr(type(message))
            drop(self._create_client(), queue, text, reason)
            return False
        return True

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # BRPOP's own connections: kombu manages them per call
            return super()._create_client(asynchronous=True)  # type: ignore[no-untyped-call]
        client = self._shared_client
        if client is None or client.connection_pool is not self.pool:
            client = self._shared_client = super()._create_client()  # type: ignore[no-untyped-call]
        return client


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel
