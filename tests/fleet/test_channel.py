"""The reply channels' own connections (``_link.py``, ``_channel.py``), on a real Redis:
pipelined pushes, BLPOPs on stocked links, and what a lost, flushed, restarted or silent
Redis does to them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from broker_config import BrokerSettings
from codemode.fleet._channel import STALE_AFTER_S, ReplyChannels
from codemode.fleet._client import make_client
from codemode.fleet._errors import is_broker_error
from codemode.fleet._link import open_link, pack
from codemode.fleet.testing import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(settings: BrokerSettings) -> AsyncIterator[aioredis.Redis]:
    client = make_client(settings)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def channels(client: aioredis.Redis, settings: BrokerSettings) -> AsyncIterator[ReplyChannels]:
    channels = ReplyChannels(client.connection_pool, timeout_s=settings.socket_timeout_s)
    try:
        yield channels
    finally:
        await channels.aclose()


def key() -> str:
    return f"t-chan-{uuid.uuid4().hex[:8]}"


async def fleet_connections(client: aioredis.Redis) -> int:
    return sum(1 for c in await client.client_list() if c.get("name") == "codemode-fleet")


async def test_a_thousand_pushes_at_once_share_one_connection_and_keep_their_order(
        client: aioredis.Redis, channels: ReplyChannels) -> None:
    k = key()
    await channels.push(k, b"first", ttl_ms=60_000)  # the pushing link exists
    before = await fleet_connections(client)
    await asyncio.gather(*(channels.push(k, str(i).encode(), ttl_ms=60_000)
                           for i in range(1000)))
    assert await fleet_connections(client) == before
    assert await client.lrange(k, 0, -1) == [b"first", *(str(i).encode() for i in range(1000))]
    await client.delete(k)


async def test_a_pop_waits_for_a_push_and_gives_its_link_back(channels: ReplyChannels) -> None:
    k = key()
    waiting = asyncio.ensure_future(channels.pop([k], 5.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await channels.push(k, b"hello", ttl_ms=60_000)
    assert await waiting == b"hello"
    assert len(channels._stock) == 1
    assert await channels.pop([k], 0.05) is None  # nothing came: None, on the same link
    assert len(channels._stock) == 1


async def test_a_cancelled_pop_closes_its_link_so_no_later_message_is_swallowed(
        channels: ReplyChannels) -> None:
    k = key()
    waiting = asyncio.ensure_future(channels.pop([k], 5.0))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert channels._stock == []  # not given back: its BLPOP may still be answered
    await asyncio.sleep(0.05)  # Redis sees the connection close
    await channels.push(k, b"kept", ttl_ms=60_000)
    assert await channels.pop([k], 1.0) == b"kept"


async def test_a_link_idle_past_the_health_check_interval_is_replaced(
        channels: ReplyChannels) -> None:
    k = key()
    assert await channels.pop([k], 0.01) is None
    [old] = channels._stock
    old.idle_since = time.monotonic() - STALE_AFTER_S - 1
    assert await channels.pop([k], 0.01) is None
    [new] = channels._stock
    assert new is not old and not old.usable


async def test_a_push_after_redis_lost_its_scripts_sends_the_script_itself(
        client: aioredis.Redis, channels: ReplyChannels) -> None:
    k = key()
    await channels.push(k, b"one", ttl_ms=60_000)
    await client.script_flush()
    await channels.push(k, b"two", ttl_ms=60_000)
    await channels.push(k, b"three", ttl_ms=60_000)
    assert await client.lrange(k, 0, -1) == [b"one", b"two", b"three"]
    assert 0 < await client.pttl(k) <= 60_000
    await client.delete(k)


async def test_a_redis_restart_fails_what_is_in_flight_and_the_next_command_reconnects(
        private_redis: RedisServer) -> None:
    settings = BrokerSettings(redis_url=private_redis.url)
    client = make_client(settings)
    channels = ReplyChannels(client.connection_pool, timeout_s=settings.socket_timeout_s)
    try:
        await channels.push("k", b"before", ttl_ms=60_000)
        waiting = asyncio.ensure_future(channels.pop(["nothing"], 20.0))
        await asyncio.sleep(0.1)
        await asyncio.to_thread(private_redis.restart)
        with pytest.raises(redis.exceptions.ConnectionError) as lost:
            await asyncio.wait_for(waiting, 10.0)
        assert is_broker_error(lost.value)
        assert channels._stock == []
        await channels.push("k", b"after", ttl_ms=60_000)  # a new pushing link
        assert await channels.pop(["k"], 1.0) == b"after"  # restarted empty
    finally:
        await channels.aclose()
        await client.aclose()


async def test_a_redis_that_stops_answering_times_the_link_out(client: aioredis.Redis) -> None:
    link = await open_link(client.connection_pool, timeout_s=0.3)
    began = time.monotonic()
    with pytest.raises(redis.exceptions.TimeoutError, match="within 0.3 s"):
        await link.command(pack("BLPOP", key(), 5))
    assert time.monotonic() - began < 3.0
    assert not link.usable
    with pytest.raises(redis.exceptions.TimeoutError):
        link.command(pack("PING"))


async def test_an_error_reply_raises_and_a_closed_channel_refuses_new_links(
        client: aioredis.Redis, channels: ReplyChannels) -> None:
    k = key()
    await client.set(k, "not a list")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await channels.push(k, b"x", ttl_ms=60_000)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await channels.pop([k], 0.1)
    await client.delete(k)
    await channels.aclose()
    with pytest.raises(redis.exceptions.ConnectionError, match="closed"):
        await channels.pop([k], 0.1)
