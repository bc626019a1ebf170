"""The fleet's links (``_link.py``) under its scripts and reply channels, on a real Redis:
pipelined pushes, BLPOPs on stocked links, and what a lost, flushed, restarted or silent
Redis does to them."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from codemode.fleet.errors import is_broker_error
from codemode.fleet.redis.channel import packed_push, pop, push
from codemode.fleet.redis.client import make_client
from codemode.fleet.redis.link import STALE_AFTER_S, Links, open_link, pack
from codemode.fleet.redis.scripts import FleetScripts
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import REDIS_ARGS, RedisServer, redis_server_path
from codemode.fleet.worker.reader import DownReader

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]


@pytest.fixture
async def client(settings: BrokerSettings) -> AsyncIterator[aioredis.Redis]:
    client = make_client(settings)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def scripts(client: aioredis.Redis, settings: BrokerSettings) -> AsyncIterator[FleetScripts]:
    links = Links(client.connection_pool, timeout_s=settings.socket_timeout_s)
    try:
        yield FleetScripts(links)
    finally:
        await links.aclose()


def key() -> str:
    return f"t-chan-{uuid.uuid4().hex[:8]}"


async def fleet_connections(client: aioredis.Redis) -> int:
    return sum(1 for c in await client.client_list() if c.get("name") == "codemode-fleet")


async def test_a_thousand_pushes_at_once_share_one_connection_and_keep_their_order(
    client: aioredis.Redis, scripts: FleetScripts
) -> None:
    k = key()
    await push(scripts.links, k, b"first", ttl_ms=60_000)  # the pushing link exists
    before = await fleet_connections(client)
    await asyncio.gather(*(push(scripts.links, k, str(i).encode(), ttl_ms=60_000) for i in range(1000)))
    assert await fleet_connections(client) == before
    assert await client.lrange(k, 0, -1) == [b"first", *(str(i).encode() for i in range(1000))]
    await client.delete(k)


async def test_a_pop_waits_for_a_push_and_gives_its_link_back(scripts: FleetScripts) -> None:
    k = key()
    waiting = asyncio.ensure_future(pop(scripts.links, [k], 5.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await push(scripts.links, k, b"hello", ttl_ms=60_000)
    assert await waiting == b"hello"
    assert len(scripts.links._stock) == 1
    assert await pop(scripts.links, [k], 0.05) is None  # nothing came: None, on the same link
    assert len(scripts.links._stock) == 1


async def test_a_cancelled_pop_closes_its_link_so_no_later_message_is_swallowed(
    scripts: FleetScripts,
) -> None:
    k = key()
    waiting = asyncio.ensure_future(pop(scripts.links, [k], 5.0))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert scripts.links._stock == []  # not given back: its BLPOP may still be answered
    await asyncio.sleep(0.05)  # Redis sees the connection close
    await push(scripts.links, k, b"kept", ttl_ms=60_000)
    assert await pop(scripts.links, [k], 1.0) == b"kept"


async def test_a_link_idle_past_the_health_check_interval_is_replaced(scripts: FleetScripts) -> None:
    k = key()
    assert await pop(scripts.links, [k], 0.01) is None
    [old] = scripts.links._stock
    old.idle_since = time.monotonic() - STALE_AFTER_S - 1
    assert await pop(scripts.links, [k], 0.01) is None
    [new] = scripts.links._stock
    assert new is not old and not old.usable


async def test_a_script_redis_has_lost_is_sent_whole(client: aioredis.Redis, scripts: FleetScripts) -> None:
    k = key()
    append = scripts.links.script("return redis.call('RPUSH', KEYS[1], ARGV[1])")
    assert await append([k], [b"one"]) == 1
    await client.script_flush()
    assert await append([k], [b"two"]) == 2
    assert await append([k], [b"three"]) == 3
    assert await client.lrange(k, 0, -1) == [b"one", b"two", b"three"]
    await client.delete(k)


async def test_a_push_re_arms_its_key_s_expiry(client: aioredis.Redis, scripts: FleetScripts) -> None:
    k = key()
    await push(scripts.links, k, b"one", b"two", ttl_ms=60_000)
    await client.pexpire(k, 5_000)
    await push(scripts.links, k, b"three", ttl_ms=60_000)
    assert await client.lrange(k, 0, -1) == [b"one", b"two", b"three"]
    assert 5_000 < await client.pttl(k) <= 60_000
    await client.delete(k)


async def test_a_redis_restart_fails_what_is_in_flight_and_the_next_command_reconnects(
    private_redis: RedisServer,
) -> None:
    settings = BrokerSettings(redis_url=private_redis.url)
    client = make_client(settings)
    scripts = FleetScripts(Links(client.connection_pool, timeout_s=settings.socket_timeout_s))
    try:
        await push(scripts.links, "k", b"before", ttl_ms=60_000)
        waiting = asyncio.ensure_future(pop(scripts.links, ["nothing"], 20.0))
        await asyncio.sleep(0.1)
        await asyncio.to_thread(private_redis.restart)
        with pytest.raises(redis.exceptions.ConnectionError) as lost:
            await asyncio.wait_for(waiting, 10.0)
        assert is_broker_error(lost.value)
        assert scripts.links._stock == []
        await push(scripts.links, "k", b"after", ttl_ms=60_000)  # a new pushing link
        assert await pop(scripts.links, ["k"], 1.0) == b"after"  # restarted empty
    finally:
        await scripts.links.aclose()
        await client.aclose()


async def test_a_redis_that_stops_answering_times_the_link_out(client: aioredis.Redis) -> None:
    link = await open_link(client.connection_pool, timeout_s=0.3)
    began = time.monotonic()
    with pytest.raises(redis.exceptions.TimeoutError, match=r"within 0\.3 s"):
        await link.command(pack("BLPOP", key(), 5))
    assert time.monotonic() - began < 3.0
    assert not link.usable
    with pytest.raises(redis.exceptions.TimeoutError):
        link.command(pack("PING"))


async def test_a_link_that_keeps_answering_never_times_out(client: aioredis.Redis) -> None:
    """The reply timeout counts from the last reply, not from the first command: one link
    kept busy for three times its timeout, each reply within it, stays up."""
    link = await open_link(client.connection_pool, timeout_s=0.4)
    began = time.monotonic()
    while time.monotonic() - began < 1.2:
        assert await link.command(pack("BLPOP", key(), 0.2)) is None
    assert link.usable
    link.close()


async def test_an_error_reply_raises_and_a_closed_channel_refuses_new_links(
    client: aioredis.Redis, scripts: FleetScripts
) -> None:
    k = key()
    await client.set(k, "not a list")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await push(scripts.links, k, b"x", ttl_ms=60_000)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await pop(scripts.links, [k], 0.1)
    await client.delete(k)
    await scripts.links.aclose()
    with pytest.raises(redis.exceptions.ConnectionError, match="closed"):
        await pop(scripts.links, [k], 0.1)


async def test_pushes_ride_ahead_of_a_pop_in_one_write_and_a_failed_one_is_only_logged(
    client: aioredis.Redis, scripts: FleetScripts, caplog: pytest.LogCaptureFixture
) -> None:
    k, other = key(), key()
    riders = [*packed_push(other, (b"reply",), 60_000), *packed_push(k, (b"mine",), 60_000)]
    assert await pop(scripts.links, [k], 1.0, before=riders) == b"mine"  # Redis ran them first
    assert await client.lrange(other, 0, -1) == [b"reply"]
    assert 0 < await client.pttl(other) <= 60_000
    await client.set(other, "not a list")
    await push(scripts.links, k, b"next", ttl_ms=60_000)
    with caplog.at_level("WARNING", logger="codemode.fleet"):
        got = await pop(scripts.links, [k], 1.0, before=packed_push(other, (b"lost",), 60_000))
    assert got == b"next"
    assert "sent ahead of a blocking wait failed" in caplog.text and "WRONGTYPE" in caplog.text
    await client.delete(k, other)


async def test_links_connect_the_way_the_url_says_over_a_unix_socket(tmp_path: Path) -> None:
    """A link is made by redis-py's own connection class for the URL, so a ``unix://``
    Redis (and its database number) works as a TCP one does."""
    server_path = redis_server_path()
    if server_path is None:
        pytest.skip("redis-server is not on PATH")
    sock = tmp_path / "redis.sock"
    server = subprocess.Popen(
        [server_path, "--port", "0", "--unixsocket", str(sock), *REDIS_ARGS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        settings = BrokerSettings(redis_url=f"unix://{sock}?db=3")
        client = make_client(settings)
        scripts = FleetScripts(Links(client.connection_pool, timeout_s=settings.socket_timeout_s))
        try:
            await push(scripts.links, "k", b"over a unix socket", ttl_ms=60_000)
            assert await client.lrange("k", 0, -1) == [b"over a unix socket"]  # in db 3
            assert await pop(scripts.links, ["k"], 1.0) == b"over a unix socket"
        finally:
            await scripts.links.aclose()
            await client.aclose()
    finally:
        server.terminate()
        server.wait(10)


def test_the_test_helpers_leave_no_log_directories_behind(tmp_path: Path) -> None:
    """A RedisServer that made its own log directory removes it once it is gone (after its
    logs could still be read); one given a directory leaves it to its caller."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer().start()
    own = server.log_dir
    try:
        assert list(own.glob("redis-*.log"))
    finally:
        server.stop()
    assert own.is_dir()  # stopped, still held: its logs can be read
    del server
    gc.collect()
    assert not own.exists()
    given = RedisServer(log_dir=tmp_path)
    given.start().stop()
    del given
    gc.collect()
    assert list(tmp_path.glob("redis-*.log"))


