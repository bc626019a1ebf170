"""broker_config's choices, the wire messages and the Lua scripts, checked directly."""

# kombu's Connection, Producer, Consumer and Queue carry no annotations; the tests here
# drive them directly, so calls to unannotated functions are allowed in this module.
# mypy: allow-untyped-calls

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TypedDict

import msgspec
import pytest
import redis
import redis.asyncio as aioredis

import codemode.fleet
from codemode import JobExpired, LogEntry, Outcome, ProgramError
from codemode._faults import FaultData
from codemode._outbound import OutboundRequest
from codemode.fleet.redis.channel import pop, push
from codemode.fleet.redis.client import make_client
from codemode.fleet.redis.keys import JobKeys, admission_key, host_key
from codemode.fleet.redis.link import Links
from codemode.fleet.redis.scripts import FleetScripts
from codemode.fleet.settings import (
    MAX_BLOCKING_WAIT_S,
    MAX_JOB_SECONDS,
    BrokerSettings,
    SettingsError,
    WorkerSettings,
)
from codemode.fleet.testing import RedisServer
from codemode.fleet.wire import (
    Failed,
    FetchCall,
    Finished,
    JobSpec,
    LogLine,
    Started,
    ToolReply,
    UpMessage,
    decode_down,
    decode_up,
    encode,
    job_from_celery,
    job_to_celery,
)
from codemode.fleet.worker.cli import main as worker_main
from codemode.fleet.worker.transport import RedisTransport
from codemode.limits import MAX_MEMORY_LIMIT_MB, MAX_POOL_WORKERS

pytestmark = pytest.mark.fleet


def test_celery_settings_chosen_for_this_workload() -> None:
    s = BrokerSettings()
    conf = s.celery_config()
    assert conf["task_acks_late"] is True
    assert conf["task_reject_on_worker_lost"] is True
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["task_serializer"] == "json" and conf["accept_content"] == ["json"]
    transport = conf["broker_transport_options"]
    assert transport["visibility_timeout"] >= 2 * MAX_JOB_SECONDS
    assert transport["unacked_restore_interval"] == s.unacked_restore_interval_s
    assert transport["socket_timeout"] > MAX_BLOCKING_WAIT_S + 1
    assert s.redis_kwargs()["socket_timeout"] > MAX_BLOCKING_WAIT_S + 1
    assert conf["result_expires"] == s.result_expires_s
    assert conf["task_ignore_result"] is True


def test_publishes_through_our_transport_survive_a_restart(private_redis: RedisServer) -> None:
    """Celery's publishes go through codemode's transport, and a restarted Redis still gets
    every message."""
    from celery import Celery

    app = Celery("transport-test", set_as_current=False)
    app.conf.update(BrokerSettings(redis_url=private_redis.url).celery_config())
    queue = f"q-{uuid.uuid4().hex}"
    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, RedisTransport)
    app.send_task("t", queue=queue, ignore_result=True)
    private_redis.restart()
    for _ in range(3):  # the publish retry policy covers the connection the restart cut
        app.send_task("t", queue=queue, ignore_result=True)
    app.close()
    raw = redis.Redis.from_url(private_redis.url)
    try:
        assert raw.llen(queue) == 3  # the restart lost the first (Redis keeps nothing)
    finally:
        raw.close()


def test_unacked_deliveries_are_recorded_and_forgotten_in_kombus_keys(private_redis: RedisServer) -> None:
    """Through our channel (every message screened), kombu still records each unacked
    delivery (for its redelivery if the worker dies: late acks), and removes the record on
    ack and reject. (test_fleet_faults restores such a record after killing a worker.)"""
    import json

    from kombu.connection import Connection

    raw = redis.Redis.from_url(private_redis.url)
    queue = f"q-{uuid.uuid4().hex}"
    try:
        with Connection(private_redis.url, transport=RedisTransport) as conn:
            simple = conn.SimpleQueue(queue)
            for _ in range(3):
                simple.put({"job": 1})
            first = simple.get(timeout=5)
            assert raw.hlen("unacked") == 1 and raw.zcard("unacked_index") == 1
            record = raw.hget("unacked", first.delivery_tag)
            assert record is not None
            message, _exchange, routing_key = json.loads(record)
            assert routing_key == queue and message["properties"]["delivery_tag"] == (first.delivery_tag)
            first.ack()
            assert raw.hlen("unacked") == 0 and raw.zcard("unacked_index") == 0
            second = simple.get(timeout=5)
            second.reject(requeue=False)
            assert raw.hlen("unacked") == 0 and raw.llen(queue) == 1
            third = simple.get(timeout=5)
            third.reject(requeue=True)
            assert raw.hlen("unacked") == 0 and raw.llen(queue) == 1  # back in the queue
            simple.close()
    finally:
        raw.delete(queue)
        raw.close()


