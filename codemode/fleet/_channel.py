"""A job's reply channel: two Redis lists, written with an expiry, read with BLPOP.

Lists, not pub/sub: a message pushed while nobody is waiting stays until it is read or its
key expires (a published message with no listener would be lost). Every push re-arms the
key's expiry in the same command (a script: atomic, and one reply to wait for), so a
channel never outlives its job by more than ``key_ttl_ms``.

These are the fleet's hottest commands (a relayed tool call is a push and a BLPOP on each
side): like every fleet script they go over links (``_link.py``), pushes pipelined on the
shared one, each BLPOP on a link of its own while it waits.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker_config import MAX_BLOCKING_WAIT_S

from ._link import Links
from ._scripts import FleetScripts

__all__ = ["pop", "push"]

MIN_WAIT_S = 0.01
"""BLPOP's timeout 0 means "forever": never send it."""


async def push(scripts: FleetScripts, key: str, *messages: bytes, ttl_ms: int) -> None:
    """Append ``messages`` to ``key`` and re-arm its expiry, in one command."""
    await scripts.push(key, messages, ttl_ms)


async def pop(links: Links, keys: Sequence[str], wait_s: float, *,
              before: Sequence[bytes] = ()) -> bytes | None:
    """The next message on ``keys``, waiting at most ``wait_s`` (clamped to the fleet's
    longest blocking wait, which the socket timeout exceeds); ``None`` when nothing came.
    ``before``: pushes (:meth:`FleetScripts.packed_push`) that go out in the same write."""
    wait = min(max(wait_s, MIN_WAIT_S), MAX_BLOCKING_WAIT_S)
    item = await links.blocking("BLPOP", *keys, wait, before=before)
    if item is None:
        return None
    value = item[1]
    return value if isinstance(value, bytes) else str(value).encode()