async def until(check: Callable[[], object], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def test_a_reader_parks_after_a_reply_and_the_next_push_rides_with_its_blpop(
    client: aioredis.Redis, scripts: FleetScripts
) -> None:
    """The worker's reader of a down channel (``_reader.py``): a reply, then no BLPOP in
    flight until a push rides with the next one, or until ``park_s`` has passed."""
    down, up = key(), key()
    got: list[bytes | None] = []
    lost: list[BaseException] = []

    def park_after(raw: bytes | None) -> bool:
        got.append(raw)
        return True

    reader = DownReader(scripts.links, down, park_s=0.3, on_message=park_after, on_lost=lost.append)
    reader.start()
    await until(lambda: reader.in_flight, "the BLPOP (on a link it connects)")
    await client.rpush(down, b"first")
    await until(lambda: got == [b"first"], "the first message")
    assert not reader.in_flight  # parked: on_message asked for it
    errors: list[str] = []
    assert reader.ride(packed_push(up, (b"a call",), 60_000), errors.append)
    assert reader.in_flight
    await until(lambda: reader.in_flight and errors == [], "the ride")
    assert await client.lrange(up, 0, -1) == [b"a call"]  # went up with the BLPOP
    assert not reader.ride(packed_push(up, (b"no",), 60_000), errors.append)  # one in flight
    await client.rpush(down, b"second")
    await until(lambda: got == [b"first", b"second"], "the second message")
    assert not reader.in_flight
    await until(lambda: reader.in_flight, "the parked reader to read alone", timeout_s=3.0)
    await client.set(up, "not a list")
    await client.rpush(down, b"third")
    await until(lambda: len(got) == 3, "the third message")
    assert reader.ride(packed_push(up, (b"lost",), 60_000), errors.append)
    await until(lambda: errors, "the failed push to be reported")
    assert "WRONGTYPE" in errors[0]
    reader.stop(close=True)
    assert not reader.in_flight and lost == []
    await client.delete(down, up)


async def test_a_reader_reports_its_link_lost_and_a_close_drains_it(private_redis: RedisServer) -> None:
    settings = BrokerSettings(redis_url=private_redis.url)
    client = make_client(settings)
    links = Links(client.connection_pool, timeout_s=settings.socket_timeout_s)
    lost: list[BaseException] = []
    got: list[bytes | None] = []

    def read_on(raw: bytes | None) -> bool:
        got.append(raw)
        return False

    try:
        reader = DownReader(links, "down", park_s=0.05, on_message=read_on, on_lost=lost.append)
        reader.start()
        await until(lambda: reader.in_flight, "the BLPOP")
        reader.stop()  # the job ended: its Close ends the BLPOP still in flight
        await client.rpush("down", b"close")
        await reader.drained(5.0)
        assert got == [b"close"] and not reader.in_flight and lost == []
        assert len(links._stock) == 1  # its link went back, reusable
        reader = DownReader(links, "down", park_s=0.05, on_message=lambda raw: False, on_lost=lost.append)
        reader.start()
        await until(lambda: reader.in_flight, "the second BLPOP")
        await asyncio.to_thread(private_redis.restart)
        await until(lambda: lost, "the loss to be reported", timeout_s=10.0)
        assert is_broker_error(lost[0]) and not reader.in_flight
        assert not reader.ride(packed_push("up", (b"x",), 60_000), lambda _: None)  # stopped
    finally:
        await links.aclose()
        await client.aclose()


async def test_a_redis_py_whose_connections_have_no_stream_writer_fails_with_a_sentence(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link takes over the transport of redis-py's connection through its private
    ``_writer`` field (``link.py``): a release that moves it is named in a sentence, not met
    as an AttributeError inside a job."""
    from redis.asyncio.connection import AbstractConnection

    connect = AbstractConnection.connect

    async def connect_without_writer(self: AbstractConnection) -> None:
        await connect(self)  # type: ignore[no-untyped-call]
        writer = self._writer
        self._writer = None
        self.__dict__["_moved_writer"] = writer  # what a release that renamed it would do

    monkeypatch.setattr(AbstractConnection, "connect", connect_without_writer)
    with pytest.raises(redis.exceptions.ConnectionError, match=r"its private _writer field"):
        await open_link(client.connection_pool, timeout_s=1.0)