def test_settings_come_from_the_environment_and_refuse_nonsense() -> None:
    s = BrokerSettings.from_env({"CODEMODE_REDIS_URL": "redis://r:1/2", "CODEMODE_LEASE_TTL_MS": "4000"})
    assert s.redis_url == "redis://r:1/2" and s.lease_ttl_ms == 4000
    assert BrokerSettings.from_env(s.env()) == s
    with pytest.raises(SettingsError):
        BrokerSettings.from_env({"CODEMODE_REDIS_URL": "http://nope"})
    with pytest.raises(SettingsError):
        BrokerSettings(socket_timeout_s=1.0)
    with pytest.raises(SettingsError):
        BrokerSettings.from_env({"CODEMODE_LEASE_TTL_MS": "soon"})
    with pytest.raises(SettingsError):
        WorkerSettings(pool="prefork")
    assert WorkerSettings.from_env({"CODEMODE_WORKER_CONCURRENCY": "3"}).concurrency == 3


@pytest.mark.parametrize(
    ("env", "sentence"),
    [
        ({"CODEMODE_WORKER_MEMORY_MB": "4097"}, "CODEMODE_WORKER_MEMORY_MB must be from 16 to 4096"),
        (
            {"CODEMODE_WORKER_CONCURRENCY": "120", "CODEMODE_WORKER_MAX_HANDLES": "9"},
            "CODEMODE_WORKER_CONCURRENCY plus CODEMODE_WORKER_MAX_HANDLES must be at most 128",
        ),
        (
            {"CODEMODE_WORKER_MAX_TIMEOUT_MS": "3600001"},
            "CODEMODE_WORKER_MAX_TIMEOUT_MS must be at most 3600000",
        ),
    ],
)
def test_a_worker_its_isolate_pool_would_refuse_stops_at_start(
    env: dict[str, str], sentence: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bounds the isolate pool applies are the worker's settings' own: a worker that would
    fail building its pool stops before it connects, with a sentence naming the variable."""
    assert MAX_MEMORY_LIMIT_MB == 4096 and MAX_POOL_WORKERS == 128
    with pytest.raises(SettingsError, match=re.escape(sentence)):
        WorkerSettings.from_env(env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert worker_main(["--wait-for-redis", "0"]) == 2
    assert sentence in capsys.readouterr().err


def test_the_transport_celery_is_told_to_load_is_the_fleets() -> None:
    """Celery loads the broker transport by the name the settings give (a string): it must
    name the module the transport lives in."""
    from kombu.utils.imports import symbol_by_name

    assert symbol_by_name(BrokerSettings().celery_config()["broker_transport"]) is RedisTransport


def test_pin_cpus_reads_true_or_false_and_nothing_else() -> None:
    assert WorkerSettings().pin_cpus is True
    for raw, value in (("false", False), ("0", False), ("Off", False), ("yes", True), ("1", True)):
        assert WorkerSettings.from_env({"CODEMODE_WORKER_PIN_CPUS": raw}).pin_cpus is value
    unpinned = WorkerSettings(pin_cpus=False)
    assert WorkerSettings.from_env(unpinned.env()) == unpinned
    with pytest.raises(SettingsError, match="CODEMODE_WORKER_PIN_CPUS must be true or false"):
        WorkerSettings.from_env({"CODEMODE_WORKER_PIN_CPUS": "sometimes"})
    with pytest.raises(SettingsError, match="pin_cpus must be true or false"):
        WorkerSettings(pin_cpus="no")  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested


def test_standby_reads_true_or_false_and_nothing_else() -> None:
    assert WorkerSettings().standby is True
    assert WorkerSettings.from_env({"CODEMODE_WORKER_STANDBY": "off"}).standby is False
    without = WorkerSettings(standby=False)
    assert WorkerSettings.from_env(without.env()) == without
    with pytest.raises(SettingsError, match="CODEMODE_WORKER_STANDBY must be true or false"):
        WorkerSettings.from_env({"CODEMODE_WORKER_STANDBY": "maybe"})
    with pytest.raises(SettingsError, match="standby must be true or false"):
        WorkerSettings(standby=1)  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested


def test_job_travels_as_plain_json_and_back() -> None:
    spec = JobSpec(
        job_id="j",
        host_id="h",
        key_prefix="p",
        code="() => 1",
        providers=(codemode.Provider("t", ("a", "b")),),
        network="host",
        modules={"m": {"x": 1}},
        timeout_ms=300,
        count_host_waits=False,
        start_by_ms=123,
    )
    data = msgspec.json.decode(msgspec.json.encode(job_to_celery(spec)))  # JSON, nothing else
    assert job_from_celery(data) == spec
    with pytest.raises(msgspec.ValidationError):
        job_from_celery({"job_id": 1})


def test_channel_messages_round_trip_and_refuse_garbage() -> None:
    up: list[UpMessage] = [
        Started("w:1"),
        FetchCall(2, OutboundRequest("GET", "https://a/", [("a", "b")], b"\x00")),
        Finished(Outcome(result=[1, "x"], logs=[])),
        Finished(
            Outcome(error="bad", error_detail=ProgramError("TypeError", "bad", 2, 5, ("at program:2:5",)))
        ),
        LogLine(LogEntry("warn", "careful")),
        Failed(FaultData("JOB_EXPIRED", "late", True)),
    ]
    for message in up:
        assert decode_up(encode(message)) == message
    assert decode_down(encode(ToolReply(1, '{"result": 1}'))) == ToolReply(1, '{"result": 1}')
    for garbage in (b"", b"\xc1", encode(ToolReply(1, "x"))):
        with pytest.raises(msgspec.DecodeError):
            decode_up(garbage)


@dataclass
class OnRedis:
    client: aioredis.Redis
    scripts: FleetScripts
    prefix: str
    """Every key under it is deleted after the test."""


@pytest.fixture
async def on_redis(settings: BrokerSettings) -> AsyncIterator[OnRedis]:
    """A client, the fleet's scripts on it, and a key prefix of the test's own."""
    client: aioredis.Redis = make_client(settings)
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    links = Links(client.connection_pool, timeout_s=settings.socket_timeout_s)
    try:
        yield OnRedis(client, FleetScripts(links), prefix)
    finally:
        await links.aclose()
        for key in await client.keys(f"{prefix}:*"):
            await client.delete(key)
        await client.aclose()


class ClaimArgs(TypedDict):
    """The arguments of ``FleetScripts.claim`` that every claim below shares."""

    lease_ttl_ms: int
    key_ttl_ms: int
    started: bytes
    expired: bytes


@pytest.mark.anyio
async def test_claim_is_first_writer_wins_and_respects_start_by(on_redis: OnRedis) -> None:
    client, scripts, prefix = on_redis.client, on_redis.scripts, on_redis.prefix
    now_ms = int(time.time() * 1000)
    await client.set(host_key(prefix, "h"), b"1", px=5_000)
    args = ClaimArgs(
        lease_ttl_ms=3_000,
        key_ttl_ms=10_000,
        started=encode(Started("w")),
        expired=encode(Failed(JobExpired("late").to_data())),
    )

    def keys(job: str) -> list[str]:
        k = JobKeys.of(prefix, job)
        return [k.claim, k.up, k.lease, host_key(prefix, "h"), admission_key(prefix)]

    first = await scripts.claim(keys("a"), worker="w1", start_by_ms=now_ms + 60_000, job_id="a", **args)
    again = await scripts.claim(keys("a"), worker="w2", start_by_ms=now_ms + 60_000, job_id="a", **args)
    assert (first.state, again.state, again.holder) == ("started", "taken", "w1")
    late = await scripts.claim(keys("b"), worker="w1", start_by_ms=now_ms - 1_000, job_id="b", **args)
    assert late.state == "expired"
    up = await client.lrange(JobKeys.of(prefix, "b").up, 0, -1)
    assert isinstance(up[0], bytes)
    assert isinstance(decode_up(up[0]), Failed)
    orphan = await scripts.claim(
        [*keys("c")[:3], host_key(prefix, "gone"), admission_key(prefix)],
        worker="w1",
        start_by_ms=now_ms + 60_000,
        job_id="c",
        **args,
    )
    assert orphan.state == "host-gone"
    # The producer's side of the race: a claimed job cannot be marked expired.
    settle = await scripts.settle(
        JobKeys.of(prefix, "a").claim,
        admission_key(prefix),
        start_by_ms=now_ms - 1,
        job_id="a",
        key_ttl_ms=10_000,
        mark="expired",
        force=True,
    )
    assert (settle.state, settle.holder) == ("taken", "w1")
    for key in await client.keys(f"{prefix}:*"):
        assert await client.pttl(key) > 0


@pytest.mark.anyio
async def test_a_quiet_claim_takes_the_job_without_telling_the_host(on_redis: OnRedis) -> None:
    """``announce=False`` (a quiet start): the claim and the lease are written, and nothing
    goes on the host's channel, so a short job wakes its host once, for its outcome."""
    client, scripts, prefix = on_redis.client, on_redis.scripts, on_redis.prefix
    await client.set(host_key(prefix, "h"), b"1", px=5_000)
    keys = JobKeys.of(prefix, "q")
    claim = await scripts.claim(
        [keys.claim, keys.up, keys.lease, host_key(prefix, "h"), admission_key(prefix)],
        worker="w1",
        start_by_ms=int(time.time() * 1000) + 60_000,
        lease_ttl_ms=3_000,
        key_ttl_ms=10_000,
        job_id="q",
        started=encode(Started("w1")),
        expired=encode(Failed(JobExpired("late").to_data())),
        announce=False,
    )
    assert claim.state == "started"
    assert await client.get(keys.claim) == b"w1" and await client.get(keys.lease) == b"w1"
    assert await client.llen(keys.up) == 0


@pytest.mark.anyio
async def test_a_channel_push_keeps_order_and_always_leaves_an_expiry(on_redis: OnRedis) -> None:
    """Popping a list empty deletes its key, so the next push creates a key without an
    expiry: every push must re-arm it, or a channel nobody reads (a dead host) would stay."""
    client, scripts = on_redis.client, on_redis.scripts
    key = f"{on_redis.prefix}:up"
    await push(scripts.links, key, b"one", b"two", ttl_ms=60_000)
    await push(scripts.links, key, b"three", ttl_ms=60_000)
    assert await client.lrange(key, 0, -1) == [b"one", b"two", b"three"]
    assert 0 < await client.pttl(key) <= 60_000
    for expected in (b"one", b"two", b"three"):
        assert await pop(scripts.links, [key], 1.0) == expected
    assert not await client.exists(key)  # emptied: Redis deleted the key
    await push(scripts.links, key, b"four", ttl_ms=5_000)
    assert 0 < await client.pttl(key) <= 5_000


@pytest.mark.anyio
async def test_finish_sends_the_outcome_frees_the_slot_and_drops_the_lease(on_redis: OnRedis) -> None:
    client, scripts, prefix = on_redis.client, on_redis.scripts, on_redis.prefix
    keys = JobKeys.of(prefix, "j")
    admission = admission_key(prefix)
    await client.zadd(admission, {"j": 1, "other": 1})
    await client.set(keys.lease, b"w1")
    final = encode(Finished(Outcome(result=1)))
    await scripts.finish(
        [keys.up, keys.down, admission, keys.lease],
        key_ttl_ms=30_000,
        job_id="j",
        final=final,
        close=b"close",
    )
    assert await client.lrange(keys.up, 0, -1) == [final]
    assert await client.lrange(keys.down, 0, -1) == [b"close"]
    assert 0 < await client.pttl(keys.up) <= 30_000 and await client.pttl(keys.down) > 0
    assert await client.zrange(admission, 0, -1) == [b"other"]
    assert not await client.exists(keys.lease)
    # Without a reader waiting, nothing goes on down.
    await client.delete(keys.down)
    await scripts.finish(
        [keys.up, keys.down, admission, keys.lease], key_ttl_ms=30_000, job_id="j", final=final, close=None
    )
    assert not await client.exists(keys.down)


@pytest.mark.anyio
async def test_admission_lapses_slots_of_jobs_nobody_finished(on_redis: OnRedis) -> None:
    client, scripts, prefix = on_redis.client, on_redis.scripts, on_redis.prefix
    key, host, queue = admission_key(prefix), host_key(prefix, "h"), f"{prefix}:queue"

    async def admit(job: str) -> bool:
        result = await scripts.admit(
            key, host, queue, job, f"message {job}".encode(), limit=1, hold_ms=300, host_ttl_ms=1000
        )
        return result.admitted

    assert await admit("a")
    assert not await admit("b")
    time.sleep(0.4)  # the holder died: its slot lapses by itself
    assert await admit("c")
    assert 0 < await client.pttl(key) <= 300
    assert 0 < await client.pttl(host) <= 1000
    # An admitted job's message is queued in the same step; a refused one's never is.
    assert await client.lrange(queue, 0, -1) == [b"message c", b"message a"]


def test_public_names() -> None:
    assert sorted(codemode.fleet.__all__) == codemode.fleet.__all__
    for name in codemode.fleet.__all__:
        assert hasattr(codemode.fleet, name)
