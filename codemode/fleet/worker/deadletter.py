"""Dead letters: a message a worker cannot take is logged once and kept in ``<queue>.dead``.

Anyone who can write to a queue can put anything on it, and no message may stop or wedge
the worker that pops it. A worker takes a message apart in three places: its channel reads
the transport envelope (``_transport.py``), Celery's consumer looks up the task it names,
and the execute task's hand-off reads the job (``strategy.py``). Each refuses what it
cannot read by calling :func:`drop`: one log line with the reason, and the message
(truncated) with its reason pushed onto the head of the queue's dead-letter list. The
message itself is settled (never left unacked), so it is not delivered again. The channel
does the same for a broadcast (Celery's remote control) and for an unacked record it cannot
restore (``unacked.dead``).

The list is bounded (``LTRIM`` to :data:`MAX_DEAD_LETTERS`) and expires
:data:`DEAD_LETTER_TTL_S` after its latest entry. Read it, newest first, with
``redis-cli LRANGE <queue>.dead 0 -1``; each entry is a JSON object (:class:`DeadLetter`)::

    {"reason": "not JSON (...)", "queue": "codemode", "at_ms": 1764990000000,
     "size": 8, "message": "not json", "truncated": false}
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final

import msgspec
import redis.exceptions

from ..redis.keys import dead_letter_key

__all__ = ["DEAD_LETTER_TTL_S", "MAX_DEAD_LETTERS", "MAX_KEPT_CHARS", "DeadLetter", "drop", "message_text"]

log = logging.getLogger("codemode.fleet.worker")

MAX_DEAD_LETTERS: Final = 1000
"""Entries a dead-letter list keeps; older ones are trimmed."""
MAX_KEPT_CHARS: Final = 4096
"""How much of a dropped message its entry keeps (``truncated`` says when it is cut)."""
MAX_REASON_CHARS: Final = 1000
"""A reason is cut here too: some name the part of the message they refuse."""
DEAD_LETTER_TTL_S: Final = 7 * 24 * 3600
"""A dead-letter list expires a week after its latest entry."""


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a dead-letter list."""

    reason: str
    """Why the worker could not take the message, for the person reading the list."""
    queue: str
    at_ms: int
    """When it was dropped (the worker's clock, ms since the epoch)."""
    size: int
    """The message's size: bytes as popped, or characters of the envelope kombu decoded."""
    message: str
    """The message as text (bytes that are not UTF-8 as ``\\x..`` escapes), cut at
    :data:`MAX_KEPT_CHARS`."""
    truncated: bool


_encoder: Final = msgspec.json.Encoder()


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw


def drop(client: Any, queue: str, raw: bytes | str, reason: str) -> None:
    """Log that ``raw`` was dropped from ``queue`` because of ``reason`` (once), and keep it
    in the queue's dead-letter list. Never raises: a Redis that refuses the copy costs the
    copy, not the worker (the log says so). ``client`` is a synchronous ``redis.Redis``."""
    reason = reason[:MAX_REASON_CHARS]
    key = dead_letter_key(queue)
    log.error("dropped a message from queue %s: %s (kept in %s)", queue, reason, key)
    text = _text(raw[: MAX_KEPT_CHARS * 4])
    entry = DeadLetter(
        reason=reason,
        queue=queue,
        at_ms=int(time.time() * 1000),
        size=len(raw),
        message=text[:MAX_KEPT_CHARS],
        truncated=len(text) > MAX_KEPT_CHARS or len(raw) > MAX_KEPT_CHARS * 4,
    )
    try:
        pipe = client.pipeline(transaction=True)
        pipe.lpush(key, _encoder.encode(entry))
        pipe.ltrim(key, 0, MAX_DEAD_LETTERS - 1)
        pipe.expire(key, DEAD_LETTER_TTL_S)
        pipe.execute()
    except (redis.exceptions.RedisError, OSError) as exc:
        log.warning("could not keep the dropped message in %s (%s: %s)", key, type(exc).__name__, exc)


def message_text(message: Any) -> bytes | str:
    """What a kombu message came as, for its dead letter: the envelope kombu decoded (the
    Redis transport keeps it as ``_raw``), or else its body."""
    raw = getattr(message, "_raw", None)
    if raw is not None:
        try:
            return json.dumps(raw)
        except (ValueError, TypeError, RecursionError):
            pass
    body = getattr(message, "body", None)
    return body if isinstance(body, (bytes, str)) else repr(type(body))
