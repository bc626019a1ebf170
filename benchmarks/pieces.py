"""The fleet without one of its private pieces: the other side of ``fleet_bench.py --pieces-ab``.

Each of the fleet's private pieces saves time by doing, in codemode's own code, what a
library would otherwise do. To measure what a piece earns, a side of the A/B runs the
library's way instead, and only that piece differs:

* ``messages``: each job published by Celery's own ``send_task`` (kombu's producer, on a
  thread: it is synchronous) after the admission script took its slot, instead of the bytes
  ``codemode/fleet/host/producer.py`` builds and the admission script pushes in the same
  round trip.
* ``link``: the fleet's Redis commands sent and read through redis-py's own asyncio
  connection (its stream reader and hiredis parser: :class:`StreamLink`), instead of
  ``codemode/fleet/redis/link.py``'s protocol that takes the connection's transport over.
  Commands, pipelining and the links' bookkeeping stay the same, so only the connection's
  reading and writing differ.

A worker side is started through ``ab_worker.py`` with ``CODEMODE_BENCH_WITHOUT`` naming the
piece; a host side is patched on its own executor (:func:`without_on_host`).

The pieces that did not earn their place are gone from the product, and from here: the
hand-off strategy that skipped Celery's request path (it broke Celery's tools) and the
channel's own unacked bookkeeping (``codemode/fleet/worker/transport.py``'s history and
``benchmarks/README.md`` have their A/Bs).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import hiredis
import redis.asyncio as aioredis
import redis.exceptions

from codemode.fleet.redis.link import Link

PIECES = ("messages", "link")
"""The private pieces an A/B can leave out."""
WORKER_SIDE = frozenset({"link"})
"""Pieces a worker has (``ab_worker.py`` leaves them out of its process)."""
HOST_SIDE = frozenset({"messages", "link"})
"""Pieces a host has (:func:`without_on_host` leaves them out of one executor)."""
ENV = "CODEMODE_BENCH_WITHOUT"


class StreamLink(Link):
    """A link (``codemode.fleet.redis.link.Link``: commands pipelined, replies to futures or
    sinks in order) over redis-py's own asyncio connection instead of the socket's
    transport: each write through ``send_packed_command``, each reply through
    ``read_response`` on a reader task. Its bookkeeping of who gets each reply, and its
    failure, are the link's own."""

    def __init__(self, connection: Any, timeout_s: float) -> None:
        super().__init__(asyncio.get_running_loop(), timeout_s)
        self._connection = connection
        self._wake: asyncio.Future[None] | None = None
        self._reader = self._loop.create_task(self._read_forever())

    @property
    def usable(self) -> bool:
        return self._lost is None

    def commands(
        self, packed: Sequence[bytes], sinks: Sequence[Callable[[Any], object]] = ()
    ) -> list[asyncio.Future[Any]]:
        if self._lost is not None:
            raise self._lost
        futures = [self._loop.create_future() for _ in range(len(packed) - len(sinks))]
        self._waiting.extend(sinks)
        self._waiting.extend(futures)
        # Tasks start in the order they are made, and each writes before its first wait:
        # the writes keep the commands' order.
        self._loop.create_task(self._send(b"".join(packed)))
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        return futures

    async def _send(self, data: bytes) -> None:
        try:
            await self._connection.send_packed_command(data, check_health=False)
        except Exception as exc:
            self._fail(redis.exceptions.ConnectionError(f"send failed: {exc}"))

    async def _read_forever(self) -> None:
        try:
            while True:
                if not self._waiting:
                    self.idle_since = time.monotonic()
                    self._wake = self._loop.create_future()
                    await self._wake
                    continue
                try:
                    reply: Any = await self._connection.read_response(timeout=self._timeout_s)
                except redis.exceptions.ResponseError as exc:
                    # redis-py strips the error's code where it has a class for it
                    code = "NOSCRIPT " if isinstance(exc, redis.exceptions.NoScriptError) else ""
                    reply = hiredis.ReplyError(code + str(exc))
                taker = self._waiting.popleft()
                if callable(taker):
                    taker(reply)
                elif not taker.done():
                    taker.set_result(reply)
        except asyncio.CancelledError:
            self._fail(redis.exceptions.ConnectionError("The link was closed."))
        except redis.exceptions.RedisError as exc:
            self._fail(exc)
        except Exception as exc:
            self._fail(redis.exceptions.ConnectionError(str(exc)))

    def close(self) -> None:
        self._reader.cancel()
        self._fail(redis.exceptions.ConnectionError("The link was closed."))
        self._loop.create_task(self._connection.disconnect())


async def open_stream_link(links: Any) -> StreamLink:
    """``Links._open`` for links made of redis-py connections (:class:`StreamLink`)."""
    if links._closed:
        raise redis.exceptions.ConnectionError("The fleet's Redis links were closed.")
    pool: aioredis.ConnectionPool = links._pool
    connection = pool.make_connection()  # type: ignore[no-untyped-call]
    await connection.connect()
    return StreamLink(connection, links._timeout_s)


def without_on_worker(piece: str) -> None:
    """Leave ``piece`` out of this worker process (``ab_worker.py``), before it starts."""
    if piece == "link":
        from codemode.fleet.redis.link import Links

        Links._open = open_stream_link  # type: ignore[method-assign,assignment]
    elif piece:
        raise SystemExit(f"{ENV}={piece!r}: a worker has no such piece (it has {sorted(WORKER_SIDE)})")


async def without_on_host(executor: Any, piece: str) -> None:
    """Leave ``piece`` out of ``executor`` (a FleetExecutor) alone, once it is started."""
    connection = executor._connection
    _client, scripts, producer = await connection.ensure_started()
    if piece == "link":
        scripts.links._open = types.MethodType(open_stream_link, scripts.links)
    elif piece == "messages":
        _publish_with_celery(connection, scripts, producer)


def _publish_with_celery(connection: Any, scripts: Any, producer: Any) -> None:
    """Admission as before (its push going to a scratch list), then the job published by
    Celery's ``send_task`` on a thread; the hand-built message is never made."""
    from celery import Celery

    from codemode.fleet.settings import TASK_NAME
    from codemode.fleet.wire import ENQUEUED_HEADER, job_to_celery

    app = Celery("codemode-bench-producer", set_as_current=False)
    app.conf.update(connection.settings.celery_config())
    scratch = f"{connection.settings.key_prefix}:bench:scratch"
    pending: dict[str, tuple[Any, str, float]] = {}
    queue_timeout_ms = connection.settings.queue_timeout_ms

    class Shim:
        def build(self, spec: Any, *, queue: str, expires_s: float) -> bytes:
            pending[spec.job_id] = (spec, queue, expires_s)
            return b"-"

    admit = scripts.admit

    async def admit_then_publish(
        admission: str, host: str, queue: str, job_id: str, message: bytes, **kw: Any
    ) -> Any:
        result = await admit(admission, host, scratch, job_id, message, **kw)
        spec, queue_name, expires_s = pending.pop(job_id)
        if result.admitted:
            await asyncio.to_thread(
                app.send_task,
                TASK_NAME,
                kwargs={"job": job_to_celery(spec)},
                task_id=spec.job_id,
                queue=queue_name,
                expires=expires_s,
                ignore_result=True,
                argsrepr="()",
                kwargsrepr=f"{{'job': {spec.job_id!r}}}",
                headers={ENQUEUED_HEADER: spec.start_by_ms - queue_timeout_ms},
            )
            with contextlib.suppress(Exception):
                await scripts.links.call("LTRIM", scratch, 0, 0)
        return result

    scripts.admit = admit_then_publish
    connection._producer = Shim()
