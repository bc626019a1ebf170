"""No message on a queue stops a worker, and none is delivered again and again.

Each message of the corpus below is pushed as raw bytes with redis-py (``LPUSH``, as kombu's
transport writes a queue) onto the queue of a real worker process on a private Redis. For
each one: the worker logs it as dropped, once, with its reason; the queue's dead-letter list
(``<queue>.dead``) gains one entry carrying that reason; and the worker serves a real job
right after. The checks look only at Redis and the worker's log, so they hold whichever way
a worker reads its queue (kombu's channel or this project's, Celery's strategy or the
hand-off).

The channel tests at the end drive the transport in this process, without a worker: a
message that is not JSON no longer escapes ``drain_events``, and a delivery settled inside
its callback leaves no unacked record behind (it was restored after every visibility
timeout).
"""

# kombu's Connection, Producer, Consumer and Queue carry no annotations; the tests here
# drive them directly, so calls to unannotated functions are allowed in this module.
# mypy: allow-untyped-calls

from __future__ import annotations

import base64
import contextlib
import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
import redis
from fleet_helpers import eventually

from codemode.fleet import FleetExecutor
from codemode.fleet.host.producer import CeleryMessages
from codemode.fleet.redis.keys import dead_letter_key
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import FAST_FAULTS, RedisServer, WorkerProcess
from codemode.fleet.wire import MAX_FLEET_REQUEST_BYTES, MAX_QUEUE_MESSAGE_BYTES, JobSpec
from codemode.fleet.worker.deadletter import MAX_KEPT_CHARS
from codemode.fleet.worker.transport import RedisTransport

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

VISIBILITY_S = 3
"""Short, so that a message left unacked would come back within the test."""
DEEP = 100_000
"""Nesting far past any decoder's recursion limit."""
DROPPED = "dropped a message from queue"


# ---- the corpus ------------------------------------------------------------------------


def _real_envelope(settings: BrokerSettings) -> dict[str, Any]:
    """An execute message exactly as a producer writes it (its host does not exist, so
    pushed as is it would start nothing)."""
    spec = JobSpec(
        job_id=uuid.uuid4().hex,
        host_id="no-such-host",
        key_prefix=settings.key_prefix,
        code="() => 1",
        timeout_ms=1_000,
        count_host_waits=False,
        start_by_ms=0,
    )
    raw = CeleryMessages(settings).build(spec, queue=settings.queue, expires_s=60)
    envelope: dict[str, Any] = json.loads(raw)
    return envelope


