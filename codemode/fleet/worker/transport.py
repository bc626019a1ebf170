"""kombu's Redis transport, with no message that can stop the consumer.

kombu's ``_brpop_read`` decodes what BRPOP popped and hands it on, and an exception there (a
message that is not JSON, an envelope of the wrong shape, a body that is not base64, a task
name Celery cannot look up) ends the worker with "Unrecoverable error", once per such
message. Here the popped bytes are screened first (:func:`screen`: size, UTF-8, JSON, the
envelope's shape) and whatever raises on the rest of the way is caught around the delivery:
either way the message is settled and dropped to the queue's dead-letter list with its
reason (``deadletter.py``). Redis's own errors still propagate (Celery reconnects). A
message whose body kombu cannot read (a compression it cannot undo) is refused the same
way, where Celery would ack it with a log line and no dead letter; an unacked record that
cannot be restored (written by something other than a consumer) is dead-lettered instead of
raising out of every restore sweep. Broadcasts (Celery's remote control, over pub/sub) are
guarded as well.

Everything else is kombu's own: its unacked record of each delivery (written before Celery
sees the message), its ack, its restore, BRPOP. Until this release the channel also kept one
``redis.Redis`` per connection pool instead of kombu's one per command, and wrote the
unacked record after Celery had the message, as one script; ``fleet_bench.py --pieces-ab``
measured that under the bar a private piece must clear, so it went (``benchmarks/README.md``
has the numbers).

The override relies on kombu's private ``Channel._brpop_read`` and what it uses:
``client.parse_response(connection, "BRPOP")``, ``sep``, ``_queue_cycle.rotate``,
``_in_poll``, ``_flush_brpop_reauth`` (from kombu 5.7) and ``connection._deliver(payload,
queue)``; the QoS's ``_delivered`` and ``ack`` (a delivery settled before it is dropped);
``QoS.restore_by_tag``; ``_create_client`` (a client for the dead-letter list); for
broadcasts, ``_receive_one`` and ``_deliver_fanout_message``. :func:`check_kombu_api`
checks them at worker start.

``BrokerSettings.celery_config()`` names :class:`RedisTransport` as ``broker_transport``,
so producers and workers both use it; the URL still says where Redis is.
"""

from __future__ import annotations

import json
import logging
from queue import Empty
from typing import Any, Literal

import msgspec
import redis.exceptions
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from ..wire import MAX_QUEUE_MESSAGE_BYTES
from .deadletter import drop

__all__ = ["KOMBU_INTERNALS", "RedisTransport", "Refused", "check_kombu_api", "screen"]

log = logging.getLogger("codemode.fleet.worker")


KOMBU_INTERNALS = (
    (kombu_redis.Channel, "_brpop_read"),
    (kombu_redis.Channel, "_receive_one"),
    (kombu_redis.Channel, "_deliver_fanout_message"),
    (kombu_redis.Channel, "_in_poll"),
    (kombu_redis.Channel, "sep"),
    (kombu_redis.Channel, "_create_client"),
    (kombu_redis.QoS, "ack"),
    (kombu_redis.QoS, "restore_by_tag"),
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
    """kombu's QoS, whose restore dead-letters a record it cannot restore."""

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


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, with every popped message screened and every delivery
    guarded (the module's docstring says how)."""

    QoS = RedisQoS

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any) -> Any:
        """kombu's; a message whose body kombu could not read (a compression it cannot
        undo) is refused here: Celery would ack it with a log line and no dead letter."""

        def delivered(message: Any) -> Any:
            if message.errors:
                error = message.errors[0][1]
                raise Refused(f"its body could not be read ({type(error).__name__}: {error})")
            return callback(message)

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
            drop(self._command_client(), queue, item, str(exc))
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
            drop(self._command_client(), queue, item, reason)

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
            drop(self._command_client(), queue, text, reason)
            return False
        return True

    def _command_client(self) -> Any:
        """A client for a command outside BRPOP, made as kombu makes its own."""
        return self._create_client()  # type: ignore[no-untyped-call]


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel
