"""A job's reply channel: two Redis lists, written with an expiry, read with BLPOP.

Lists, not pub/sub: a message pushed while nobody is waiting stays until it is read or its
key expires (a published message with no listener would be lost). Every push re-arms the
key's expiry in the same write (``RPUSH`` then ``PEXPIRE``, which Redis runs back to back),
so a channel never outlives its job by more than ``key_ttl_ms``. A reader may pop the list
empty between the two (an empty list is no key, so the ``PEXPIRE`` finds none), which is
what it would have come to anyway. Not a script: Redis spends more running the same two
commands from Lua (``INFO commandstats`` shows it), on the path of every relayed call, twice.

These are the fleet's hottest commands (a relayed tool call is a push and a BLPOP on each
side): like every fleet script they go over links (``link.py``), pushes pipelined on the
shared one, each BLPOP on a link of its own while it waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..settings import MAX_BLOCKING_WAIT_S
from .link import Links, pack

__all__ = ["blocking_wait", "packed_push", "pop", "popped", "push"]

MIN_WAIT_S = 0.01
"""BLPOP's timeout 0 means "forever": never send it."""


def packed_push(key: str, messages: Sequence[bytes], ttl_ms: int) -> tuple[bytes, bytes]:
    """The push as commands packed to send (``RPUSH``, then ``PEXPIRE``), for instance ahead
    of a blocking wait (``Links.blocking``'s ``before``)."""
    return pack("RPUSH", key, *messages), pack("PEXPIRE", key, ttl_ms)


async def push(links: Links, key: str, *messages: bytes, ttl_ms: int) -> None:
    """Append ``messages`` to ``key`` and re-arm its expiry, in one write."""
    await links.call_all(packed_push(key, messages, ttl_ms))


async def pop(
    links: Links, keys: Sequence[str], wait_s: float, *, before: Sequence[bytes] = ()
) -> bytes | None:
    """The next message on ``keys``, waiting at most ``wait_s`` (clamped to the fleet's
    longest blocking wait, which the socket timeout exceeds); ``None`` when nothing came.
    ``before``: pushes (:func:`packed_push`) that go out in the same write."""
    return popped(await links.blocking("BLPOP", *keys, blocking_wait(wait_s), before=before))


def blocking_wait(wait_s: float) -> float:
    """A BLPOP's timeout for a wait of ``wait_s``: never 0 (forever), never longer than the
    fleet's longest blocking wait (which the socket timeout exceeds)."""
    return min(max(wait_s, MIN_WAIT_S), MAX_BLOCKING_WAIT_S)


def popped(item: Any) -> bytes | None:
    """The message in a BLPOP's reply (``[key, message]``), or ``None`` when it timed out."""
    if item is None:
        return None
    value = item[1]
    return value if isinstance(value, bytes) else str(value).encode()
