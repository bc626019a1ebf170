"""The fleet's own Redis connections, spoken to directly: hiredis packs each command and
parses each reply, fed straight from the socket's transport (:class:`Link`), and the links
of one event loop (:class:`Links`) with the scripts that run over them (:class:`LinkScript`).

redis-py's asyncio client puts a connection pool, a command-dispatch layer and an asyncio
``StreamReader`` between a command and its socket, and its Python cost per command exceeds
the command's own round trip (``benchmarks/fleet_bench.py --link-cost`` measures both). A
relayed tool call is four such commands (each side's push and BLPOP) and a trivial job
three scripts (admit, claim, finish), so the fleet's scripts and reply channels use links
(see :class:`Links`); the rest (lease checks, heartbeats of the host, cleanups) keeps
redis-py.

A link is *made* by redis-py: its own connection class, from the same pool settings (URL,
TLS, AUTH, SELECT, client name, socket options), connects and says hello; then the link
takes the transport over. So it connects exactly as every other fleet connection does.
This relies on one private field of redis-py's asyncio connection, ``_writer`` (its stream
writer, whose transport the link takes; ``_reader`` is cleared with it): :func:`open_link`
says so when a release moves it.

Replies are matched to commands in order, so any number of commands may be in flight on one
link (a pipeline). Failures raise what redis-py raises (``ConnectionError``,
``TimeoutError``, ``ResponseError``), so callers handle both the same way. A link that
lost its connection stays lost: its owner makes a new one.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard, cast

import hiredis
import redis.asyncio as aioredis
import redis.exceptions

__all__ = ["Link", "LinkScript", "Links", "Wait", "error_reply_sink", "open_link", "pack", "reply_error"]

log = logging.getLogger("codemode.fleet")

STALE_AFTER_S = 10.0
"""A link idle this long is closed rather than used again (redis-py's health-check interval
for the fleet's pooled connections): a half-open socket would swallow the next command."""


def pack(*args: str | int | float | bytes) -> bytes:
    """One command as RESP bytes (hiredis's packer; its stubs type the tuple wrongly)."""
    packed: bytes = hiredis.pack_command(args)  # type: ignore[arg-type]
    return packed


class Link(asyncio.Protocol):
    """A Redis connection whose replies go, in order, to the futures of its commands.

    ``timeout_s`` bounds the wait for each reply (the fleet's socket timeout, longer than
    any BLPOP it sends): a connection that goes quiet for longer than that is closed, and
    every command on it fails with ``TimeoutError``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self._loop = loop
        self._timeout_s = timeout_s
        self._parser = hiredis.Reader()
        self._waiting: collections.deque[asyncio.Future[Any] | Callable[[Any], object]] = collections.deque()
        """Who gets each reply, in order: a future, or a sink (a function called with it)."""
        self._transport: asyncio.Transport | None = None
        self._overdue: asyncio.TimerHandle | None = None
        self._progress = 0.0
        """Loop time of the last reply, or of the command sent to an idle link: the reply
        timeout counts from it (see _check_overdue)."""
        self._lost: redis.exceptions.RedisError | None = None
        self.idle_since = time.monotonic()
        self.stream: object = None
        """The stream writer redis-py connected with, kept so that it is not collected."""

    @property
    def usable(self) -> bool:
        return self._lost is None and self._transport is not None

    @property
    def busy(self) -> bool:
        """Whether a command on it still waits for its reply."""
        return bool(self._waiting)

    def command(self, packed: bytes) -> asyncio.Future[Any]:
        """Send one command packed by :func:`pack`; its future gets the reply.
        An error reply comes back as a ``hiredis.ReplyError`` value, not raised."""
        return self.commands((packed,))[0]

    def commands(
        self, packed: Sequence[bytes], sinks: Sequence[Callable[[Any], object]] = ()
    ) -> list[asyncio.Future[Any]]:
        """Send several commands in one write (one system call: a send on a loopback socket
        costs more than the Python around it); a future for each reply. ``sinks``: functions that the replies of the first ``len(sinks)`` commands
        go to instead, called as they are read (no future, no callback to schedule), or
        with the ``RedisError`` the link failed with. A sink must not raise."""
        if self._lost is not None:
            raise self._lost
        assert self._transport is not None
        create = self._loop.create_future
        futures = [create() for _ in range(len(packed) - len(sinks))]
        if not self._waiting:
            self._progress = self._loop.time()
        self._waiting.extend(sinks)
        self._waiting.extend(futures)
        self._transport.write(packed[0] if len(packed) == 1 else b"".join(packed))
        if self._overdue is None:
            self._overdue = self._loop.call_at(self._progress + self._timeout_s, self._check_overdue)
        return futures

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._fail(redis.exceptions.ConnectionError("The link was closed."))

    # ---- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses, but are one).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        parser.feed(data)
        waiting = self._waiting
        try:
            while waiting:
                reply = parser.gets()
                if reply is False:
                    break
                taker = waiting.popleft()
                if callable(taker):
                    taker(reply)
                elif not taker.done():  # its waiter was cancelled: the reply is dropped
                    taker.set_result(reply)
            else:
                if parser.gets() is not False:
                    raise hiredis.ProtocolError("a reply to no command")
        except hiredis.ProtocolError as exc:
            if self._transport is not None:
                self._transport.close()
            self._fail(redis.exceptions.ConnectionError(f"Redis protocol error: {exc}"))
            return
        if waiting:
            self._progress = self._loop.time()
        else:
            self.idle_since = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._fail(
            redis.exceptions.ConnectionError(
                f"Connection to Redis lost: {exc}" if exc else "Connection closed by Redis."
            )
        )

    # ---- failure ----------------------------------------------------------------------

    def _check_overdue(self) -> None:
        """One timer per link, not one per command: when it fires, a link still waiting
        that has had no reply for ``timeout_s`` times out, and one that has had a reply
        since looks again that long after it. An idle link keeps no timer."""
        self._overdue = None
        if not self._waiting or self._lost is not None:
            return
        due = self._progress + self._timeout_s
        if due > self._loop.time():
            self._overdue = self._loop.call_at(due, self._check_overdue)
            return
        if self._transport is not None:
            self._transport.close()
        self._fail(redis.exceptions.TimeoutError(f"No reply from Redis within {self._timeout_s:g} s."))

    def _fail(self, error: redis.exceptions.RedisError) -> None:
        if self._lost is None:
            self._lost = error
        if self._overdue is not None:
            self._overdue.cancel()
            self._overdue = None
        while self._waiting:
            taker = self._waiting.popleft()
            if callable(taker):
                taker(error)
            elif not taker.done():
                taker.set_exception(error)


async def open_link(pool: aioredis.ConnectionPool, timeout_s: float) -> Link:
    """Connect the way ``pool`` connects (redis-py's own connection class and settings,
    its handshake included), then hand the connection's transport to a new :class:`Link`."""
    connection = pool.make_connection()  # type: ignore[no-untyped-call]
    await connection.connect()
    writer = getattr(connection, "_writer", None)
    if writer is None:  # pragma: no cover - a redis-py whose connections look otherwise
        await connection.disconnect()
        raise redis.exceptions.ConnectionError(
            "redis-py made a connection without a stream writer (its private _writer field): "
            "this release of redis-py is not one the fleet's links know."
        )
    transport = writer.transport
    link = Link(asyncio.get_running_loop(), timeout_s)
    transport.set_protocol(link)
    link.connection_made(transport)
    # The connection object no longer owns the socket: it must not close it when collected.
    # Its stream writer would (a collected StreamWriter closes its transport), so the link
    # keeps that for as long as it lives.
    connection._writer = connection._reader = None
    link.stream = writer
    return link


def reply_error(reply: Any) -> BaseException | None:
    """What a reply means as an exception, or ``None`` for a value: an error reply as
    redis-py's ``ResponseError``, a link's failure (what a sink gets) as it is."""
    if isinstance(reply, hiredis.ReplyError):
        return redis.exceptions.ResponseError(str(reply))
    if isinstance(reply, BaseException):
        return reply
    return None


def _raise_error(reply: Any) -> Any:
    error = reply_error(reply)
    if error is not None:
        raise error
    return reply


class Links:
    """The links of one event loop, made from ``pool``'s settings.

    * :meth:`call`: commands that Redis answers at once share one link, pipelined: any
      number in flight, one connection (a program may start thousands of tool calls at
      once, a host thousands of jobs);
    * :meth:`blocking`: a command that blocks its connection (BLPOP) takes an idle link
      from a stock and gives it back; one that is cancelled or fails closes its link
      instead (its reply may still come, and would be read by the next command).

    A link idle for longer than ``STALE_AFTER_S`` is replaced rather than used."""

    def __init__(self, pool: aioredis.ConnectionPool, *, timeout_s: float) -> None:
        self._pool = pool
        self._timeout_s = timeout_s
        self._shared: Link | None = None
        self._shared_lock = asyncio.Lock()
        self._stock: list[Link] = []
        self._closed = False

    async def call(self, *args: str | int | float | bytes) -> Any:
        """One command on the shared link; an error reply raises ``ResponseError``."""
        link = await self._shared_link()
        return _raise_error(await link.command(pack(*args)))

    async def call_all(self, packed: Sequence[bytes]) -> list[Any]:
        """Several commands (packed) on the shared link in one write; their replies, in
        order, once all have come. An error reply raises ``ResponseError`` (the others ran)."""
        link = await self._shared_link()
        futures = link.commands(packed)
        await futures[-1]  # replies come in order: the others are in
        return [_raise_error(future.result()) for future in futures]

    async def blocking(self, *args: str | int | float | bytes, before: Sequence[bytes] = ()) -> Any:
        """One command that may block, on a link of its own for as long as it waits.

        ``before``: commands (packed) sent ahead of it in the same write, such as a reply
        to push before waiting for the next message: one system call for both, and Redis
        runs them first. Their replies are not returned (the blocking reply may carry a
        message that must not be lost to their failure): an error among them is logged."""
        return await Wait(self, await self.take(), pack(*args), before).reply()

    def give_back(self, link: Link, usable: bool) -> None:
        """A blocking command's link after its reply: to the stock, or closed when its wait
        was cancelled or failed (a reply still to come would be read by the next command)."""
        if usable and not self._closed:
            link.idle_since = time.monotonic()
            self._stock.append(link)
        else:
            link.close()

    def script(self, source: str) -> LinkScript:
        return LinkScript(self, source)

    async def aclose(self) -> None:
        """Close every link (commands in flight fail with ``ConnectionError``)."""
        self._closed = True
        if self._shared is not None:
            self._shared.close()
        for link in self._stock:
            link.close()
        self._stock.clear()

    async def _open(self) -> Link:
        if self._closed:
            raise redis.exceptions.ConnectionError("The fleet's Redis links were closed.")
        return await open_link(self._pool, self._timeout_s)

    async def take(self) -> Link:
        """An idle link for a blocking command: from the stock, or newly connected. Give it
        back with :meth:`give_back`."""
        return self.take_now() or await self._open()

    def take_now(self) -> Link | None:
        """A fresh link from the stock (stale ones met on the way are closed), if there is
        one at hand."""
        stock = self._stock
        while stock:
            link = stock.pop()
            if _fresh(link):
                return link
            link.close()
        return None

    async def _shared_link(self) -> Link:
        link = self._shared
        return link if _fresh(link) else await self._new_shared()

    async def _new_shared(self) -> Link:
        async with self._shared_lock:  # concurrent first commands share one connect
            link = self._shared
            if not _fresh(link):
                if link is not None:
                    link.close()
                link = self._shared = await self._open()
            return link


def _fresh(link: Link | None) -> TypeGuard[Link]:
    """Whether ``link`` can take a command: connected, and not idle past STALE_AFTER_S."""
    if link is None or not link.usable:
        return False
    return link.busy or link.idle_since >= time.monotonic() - STALE_AFTER_S


class Wait:
    """A blocking command in flight on a link of its own (:meth:`Links.blocking`), with the
    commands sent ahead of it in the same write. :meth:`reply` waits for its reply, then
    gives the link back (:meth:`Links.give_back`). The replies to the commands ahead are
    read as they come, with no future each (:func:`error_reply_sink`)."""

    def __init__(self, links: Links, link: Link, packed: bytes, before: Sequence[bytes]) -> None:
        self._links = links
        self._link = link
        (self._last,) = link.commands((*before, packed), [error_reply_sink()] * len(before))

    async def reply(self) -> Any:
        kept = False
        try:
            reply = await self._last
            kept = True
        finally:
            self._links.give_back(self._link, kept)
        return _raise_error(reply)


def error_reply_sink(on_error: Callable[[str], object] | None = None) -> Callable[[Any], None]:
    """A sink (:meth:`Link.commands`) for the reply to a command sent ahead of a blocking
    one: an error reply is logged, and its text passed to ``on_error`` (a caller whose
    blocking command may wait long learns of it at once). The link's own failure is not
    its business: the blocking command's taker sees that."""

    def check(reply: Any) -> None:
        if isinstance(reply, hiredis.ReplyError):
            log.warning("a command sent ahead of a blocking wait failed: %s", reply)
            if on_error is not None:
                on_error(str(reply))

    return check


class LinkScript:
    """A Lua script run by its SHA1 over :meth:`Links.call`; sent whole when Redis does not
    know it (a restart or a SCRIPT FLUSH since it last ran)."""

    def __init__(self, links: Links, source: str) -> None:
        self._links = links
        self._source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, keys: Sequence[str], args: Sequence[str | int | float | bytes]) -> Any:
        try:
            return await self._links.call("EVALSHA", self.sha, len(keys), *keys, *args)
        except redis.exceptions.ResponseError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await self._links.call("EVAL", self._source, len(keys), *keys, *args)
