"""Foreign exceptions translated in one place, and the fleet's own declared sentences.

A Redis or kombu connection failure becomes :class:`codemode.BrokerUnreachable`
(retryable); ``started`` says whether the program may have begun, so a caller knows
whether a retry can repeat a tool's side effect.
"""

from __future__ import annotations

from typing import Final

import redis.exceptions

from .._faults import BrokerUnreachable

__all__ = [
    "BROKER_ERRORS",
    "BROKER_LOST_TEXT",
    "RelayRefused",
    "broker_unreachable",
    "is_broker_error",
]

BROKER_LOST_TEXT: Final = (
    "The fleet lost its connection to Redis, so this tool call cannot complete. "
    "Stop here and return what is already finished."
)
"""What a pending tool call rejects with inside a worker whose Redis went away."""


def _broker_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        ConnectionError,
        TimeoutError,
    ]
    try:  # kombu is only needed by the producer's Celery app
        from kombu.exceptions import OperationalError
    except ImportError:  # pragma: no cover
        pass
    else:
        errors.append(OperationalError)
    return tuple(errors)


BROKER_ERRORS: Final = _broker_errors()


def is_broker_error(exc: BaseException) -> bool:
    return isinstance(exc, BROKER_ERRORS)


def broker_unreachable(exc: BaseException, *, doing: str, started: bool) -> BrokerUnreachable:
    """The typed fault for a lost Redis while ``doing`` (a phrase like "enqueueing the job")."""
    if started:
        tail = "the program may have started, so a retry can repeat tool calls it already made."
    else:
        tail = "nothing was enqueued and nothing ran; retry when Redis is back."
    return BrokerUnreachable(
        f"The fleet's Redis could not be reached while {doing}; {tail}",
        started=started,
        causes=(f"{type(exc).__name__}: {exc}",),
    )


class RelayRefused(Exception):
    """Raised inside a worker's outbound relay: the program's fetch rejects with this text."""
