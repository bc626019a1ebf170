"""The worker's reader of one job's down channel: the host's replies, Cancel and Close.

::

    idle ──start / ride──▶ waiting (a BLPOP on a link of its own) ──reply──▶ the job's handler
                              ▲   │                                  │ a call still pending,
                              │   └──────── nothing came (timeout) ──┤ or not a reply
                              │                                      ▼
                              └── ride (the next call's push ahead) ── parked ◀─ no call pending
                              └── PARK_S without a call ─────────────┘
    stop ──▶ stopped (a BLPOP in flight is left to the Close the job's end pushes, or closed)

No task: the BLPOP's reply reaches the reader inside the link's ``data_received`` (a sink,
``redis/link.py``), and the reader hands it to the job there and then, and sends the next BLPOP
or parks: a relayed call costs the worker's event loop two turns fewer than a reader task
would (its wake-up on the reply, and the turn it yields for the answered call to go first).

Parked, the reader waits for the program's next call: the call's push then goes up in the
same write as the next BLPOP (:meth:`ride`), one system call and one command fewer per call
on both sides of Redis. It waits alone again after ``park_s``, so a Cancel sent while the
program computes between calls is read within that time, as before a reader starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Sequence
from typing import Any

import redis.exceptions

from ..errors import BROKER_ERRORS
from ..redis.channel import popped
from ..redis.link import Link, Links, error_reply_sink, pack, reply_error
from ..settings import MAX_BLOCKING_WAIT_S

__all__ = ["DownReader"]

log = logging.getLogger("codemode.fleet.worker")


class _State(enum.Enum):
    IDLE = "idle"
    WAITING = "waiting"
    PARKED = "parked"
    STOPPED = "stopped"


class DownReader:
    """Reads ``key`` (a job's down channel) over ``links`` and hands each message to
    ``on_message``, which returns whether to park (no call is pending: the next one brings
    the next BLPOP); ``on_lost`` gets the Redis error that ended the reading. Neither may
    raise. Runs on the loop it is made on."""

    def __init__(
        self,
        links: Links,
        key: str,
        *,
        park_s: float,
        on_message: Callable[[bytes | None], bool],
        on_lost: Callable[[BaseException], None],
    ) -> None:
        self._links = links
        self._loop = asyncio.get_running_loop()
        self._blpop = pack("BLPOP", key, MAX_BLOCKING_WAIT_S)
        self._park_s = park_s
        self._on_message = on_message
        self._on_lost = on_lost
        self._state = _State.IDLE
        self._link: Link | None = None
        """The link of the BLPOP in flight."""
        self._opening: asyncio.Task[None] | None = None
        self._parked_at = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._ended: asyncio.Future[None] | None = None
        """Set by :meth:`drained`: done when the BLPOP in flight has ended."""

    @property
    def in_flight(self) -> bool:
        """Whether a BLPOP waits on the channel (a Close pushed now would end it)."""
        return self._link is not None

    def start(self) -> None:
        """Begin reading, alone (the run has gone on a while without a call)."""
        if self._state is _State.IDLE:
            self._send(())

    def ride(self, before: Sequence[bytes], on_error: Callable[[str], object]) -> bool:
        """Send ``before`` (a call's push, packed) ahead of the next BLPOP in one write, if
        the reader has no BLPOP in flight (not started yet, or parked) and an idle link is
        at hand; whether it did. ``on_error`` gets the text of an error reply to ``before``
        (the link's failure goes to ``on_lost``). When it did not, the reader is reading or
        about to be: the caller pushes on its own."""
        if self._state is _State.WAITING or self._state is _State.STOPPED:
            return False
        link = self._links.take_now()
        if link is None:
            self._send(())
            return False
        self._wait_on(link, before, [error_reply_sink(on_error)] * len(before))
        return True

    def stop(self, *, close: bool = False) -> None:
        """Read no more. A BLPOP in flight is left to end on its own (the job's Close wakes
        it, and its link goes back to the stock), or with ``close``, its link is closed."""
        self._state = _State.STOPPED
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # A link being connected is not cancelled (a cancel landing just after the connect
        # would lose the connection): it goes to the stock when it is made.
        if close and self._link is not None:
            link, self._link = self._link, None
            self._links.give_back(link, False)
            self._settle()

    async def drained(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until no BLPOP is in flight."""
        if self._link is None:
            return
        if self._ended is None:
            self._ended = self._loop.create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._ended), timeout_s)

    # ---- the BLPOP --------------------------------------------------------------------

    def _send(self, before: Sequence[bytes]) -> None:
        link = self._links.take_now()
        if link is not None:
            self._wait_on(link, before, ())
            return
        # No idle link at hand (the first job, or the stock went stale): connect one.
        self._state = _State.WAITING
        self._opening = self._loop.create_task(self._open_then_wait())  # referenced till done

    async def _open_then_wait(self) -> None:
        try:
            link = await self._links.take()
        except BROKER_ERRORS as exc:
            if self._state is not _State.STOPPED:
                self._state = _State.STOPPED
                self._on_lost(exc)
            return
        if self._state is _State.STOPPED:
            self._links.give_back(link, True)
            return
        self._wait_on(link, (), ())

    def _wait_on(self, link: Link, before: Sequence[bytes], ahead: Sequence[Callable[[Any], object]]) -> None:
        self._state = _State.WAITING
        self._link = link
        try:
            link.commands((*before, self._blpop), (*ahead, self._on_reply))
        except redis.exceptions.RedisError as exc:  # lost since it was stocked
            self._on_reply(exc)

    def _on_reply(self, reply: Any) -> None:
        """The BLPOP's reply, or the link's failure (inside the link's ``data_received``)."""
        link, self._link = self._link, None
        error = reply_error(reply)
        if link is not None:
            self._links.give_back(link, error is None)
        if error is not None:
            if self._state is not _State.STOPPED:
                self._state = _State.STOPPED
                self._on_lost(error)
            self._settle()
            return
        try:
            park = self._on_message(popped(reply))
        except Exception:  # a bug there must not take the link's transport down with it
            log.exception("the reader of a reply channel failed on a message")
            park = False
        if self._state is _State.STOPPED:  # stopped before, or by this message
            self._settle()
        elif park:
            self._park()
        else:
            self._send(())

    def _settle(self) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)

    # ---- parked -----------------------------------------------------------------------

    def _park(self) -> None:
        """One timer for many parkings: it looks again when it fires, and a reader parked
        since then waits the rest of its time."""
        self._state = _State.PARKED
        self._parked_at = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(self._parked_at + self._park_s, self._unpark_when_due)

    def _unpark_when_due(self) -> None:
        self._timer = None
        if self._state is not _State.PARKED:
            return
        due = self._parked_at + self._park_s
        if due > self._loop.time():
            self._timer = self._loop.call_at(due, self._unpark_when_due)
            return
        self._send(())
