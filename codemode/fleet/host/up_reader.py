"""The host's reading of one job's up channel: BLPOPs over the event loop's links, each with
the replies that are ready riding ahead of it in the same write.

::

    session._loop ──pop(due, replies ahead)──▶ link: [RPUSH down ...] BLPOP up ─▶ reply
                                                      │ (inside the link's data_received)
                      a call the session serves here ─┤─▶ next BLPOP from here, its reply ahead
                      anything else, or nothing ──────┴─▶ the loop's future

A tool call or outbound request of a started job that arrives before the loop's next check
is served where its BLPOP's reply is read (``serve_here``, the session's), and the next
BLPOP goes out from there with the call's reply ahead when the reply was at hand: the
loop's task is not woken for it. That is a turn of the host's event loop, and the task's
way back through the wait, fewer per relayed call. The session decides what a message
means (``session.py``); this reader only moves bytes.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis.exceptions

from ..redis.channel import blocking_wait, popped
from ..redis.link import Link, Links, error_reply_sink, pack, reply_error

__all__ = ["ServeHere", "UpReader"]

ServeHere = Callable[[bytes], "list[bytes] | None"]
"""The session's hook: serve ``raw`` where it was read and return the replies it made ready
(possibly none), or ``None`` when the wait loop must receive it."""


class UpReader:
    """Reads the up channel ``up_key`` of one job over ``links`` (see the module docstring)."""

    def __init__(self, links: Links, up_key: str, serve_here: ServeHere) -> None:
        self.links = links
        self.up_key = up_key
        self._serve_here = serve_here
        self.due = 0.0
        """When the wait loop looks at the job next: a BLPOP blocks until then, and a call
        read at or after it goes to the loop (which checks first)."""
        self._waiting_on: Link | None = None
        """The link of the BLPOP in flight (see pop)."""
        self._replies_left: list[bytes] = []
        """Replies made by calls served here that found no idle link for the next BLPOP:
        the wait loop sends them with its own."""

    def replies_left(self) -> list[bytes]:
        """Take the replies that the next BLPOP must carry ahead of it."""
        replies, self._replies_left = self._replies_left, []
        return replies

    async def pop(self, due: float, replies_ahead: Sequence[bytes]) -> bytes | None:
        """The next message on up that the wait loop must see, or ``None`` at ``due`` (a
        BLPOP with ``replies_ahead`` ahead of it). Raises the link's Redis error."""
        link = await self.links.take()
        self.due = due
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        try:
            self._wait_on(link, replies_ahead, future)
            return await future
        finally:
            if self._waiting_on is not None:  # cancelled: a late reply must not be read
                waiting, self._waiting_on = self._waiting_on, None
                self.links.give_back(waiting, False)

    def _wait_on(
        self, link: Link, replies_ahead: Sequence[bytes], future: asyncio.Future[bytes | None]
    ) -> None:
        wait = blocking_wait(self.due - time.monotonic())
        self._waiting_on = link
        try:
            link.commands(
                (*replies_ahead, pack("BLPOP", self.up_key, wait)),
                (*[error_reply_sink()] * len(replies_ahead), functools.partial(self._popped, future)),
            )
        except redis.exceptions.RedisError:
            self._waiting_on = None
            self.links.give_back(link, False)
            raise

    def _popped(self, future: asyncio.Future[bytes | None], reply: Any) -> None:
        """The BLPOP's reply, or its link's failure (a sink: inside ``data_received``)."""
        link, self._waiting_on = self._waiting_on, None
        if future.done():  # the wait was cancelled
            if link is not None:
                self.links.give_back(link, False)
            return
        error = reply_error(reply)
        if link is not None:
            self.links.give_back(link, error is None)
        if error is not None:
            future.set_exception(error)
            return
        raw = popped(reply)
        try:
            if raw is not None and self._served(raw, future):
                return
        except Exception as exc:  # a bug here must reach the caller, not the link
            future.set_exception(exc)
            return
        future.set_result(raw)

    def _served(self, raw: bytes, future: asyncio.Future[bytes | None]) -> bool:
        """Serve ``raw`` here when the session takes it before the loop's next check, and
        send the next BLPOP from here; whether it did (else the loop receives it)."""
        if time.monotonic() >= self.due:
            return False
        replies = self._serve_here(raw)
        if replies is None:
            return False
        link = self.links.take_now()
        if link is None:  # the loop connects one, and sends the replies with its BLPOP
            self._replies_left = replies
            future.set_result(None)
            return True
        try:
            self._wait_on(link, replies, future)
        except redis.exceptions.RedisError as exc:
            self._replies_left = replies
            future.set_exception(exc)
        return True
