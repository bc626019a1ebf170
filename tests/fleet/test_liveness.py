"""A busy host, or a busy worker, is not a dead one.

The host's heartbeat and the worker's job leases are renewed from threads of their own
(``codemode/fleet/_beat.py``), so a tool that blocks the host's event loop longer than the
heartbeat's TTL neither makes the worker give up on the host nor makes the host give up on
a job that finished meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import replace

import pytest
import redis

from codemode import tool_result
from codemode.fleet import FleetExecutor
from codemode.fleet.host.heartbeat import HostHeartbeat
from codemode.fleet.redis.beat import BeatThread
from codemode.fleet.redis.client import make_client
from codemode.fleet.redis.keys import JobKeys, admission_key, host_key
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import RedisServer
from codemode.fleet.worker.leases import LeaseKeeper

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

BLOCK_S = 6.0
"""How long the tool blocks the host's event loop: three times the heartbeat TTL below."""
HOST_TTL_MS = 2_000

CALLS_THE_BLOCKING_TOOL = """async () => {
  await new Promise((r) => setTimeout(r, 300));
  return await t.block();
}"""
FINISHES_WHILE_THE_HOST_IS_BLOCKED = """async () => {
  await new Promise((r) => setTimeout(r, 3500));
  return 'b';
}"""


async def test_a_tool_that_blocks_the_host_loop_fails_nothing(settings: BrokerSettings) -> None:
    """One job's tool blocks the host's loop for BLOCK_S (a sync sleep inside an async
    dispatch); a second job of the same host finishes on its worker meanwhile. Both come
    back right: the worker did not declare the host gone (its heartbeat beat on from its
    thread), and the host did not call the finished job's deleted lease a crash."""
    host = replace(settings, host_ttl_ms=HOST_TTL_MS, key_ttl_ms=max(settings.key_ttl_ms, 4 * HOST_TTL_MS))

    async def dispatch(provider: str, tool: str, args: str) -> str:
        time.sleep(BLOCK_S)  # the mistake this test is about: blocking work in an async dispatch
        return tool_result("a")

    async with FleetExecutor(settings=host, queue_timeout=60_000) as ex:
        a, b = await asyncio.gather(
            ex.execute(
                CALLS_THE_BLOCKING_TOOL,
                providers=[{"name": "t", "tools": ["block"]}],
                dispatch=dispatch,
                timeout=60_000,
            ),
            ex.execute(FINISHES_WHILE_THE_HOST_IS_BLOCKED, timeout=60_000),
            return_exceptions=True,
        )
    assert not isinstance(a, BaseException), a
    assert not isinstance(b, BaseException), b
    assert (a.result, a.error) == ("a", None)
    assert (b.result, b.error) == ("b", None)


async def test_the_host_heartbeat_connects_as_the_settings_say(private_redis: RedisServer) -> None:
    """The heartbeat's thread builds its client from the fleet's settings (not from the
    async client's connection internals): it writes the key in the settings' database,
    named and timed as every fleet connection is."""
    settings = BrokerSettings(redis_url=private_redis.url.replace("/0", "/3"), host_ttl_ms=600)
    client = make_client(settings)
    heartbeat = HostHeartbeat(settings, client, "codemode:host:beat-test")
    try:
        await heartbeat.start()
        await asyncio.sleep(1.0)  # past the TTL: only the thread's beats keep the key
        raw = redis.Redis.from_url(private_redis.url.replace("/0", "/3"))
        assert raw.exists("codemode:host:beat-test") == 1
        names = {c["name"] for c in raw.client_list() if c.get("db") == "3"}
        assert "codemode-fleet" in names
        raw.close()
    finally:
        await heartbeat.stop()
        await client.aclose()


def test_a_beat_thread_beats_while_the_caller_is_busy() -> None:
    """The mechanism alone: the thread's beats go on while the thread that started it holds
    no loop open (here: sleeps), and stop when told."""
    beats: list[float] = []
    thread = BeatThread("test-beats", 0.05, lambda: beats.append(time.monotonic()))
    thread.start()
    time.sleep(1.0)  # a stand-in for a blocked event loop
    thread.stop(5.0)
    count = len(beats)
    assert count >= 3, beats
    time.sleep(0.3)
    assert len(beats) == count
    assert not any(t.name == "test-beats" for t in threading.enumerate())


async def test_leases_are_renewed_while_the_worker_loop_is_blocked(
    settings: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """A worker's lease keeper, on a real Redis: the lease stays while the loop that holds
    the job is blocked for three lease TTLs; a host key gone frees the job's slot and is
    told on the loop; a lease the job dropped (its end) is not written again."""
    s = replace(settings, lease_ttl_ms=1_500, key_prefix=f"t-{uuid.uuid4().hex[:8]}")
    keys = JobKeys.of(s.key_prefix, "job-1")
    host, admission = host_key(s.key_prefix, "host-1"), admission_key(s.key_prefix)
    redis_sync.set(keys.lease, b"worker-1", px=s.lease_ttl_ms)
    redis_sync.set(host, b"1", px=60_000)
    redis_sync.zadd(admission, {"job-1": time.time() * 1000 + 60_000})
    keeper = LeaseKeeper(s, "worker-1")
    told = asyncio.Event()
    try:
        keeper.hold("job-1", [keys.lease, host, keys.up, keys.down, keys.claim, admission], told.set)
        time.sleep(3 * s.lease_ttl_ms / 1000)  # the worker's loop, blocked
        assert redis_sync.get(keys.lease) == b"worker-1"
        redis_sync.delete(host)
        await asyncio.wait_for(told.wait(), 30)
        assert redis_sync.zscore(admission, "job-1") is None
        assert redis_sync.get(keys.lease) == b"worker-1"  # the job runs on; only its calls fail
        redis_sync.delete(keys.lease)  # the job's end (finish drops the lease)
        await asyncio.sleep(s.lease_ttl_ms / 1000)  # three renewal rounds
        assert redis_sync.exists(keys.lease) == 0
    finally:
        keeper.close()
    assert not any(t.name == "codemode-leases" for t in threading.enumerate())