def _corpus(settings: BrokerSettings) -> list[tuple[str, bytes]]:
    """(name, raw bytes): at least fifty messages no worker can take."""
    real = _real_envelope(settings)
    real_bytes = json.dumps(real).encode()
    body = json.loads(base64.b64decode(real["body"]))
    job = body[1]["job"]

    def envelope(change: Callable[[dict[str, Any]], object]) -> bytes:
        e = copy.deepcopy(real)
        e["properties"]["delivery_tag"] = str(uuid.uuid4())  # each message its own, as kombu's
        change(e)
        return json.dumps(e).encode()

    def with_body(text: bytes) -> bytes:
        return envelope(lambda e: e.update(body=base64.b64encode(text).decode()))

    def with_job(change: Callable[[dict[str, Any]], object]) -> bytes:
        j = copy.deepcopy(job)
        change(j)
        return with_body(json.dumps([[], {"job": j}, body[2]]).encode())

    def set_in(path: str, value: object) -> Callable[[dict[str, Any]], object]:
        *parents, last = path.split(".")

        def change(e: dict[str, Any]) -> None:
            for key in parents:
                e = e[key]
            e[last] = value

        return change

    def drop_key(path: str) -> Callable[[dict[str, Any]], object]:
        *parents, last = path.split(".")

        def change(e: dict[str, Any]) -> None:
            for key in parents:
                e = e[key]
            del e[last]

        return change

    nested_object = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    tag = real["properties"]["delivery_tag"]
    return [
        # Not JSON, or not an object.
        ("not json", b"not json"),
        ("a number", b"42"),
        ("an array", b"[1,2,3]"),
        ("a string", b'"hello"'),
        ("null", b"null"),
        ("true", b"true"),
        ("an empty object", b"{}"),
        ("an empty message", b""),
        ("a truncated envelope", real_bytes[: len(real_bytes) // 2]),
        ("bytes that are not UTF-8", b"\xff\xfe\xfd\x00"),
        ("UTF-8 cut inside a character", b'{"body": "\xe2\x82'),
        (
            "a valid envelope with a character cut",
            envelope(lambda e: e["headers"].update(note="\u20ac")).replace(b"\\u20ac", b"\xe2\x82"),
        ),
        ("arrays nested past any limit", b"[" * DEEP + b"]" * DEEP),
        (
            "a header nested past any limit",
            real_bytes.replace(b'"headers": {', b'"headers": {"deep": ' + nested_object + b", ", 1),
        ),
        (
            "an integer of 5,000 digits",
            real_bytes.replace(b'"priority": 0', b'"priority": 1' + b"0" * 5_000, 1),
        ),
        ("a delivery tag that is NaN", real_bytes.replace(f'"{tag}"'.encode(), b"NaN", 1)),
        ("a delivery tag that is infinite", real_bytes.replace(f'"{tag}"'.encode(), b"1e999", 1)),
        ("over the size limit", b'{"pad": "' + b"a" * MAX_QUEUE_MESSAGE_BYTES + b'"}'),
        # kombu's envelope with wrong types or parts missing.
        ("properties a number", envelope(set_in("properties", 42))),
        ("properties a list", envelope(set_in("properties", []))),
        ("no properties", envelope(drop_key("properties"))),
        ("no delivery tag", envelope(drop_key("properties.delivery_tag"))),
        ("a delivery tag that is a number", envelope(set_in("properties.delivery_tag", 42))),
        ("a delivery tag that is a list", envelope(set_in("properties.delivery_tag", [1]))),
        ("a delivery tag that is null", envelope(set_in("properties.delivery_tag", None))),
        ("no delivery_info", envelope(drop_key("properties.delivery_info"))),
        ("delivery_info a string", envelope(set_in("properties.delivery_info", "x"))),
        ("an exchange that is a number", envelope(set_in("properties.delivery_info.exchange", 1))),
        ("no routing key", envelope(drop_key("properties.delivery_info.routing_key"))),
        ("a body that is not base64", envelope(set_in("body", "!!!not base64"))),
        ("a body that is a number", envelope(set_in("body", 42))),
        ("a body that is an object", envelope(set_in("body", {"a": 1}))),
        ("an unknown body encoding", envelope(set_in("properties.body_encoding", "rot13"))),
        ("a body encoding that is a number", envelope(set_in("properties.body_encoding", 7))),
        ("no headers", envelope(set_in("headers", None))),
        ("headers a list", envelope(set_in("headers", []))),
        ("headers a string", envelope(set_in("headers", "task"))),
        ("empty headers", envelope(set_in("headers", {}))),
        ("a task name that is a number", envelope(set_in("headers.task", 42))),
        ("a task name that is a list", envelope(set_in("headers.task", ["codemode.execute"]))),
        ("a task name that is an object", envelope(set_in("headers.task", {"a": 1}))),
        ("an unknown task", envelope(set_in("headers.task", "no.such.task"))),
        ("an empty task name", envelope(set_in("headers.task", ""))),
        (
            "an unknown task and no id",
            envelope(lambda e: (e["headers"].update(task="no.such"), e["headers"].pop("id"))),
        ),
        ("pickle as content type", envelope(set_in("content-type", "application/x-python-serialize"))),
        ("yaml as content type", envelope(set_in("content-type", "application/x-yaml"))),
        ("a content type that is a number", envelope(set_in("content-type", 3))),
        ("a content encoding that is a number", envelope(set_in("content-encoding", 8))),
        ("plain text as content type", envelope(set_in("content-type", "text/plain"))),
        ("no content type", envelope(drop_key("content-type"))),
        (
            "a compression header on a plain body",
            envelope(set_in("headers.compression", "application/x-gzip")),
        ),
        ("an unknown compression", envelope(set_in("headers.compression", "nope"))),
        # The task's body: Celery's [args, kwargs, embed], then the job.
        ("a body of bytes that are not UTF-8", with_body(b"\xff\xfe\xfd")),
        ("a body that is truncated JSON", with_body(json.dumps(body).encode()[:40])),
        ("a body that is not a list", with_body(json.dumps({"job": job}).encode())),
        ("a body that is an empty list", with_body(b"[]")),
        ("a body with no job", with_body(b"[[], {}, {}]")),
        ("a body with two arguments", with_body(b"[[1, 2], {}, {}]")),
        ("a body with kwargs null", with_body(b"[[], null, {}]")),
        ("a body nested past any limit", with_body(b'[[], {"job": ' + nested_object + b"}, {}]")),
        ("a job that is a number", with_body(b'[[], {"job": 42}, {}]')),
        ("a job that is a list", with_body(b'[[], {"job": [1]}, {}]')),
        ("an empty job", with_body(b'[[], {"job": {}}, {}]')),
        ("a job with no id", with_job(lambda j: j.pop("job_id"))),
        ("a job id that is a number", with_job(set_in("job_id", 42))),
        ("code that is a number", with_job(set_in("code", 42))),
        ("code that is null", with_job(set_in("code", None))),
        ("a timeout that is a string", with_job(set_in("timeout_ms", "300"))),
        ("a timeout that is a float", with_job(set_in("timeout_ms", 2.5))),
        ("providers that are a string", with_job(set_in("providers", "t"))),
        ("a provider whose name is a number", with_job(set_in("providers", [{"name": 1, "tools": []}]))),
        ("an unknown network", with_job(set_in("network", "internet"))),
        ("an unknown kind", with_job(set_in("kind", "explode"))),
        ("a schema version that is a string", with_job(set_in("v", "1"))),
        ("count_host_waits a string", with_job(set_in("count_host_waits", "yes"))),
        ("modules that are a list", with_job(set_in("modules", ["a"]))),
    ]


# ---- the worker ------------------------------------------------------------------------


@pytest.fixture
def poison_settings(private_redis: RedisServer) -> BrokerSettings:
    return BrokerSettings(
        redis_url=private_redis.url,
        queue=f"q-{uuid.uuid4().hex[:8]}",
        visibility_timeout_s=VISIBILITY_S,
        unacked_restore_interval_s=1,
        **FAST_FAULTS,  # type: ignore[arg-type]  # a dict of BrokerSettings' timing fields
    )


@pytest.fixture
def raw(poison_settings: BrokerSettings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(poison_settings.redis_url)
    yield client
    client.close()


def _dead(raw: redis.Redis, queue: str) -> list[dict[str, Any]]:
    return [json.loads(entry) for entry in raw.lrange(dead_letter_key(queue), 0, -1)]


async def _until(worker: WorkerProcess, check: Callable[[], object], what: str) -> None:
    """Wait for ``check`` (generously), or fail naming ``what`` with the worker's log's end."""
    try:
        await eventually(check, 30, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the worker's log ends:\n{worker.log_text()[-4000:]}") from None


async def _dead_lettered(raw: redis.Redis, queue: str, count: int, name: str, worker: WorkerProcess) -> None:
    """Wait until the dead-letter list holds ``count`` entries."""
    await _until(worker, lambda: raw.llen(dead_letter_key(queue)) >= count, f"{name!r} dead-lettered")


async def test_no_message_in_the_corpus_stops_the_worker_or_comes_back(
    poison_settings: BrokerSettings, raw: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    worker = start_worker(poison_settings, name="poison")
    pid = worker.pid
    queue = poison_settings.queue
    corpus = _corpus(poison_settings)
    assert len(corpus) >= 50
    async with FleetExecutor(settings=poison_settings, queue_timeout=30_000) as ex:
        assert (await ex.execute("() => 6 * 7")).result == 42
        for count, (name, message) in enumerate(corpus, start=1):
            raw.lpush(queue, message)
            await _dead_lettered(raw, queue, count, name, worker)
            entry = _dead(raw, queue)[0]  # newest first
            assert raw.llen(dead_letter_key(queue)) == count, name
            assert entry["queue"] == queue and entry["reason"], (name, entry)
            assert entry["size"] > 0 or message == b"", (name, entry)
            assert len(entry["message"]) <= MAX_KEPT_CHARS, name
            outcome = await ex.execute("() => 6 * 7")
            assert outcome.result == 42, (name, outcome, worker.log_text()[-3000:])
            assert worker.proc is not None and worker.proc.poll() is None, f"{name!r} stopped the worker"

    # Nothing comes back: past the visibility timeout and a few restore sweeps, no message is
    # in the queue or unacked, the dead-letter list has one entry per message, each was
    # logged as dropped once, and Celery's own lines (an unregistered task) are not repeated.
    unregistered = worker.log_text().count("Received unregistered task")
    assert unregistered >= 2  # an unknown task name; a name that is a number; ...
    time.sleep(VISIBILITY_S + 3)
    assert raw.llen(queue) == 0
    assert raw.hlen("unacked") == 0 and raw.zcard("unacked_index") == 0
    assert raw.llen(dead_letter_key(queue)) == len(corpus)
    assert raw.ttl(dead_letter_key(queue)) > 0  # it expires
    log = worker.log_text()
    assert log.count(DROPPED) == len(corpus), log[-5000:]
    assert log.count("Received unregistered task") == unregistered
    assert "Unrecoverable error" not in log
    assert worker.pid == pid and worker.alive()
    by_text = {entry["message"]: entry["reason"] for entry in _dead(raw, queue)}
    assert "not JSON" in by_text["not json"]
    assert "over the" in by_text['{"pad": "' + "a" * (MAX_KEPT_CHARS - 9)]


async def test_a_dropped_message_names_its_reason_in_the_log_and_the_list(
    poison_settings: BrokerSettings, raw: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """What an operator reads: the log line and the dead letter say the same thing."""
    worker = start_worker(poison_settings, name="reasons")
    queue = poison_settings.queue
    real = _real_envelope(poison_settings)
    real["headers"]["task"] = "no.such.task"
    raw.lpush(queue, b"not json", json.dumps(real).encode())
    await eventually(lambda: raw.llen(dead_letter_key(queue)) == 2, 30, "both dead-lettered")
    not_json, unknown = reversed(_dead(raw, queue))
    assert not_json["message"] == "not json" and not not_json["truncated"]
    assert not_json["reason"].startswith("not JSON (JSONDecodeError")
    assert unknown["reason"] == "no task named 'no.such.task' is registered on this worker"
    assert json.loads(unknown["message"])["headers"]["task"] == "no.such.task"
    log = worker.log_text()
    assert f"{DROPPED} {queue}: {not_json['reason']} (kept in {queue}.dead)" in log
    assert f"{DROPPED} {queue}: {unknown['reason']} (kept in {queue}.dead)" in log


PING_REFUSALS = (DROPPED, "Can't decode message body", "raised unexpected")
"""How a worker logs a refused ping: dropped to the dead-letter list, or Celery's own lines
for a body its default strategy cannot decode and for a task that fails on its arguments."""


async def test_malformed_pings_are_refused_once_each_and_the_worker_serves_on(
    poison_settings: BrokerSettings, raw: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """``codemode.ping`` goes through Celery's default strategy, not the execute task's
    hand-off: a body it cannot unpack used to raise out of Celery's consumer and end the
    worker. Each malformed ping is logged once (by Celery, or dropped to the dead-letter
    list) and acked; the worker serves a job after each."""
    worker = start_worker(poison_settings, name="pings")
    queue = poison_settings.queue
    real = _real_envelope(poison_settings)

    def ping(body: bytes, **headers: object) -> bytes:
        e = copy.deepcopy(real)
        e["properties"]["delivery_tag"] = str(uuid.uuid4())
        e["headers"].update(task="codemode.ping", id=uuid.uuid4().hex, **headers)
        e["body"] = base64.b64encode(body).decode()
        return json.dumps(e).encode()

    pings = [
        ("a body that is not JSON", ping(b"not json")),
        ("a body that is an empty list", ping(b"[]")),
        ("a body that is an object", ping(b'{"a": 1}')),
        ("a body of two parts", ping(b"[[], {}]")),
        ("a body nested past any limit", ping(b"[[" + b"[" * DEEP + b"]" * DEEP + b"], {}, {}]")),
        ("three arguments", ping(b"[[1, 2, 3], {}, {}]")),
        ("an expiry that is not a time", ping(b'[["k"], {}, {}]', expires="garbage")),
        ("an eta that is not a time", ping(b'[["k"], {}, {}]', eta="garbage")),
    ]

    def refusals() -> int:
        log = worker.log_text()
        return sum(log.count(line) for line in PING_REFUSALS)

    async with FleetExecutor(settings=poison_settings, queue_timeout=30_000) as ex:
        for count, (name, message) in enumerate(pings, start=1):
            raw.lpush(queue, message)
            await _until(worker, lambda: refusals() >= count, f"{name!r} refused")  # noqa: B023
            assert refusals() == count, (name, worker.log_text()[-3000:])
            assert (await ex.execute("() => 6 * 7")).result == 42, name
    time.sleep(VISIBILITY_S + 3)
    assert refusals() == len(pings)
    assert raw.llen(queue) == 0 and raw.hlen("unacked") == 0
    assert "Unrecoverable error" not in worker.log_text()


async def test_malformed_broadcasts_do_not_stop_the_worker(
    poison_settings: BrokerSettings, raw: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Celery's remote control reaches a worker as pub/sub broadcasts, read by the same
    transport: a broadcast that was JSON but not kombu's envelope ended the worker, and one
    nested past the decoder's limit raised out of kombu's read. Each is dropped; the worker
    still answers a control ping."""
    from celery import Celery

    worker = start_worker(poison_settings, name="broadcasts")
    channel = "/0.celery.pidbox"  # kombu's key for Celery's remote-control exchange (db 0)
    envelope = {"properties": {"delivery_tag": "x", "delivery_info": {"exchange": "", "routing_key": "x"}}}
    broadcasts = [
        b"42",
        b"{}",
        b"[[[[[",
        b"[" * DEEP + b"]" * DEEP,
        json.dumps({**envelope, "body": "e30=", "headers": {"task": ["x"]}}).encode(),
        json.dumps({"properties": []}).encode(),
    ]
    # The worker subscribes to its remote-control channel as its consumer starts, which may
    # be a moment after it announces itself ready.
    await _until(worker, lambda: raw.pubsub_numpat() >= 1, "the worker's remote-control subscription")
    for message in broadcasts:
        assert raw.publish(channel, message) == 1  # the worker listens
    app = Celery("poison-control", set_as_current=False)
    app.conf.update(poison_settings.celery_config())
    try:
        deadline = time.monotonic() + 30
        replies: list[Any] = []
        while not replies and time.monotonic() < deadline:
            replies = app.control.ping(timeout=2)
    finally:
        app.close()
    assert replies, worker.log_text()[-3000:]
    assert worker.proc is not None and worker.proc.poll() is None
    assert "Unrecoverable error" not in worker.log_text()


async def test_a_job_too_large_for_a_worker_is_refused_before_it_is_sent(
    poison_settings: BrokerSettings, raw: redis.Redis
) -> None:
    """A worker drops a message over MAX_QUEUE_MESSAGE_BYTES unread; a host whose request
    ceiling lets a larger request through refuses to send it, with INVALID_REQUEST (not a
    retryable JOB_EXPIRED a queue timeout later)."""
    from codemode import InvalidRequest

    ceilings = {"max_request_bytes": MAX_FLEET_REQUEST_BYTES}
    async with FleetExecutor(settings=poison_settings, ceilings=ceilings) as ex:
        # Within the ceiling, but JSON writes each quote as two bytes: the message is larger.
        with pytest.raises(InvalidRequest, match="over the 16777216 a worker takes") as info:
            await ex.execute("() => `" + '"' * (MAX_FLEET_REQUEST_BYTES - 100) + "`")
    assert not info.value.retryable and not info.value.started
    assert raw.llen(poison_settings.queue) == 0


def test_a_request_ceiling_the_queue_cannot_carry_is_refused_at_construction() -> None:
    """``max_request_bytes`` may be raised to 64 MiB in process, but a worker takes queue
    messages of at most 16 MiB: a FleetExecutor that would accept a request the fleet cannot
    carry is refused when it is made, naming both numbers (not one request at a time)."""
    from codemode import InvalidRequest

    assert MAX_FLEET_REQUEST_BYTES < MAX_QUEUE_MESSAGE_BYTES
    FleetExecutor(ceilings={"max_request_bytes": MAX_FLEET_REQUEST_BYTES})
    with pytest.raises(InvalidRequest) as info:
        FleetExecutor(ceilings={"max_request_bytes": MAX_FLEET_REQUEST_BYTES + 1})
    assert str(MAX_QUEUE_MESSAGE_BYTES) in str(info.value)
    assert f"at most {MAX_FLEET_REQUEST_BYTES}" in str(info.value)
    assert not info.value.retryable


async def test_an_unacked_record_that_cannot_be_restored_is_dropped_once(
    poison_settings: BrokerSettings, raw: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """kombu's sweep restores unacked records past the visibility timeout to their queue. A
    record that is not JSON raised out of every sweep ("Error in timer", each second, for
    good); it is forgotten and kept in ``unacked.dead``. A record whose message is JSON but
    malformed goes back to its queue, where it is dropped like any other."""
    worker = start_worker(poison_settings, name="records")
    queue = poison_settings.queue
    raw.hset("unacked", mapping={"garbage": b"not json", "malformed": json.dumps([42, "", queue])})
    bad_message = {"properties": {"delivery_tag": "m"}}
    raw.hset("unacked", "returns", json.dumps([bad_message, "", queue]))
    raw.zadd("unacked_index", {"garbage": 1, "malformed": 1, "returns": 1})
    await _until(worker, lambda: raw.hlen("unacked") == 0, "every record restored or dropped")
    await _until(worker, lambda: raw.llen(dead_letter_key(queue)) == 1, "the returned message dropped")
    (entry,) = _dead(raw, "unacked")
    assert entry["message"] == "not json" and "cannot be restored" in entry["reason"]
    async with FleetExecutor(settings=poison_settings, queue_timeout=30_000) as ex:
        assert (await ex.execute("() => 6 * 7")).result == 42
    time.sleep(VISIBILITY_S)
    assert "Error in timer" not in worker.log_text()
    assert raw.zcard("unacked_index") == 0 and raw.llen(queue) == 0


# ---- the channel, in this process --------------------------------------------------------


def test_the_channel_drops_what_it_cannot_decode_and_delivers_the_next(private_redis: RedisServer) -> None:
    """kombu's own read of a popped message raised out of ``drain_events`` (in a worker:
    "Unrecoverable error", and the worker exited); the channel drops it and goes on."""
    from kombu.connection import Connection
    from kombu.entity import Queue
    from kombu.messaging import Consumer, Producer

    client = redis.Redis.from_url(private_redis.url)
    queue = Queue(f"q-{uuid.uuid4().hex}")
    seen: list[Any] = []
    try:
        with Connection(private_redis.url, transport=RedisTransport) as conn:
            channel = conn.default_channel
            producer = Producer(channel)
            producer.publish(
                {"i": 0}, routing_key=queue.name, declare=[queue], headers={"task": "t", "id": "1"}
            )
            client.lpush(queue.name, b"not json")
            producer.publish({"i": 1}, routing_key=queue.name, headers={"task": "t", "id": "2"})

            def on_message(body: dict[str, int], message: Any) -> None:
                seen.append(body["i"])
                message.ack()

            with Consumer(channel, queues=[queue], callbacks=[on_message]):
                deadline = time.monotonic() + 30
                while len(seen) < 2 and time.monotonic() < deadline:
                    with contextlib.suppress(TimeoutError):
                        conn.drain_events(timeout=1)
        assert seen == [0, 1]
        (entry,) = [msgspec.json.decode(e) for e in client.lrange(dead_letter_key(queue.name), 0, -1)]
        assert entry["message"] == "not json" and entry["reason"].startswith("not JSON")
        assert client.hlen("unacked") == 0
    finally:
        client.delete(queue.name, dead_letter_key(queue.name), "unacked", "unacked_index")
        client.close()


@pytest.mark.parametrize("requeue", [False, True])
def test_a_delivery_settled_in_its_callback_leaves_no_unacked_record(
    private_redis: RedisServer, requeue: bool
) -> None:
    """Celery rejects a task it does not know inside the callback that received it. The
    delivery's unacked record used to be written after that callback, so it outlived the
    reject and the message came back after every visibility timeout. Rejected without
    requeue it is gone; with requeue it is back in its queue, once."""
    from kombu.connection import Connection
    from kombu.entity import Queue
    from kombu.messaging import Consumer, Producer

    client = redis.Redis.from_url(private_redis.url)
    queue = Queue(f"q-{uuid.uuid4().hex}")
    seen: list[int] = []
    try:
        with Connection(private_redis.url, transport=RedisTransport) as conn:
            channel = conn.default_channel
            Producer(channel).publish(
                {"i": 0}, routing_key=queue.name, declare=[queue], headers={"task": "t", "id": "1"}
            )

            def on_message(body: dict[str, int], message: Any) -> None:
                seen.append(body["i"])
                message.reject(requeue=requeue)

            with Consumer(channel, queues=[queue], callbacks=[on_message]):
                conn.drain_events(timeout=10)
        assert seen == [0]
        assert client.hlen("unacked") == 0 and client.zcard("unacked_index") == 0
        assert client.llen(queue.name) == (1 if requeue else 0)
    finally:
        client.delete(queue.name, "unacked", "unacked_index")
        client.close()
