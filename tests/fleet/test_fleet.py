"""The fleet end to end, with a real redis-server and real worker processes.

Each test names the behaviour of the issue it pins down. Faults that kill or restart
processes are in ``test_fleet_faults.py``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import msgspec
import pytest
import redis
from fleet_helpers import eventually, job_ids, keys_of

from codemode import (
    BrokerUnreachable,
    Disposed,
    InvalidRequest,
    JobExpired,
    Outcome,
    QueueFull,
    tool_result,
)
from codemode._texts import message_ceiling_text
from codemode.fleet import FleetExecutor
from codemode.fleet.redis.keys import admission_key
from codemode.fleet.settings import ENV_WORKER_PIN_CPUS, ENV_WORKER_POOL, ENV_WORKER_STANDBY, BrokerSettings
from codemode.fleet.testing import SharedFleet, WorkerProcess, free_port
from codemode.fleet.wire import Started, ToolReply, decode_up, encode

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

TOOLS = [{"name": "t", "tools": ["slow", "echo"]}]


async def test_round_trip_result_logs_and_tool_calls(executor: FleetExecutor) -> None:
    seen: list[tuple[str, str, str]] = []

    async def dispatch(provider: str, tool: str, args: str) -> str:
        seen.append((provider, tool, args))
        return tool_result(msgspec.json.decode(args)[0] * 2)

    outcome = await executor.execute(
        "async () => { let s = 0; for (let i = 0; i < 10; i++) s += await t.echo(i);"
        " console.log('sum', s); return s }",
        providers=TOOLS,
        dispatch=dispatch,
    )
    assert isinstance(outcome, Outcome)
    assert outcome.result == 90 and outcome.error is None
    assert [e.to_dict() for e in outcome.logs] == [{"level": "log", "text": "sum 90"}]
    assert [call[2] for call in seen] == [f"[{i}]" for i in range(10)]


async def test_many_jobs_from_one_host_share_one_pool(executor: FleetExecutor) -> None:
    async def dispatch(provider: str, tool: str, args: str) -> str:
        await asyncio.sleep(0.01)
        return tool_result(args)

    outcomes = await asyncio.gather(
        *(
            executor.execute(f"async () => [{i}, await t.echo({i})]", providers=TOOLS, dispatch=dispatch)
            for i in range(24)
        )
    )
    assert [o.result for o in outcomes] == [[i, f"[{i}]"] for i in range(24)]


async def test_invalid_request_raises_before_anything_is_enqueued(
    private_queue: BrokerSettings, redis_sync: redis.Redis
) -> None:
    # Each request below is malformed on purpose: its refusal is what is tested.
    async with FleetExecutor(settings=private_queue) as ex:
        with pytest.raises(InvalidRequest):
            await ex.execute(123)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest):
            await ex.execute("() => 1", providers=[{"name": "t", "tools": ["x"]}])
        with pytest.raises(InvalidRequest):
            await ex.execute("() => 1", retain_handles="yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest):
            await ex.execute("() => 1", modules={"m": object()})  # type: ignore[dict-item]
    assert redis_sync.llen(private_queue.queue) == 0


async def test_broker_unreachable_at_submit_is_retryable_and_quick() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    async with FleetExecutor(redis_url=url) as ex:
        began = time.monotonic()
        with pytest.raises(BrokerUnreachable) as info:
            await ex.execute("() => 1")
    assert time.monotonic() - began < 10
    assert info.value.retryable and info.value.code == "BROKER_UNREACHABLE"
    assert info.value.started is False
    assert "nothing was enqueued" in str(info.value)


async def test_admission_bound_refuses_at_once_and_enqueues_nothing(
    private_queue: BrokerSettings, redis_sync: redis.Redis
) -> None:
    # Nobody consumes this queue: admitted jobs stay queued and hold their slots.
    async with FleetExecutor(settings=private_queue, max_jobs=2, queue_timeout=60_000) as ex:
        held = [asyncio.ensure_future(ex.execute("() => 1")) for _ in range(2)]
        await eventually(lambda: redis_sync.llen(private_queue.queue) == 2, 20, "2 queued jobs")
        began = time.monotonic()
        with pytest.raises(QueueFull) as info:
            await ex.execute("() => 3")
        assert time.monotonic() - began < 10  # not its 60 s queue timeout
        assert info.value.retryable and info.value.started is False
        assert "nothing was enqueued" in str(info.value)
        assert redis_sync.llen(private_queue.queue) == 2
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        # Cancelled jobs gave their slots back: a new one is admitted.
        assert redis_sync.zcard(admission_key(private_queue.key_prefix)) == 0
        third = asyncio.ensure_future(ex.execute("() => 4"))
        await eventually(lambda: redis_sync.llen(private_queue.queue) == 3, 20, "admitted")
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)


async def test_job_queued_past_its_deadline_expires_and_never_starts(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    async with FleetExecutor(settings=private_queue, queue_timeout=1_000) as ex:
        began = time.monotonic()
        with pytest.raises(JobExpired) as info:
            await ex.execute("() => 1")
        waited = time.monotonic() - began
    assert 0.9 <= waited < 6
    assert info.value.retryable and info.value.started is False
    (job_id,) = job_ids(redis_sync, private_queue.key_prefix)
    keys = keys_of(private_queue.key_prefix, job_id)
    assert redis_sync.get(keys.claim) == b"expired"
    # A worker that shows up later takes the message and does not start the job.
    worker = start_worker(private_queue)
    await eventually(lambda: redis_sync.llen(private_queue.queue) == 0, 30, "the late delivery")
    await asyncio.sleep(1.0)
    assert redis_sync.get(keys.claim) == b"expired"
    up = cast("list[bytes]", redis_sync.lrange(keys.up, 0, -1))  # a client that does not decode replies
    assert not any(isinstance(decode_up(m), Started) for m in up)
    assert "finished job" not in worker.log_text()


async def test_reply_channel_drops_garbage_and_stale_replies_and_bounds_size(
    private_prefix: BrokerSettings,
    redis_sync: redis.Redis,
    fleet: SharedFleet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def dispatch(provider: str, tool: str, args: str) -> str:
        entered.set()
        await release.wait()
        return tool_result("late")

    prefix = private_prefix.key_prefix
    async with FleetExecutor(settings=private_prefix) as ex:
        task = asyncio.ensure_future(
            ex.execute(
                "async () => { try { return await t.slow() } catch (e) { return 'rejected: ' + e.message } }",
                providers=TOOLS,
                dispatch=dispatch,
                count_host_waits=False,
            )
        )
        await asyncio.wait_for(entered.wait(), 30)
        (job_id,) = job_ids(redis_sync, prefix, "lease")
        keys = keys_of(prefix, job_id)
        caplog.set_level(logging.WARNING, logger="codemode.fleet")
        redis_sync.rpush(keys.up, b"\xc1 not a message")  # garbage to the host
        redis_sync.rpush(keys.down, b"\xc1 not a reply")  # garbage to the worker
        redis_sync.rpush(keys.down, encode(ToolReply(99, tool_result(1))))  # stale call id
        huge = tool_result("x" * (1024 * 1024 + 10))
        redis_sync.rpush(keys.down, encode(ToolReply(1, huge)))  # oversized reply
        outcome = await asyncio.wait_for(task, 30)
        release.set()
        assert outcome.error is None
        assert outcome.result.startswith("rejected: The tool t.slow answered with more than")
        assert "ceiling" in outcome.result
        assert any("not one" in r.getMessage() for r in caplog.records)
        # The workers keep serving.
        again = await ex.execute("() => 'still serving'")
        assert again.result == "still serving"
    logs = "".join(w.log_text() for w in fleet.workers)
    assert "dropped a message on its reply channel" in logs
    assert "dropped a stale reply to call 99" in logs


async def test_oversized_fetch_body_from_policy_is_refused_in_the_host() -> None:
    from codemode._outbound import OutboundRequest, OutboundResponse
    from codemode.fleet.host.session import run_policy

    def policy(request: OutboundRequest) -> OutboundResponse:
        return OutboundResponse(200, body=b"x" * 2048)

    reply = await run_policy(policy, OutboundRequest("GET", "https://a.example/"), 1024)
    assert reply.error == message_ceiling_text("response body", 1024)

    def refusing(request: OutboundRequest) -> OutboundResponse:
        raise PermissionError("Requests to a.example are not allowed for this run.")

    reply = await run_policy(refusing, OutboundRequest("GET", "https://a.example/"), 1024)
    assert reply.error == "Requests to a.example are not allowed for this run."


async def test_caller_cancelling_stops_the_run_and_frees_the_slot(
    private_prefix: BrokerSettings, redis_sync: redis.Redis, fleet: SharedFleet
) -> None:
    entered = asyncio.Event()

    async def dispatch(provider: str, tool: str, args: str) -> str:
        entered.set()
        await asyncio.sleep(3600)
        return tool_result(None)

    prefix = private_prefix.key_prefix
    async with FleetExecutor(settings=private_prefix) as ex:
        task = asyncio.ensure_future(
            ex.execute(
                "async () => await t.slow()", providers=TOOLS, dispatch=dispatch, count_host_waits=False
            )
        )
        await asyncio.wait_for(entered.wait(), 30)
        (job_id,) = job_ids(redis_sync, prefix, "lease")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        keys = keys_of(prefix, job_id)
        await eventually(lambda: not redis_sync.exists(keys.lease), 15, "the run to stop")
        assert redis_sync.zcard(admission_key(prefix)) == 0
    logs = "".join(w.log_text() for w in fleet.workers)
    assert f"job {job_id}: cancelled by its host" in logs


@pytest.mark.parametrize(
    "code, spins_after_s",
    [
        ("async () => { for (;;) {} }", 0.0),
        ("async () => { for (let i = 0; i < 5; i++) await t.echo(i); for (;;) {} }", 0.5),
    ],
    ids=["makes-no-calls", "has-stopped-calling"],
)
async def test_a_cancel_reaches_a_busy_run(
    private_prefix: BrokerSettings,
    redis_sync: redis.Redis,
    fleet: SharedFleet,
    code: str,
    spins_after_s: float,
) -> None:
    """The worker reads the reply channel from a run's first call, or shortly after the run
    starts, and after a reply it waits only a moment for the program's next call (whose
    push rides with its next BLPOP) before reading alone: a busy program that never calls
    a tool, or has stopped calling, still hears its host cancel it."""
    prefix = private_prefix.key_prefix

    async def dispatch(provider: str, tool: str, args: str) -> str:
        return tool_result(1)

    async with FleetExecutor(settings=private_prefix) as ex:
        task = asyncio.ensure_future(ex.execute(code, providers=TOOLS, dispatch=dispatch, timeout=60_000))
        [job_id] = await eventually(lambda: job_ids(redis_sync, prefix, "lease"), 30, "the run to start")
        await asyncio.sleep(spins_after_s)  # its calls answered, the program spins
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        keys = keys_of(prefix, job_id)
        await eventually(lambda: not redis_sync.exists(keys.lease), 15, "the run to stop")
    logs = "".join(w.log_text() for w in fleet.workers)
    assert f"job {job_id}: cancelled by its host" in logs


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def test_every_call_s_dispatch_sees_the_caller_s_context_and_none_leaks_into_the_next(
    private_prefix: BrokerSettings,
) -> None:
    """The host serves a started job's calls where their messages are read (``_pop`` in
    ``_session.py``), outside the wait loop's task: each still starts in a copy of the
    caller's context, as in-process calls do."""
    seen: list[str] = []

    async def dispatch(provider: str, tool: str, args: str) -> str:
        seen.append(REQUEST_ID.get())
        REQUEST_ID.set("changed by a call")
        return tool_result(1)

    async with FleetExecutor(settings=private_prefix) as ex:
        # The host's connections are made during this one, in another context.
        await asyncio.create_task(
            ex.execute("async () => await t.echo(0)", providers=TOOLS, dispatch=dispatch),
            context=contextvars.Context(),
        )
        seen.clear()
        REQUEST_ID.set("request-7")
        outcome = await ex.execute(
            "async () => { let s = 0; for (let i = 0; i < 20; i++) s += await t.echo(i); return s }",
            providers=TOOLS,
            dispatch=dispatch,
        )
    assert outcome.error is None and outcome.result == 20
    assert seen == ["request-7"] * 20
    assert REQUEST_ID.get() == "request-7"


async def test_every_key_expires(private_prefix: BrokerSettings, redis_sync: redis.Redis) -> None:
    prefix = private_prefix.key_prefix

    async def dispatch(provider: str, tool: str, args: str) -> str:
        return tool_result(1)

    async with FleetExecutor(settings=private_prefix) as ex:
        await ex.execute("async () => await t.echo()", providers=TOOLS, dispatch=dispatch)
        keys = [k.decode() for k in redis_sync.scan_iter(match=f"{prefix}:*")]
        assert keys, "the job and host keys exist while the executor lives"
        for key in keys:
            ttl = redis_sync.pttl(key)
            assert 0 < ttl <= private_prefix.key_ttl_ms + private_prefix.queue_timeout_ms, key
    # Closing the executor deletes its heartbeat key at once.
    assert not list(redis_sync.scan_iter(match=f"{prefix}:host:*"))


async def test_finished_jobs_leave_no_slot_and_no_channel(
    private_prefix: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """A job the worker finished needs no cleanup from the host: the worker freed its slot,
    and reading its up channel empty deleted the key (the claim key stays, with its TTL:
    it is what refuses a redelivered job)."""
    prefix = private_prefix.key_prefix

    async def dispatch(provider: str, tool: str, args: str) -> str:
        return tool_result(1)

    async with FleetExecutor(settings=private_prefix) as ex:
        outcomes = [
            await ex.execute("async () => await t.echo()", providers=TOOLS, dispatch=dispatch)
            for _ in range(3)
        ]
        outcomes.append(await ex.execute("async () => { throw new Error('no') }"))
        assert [o.result for o in outcomes] == [1, 1, 1, None] and outcomes[-1].error
        assert redis_sync.zcard(admission_key(prefix)) == 0
        assert len(job_ids(redis_sync, prefix)) == 4
        assert not list(redis_sync.scan_iter(match=f"{prefix}:job:*:up"))
        assert not list(redis_sync.scan_iter(match=f"{prefix}:job:*:lease"))


async def test_closing_the_executor_fails_calls_in_flight_with_disposed(
    private_prefix: BrokerSettings, redis_sync: redis.Redis
) -> None:
    entered = asyncio.Event()

    async def dispatch(provider: str, tool: str, args: str) -> str:
        entered.set()
        await asyncio.sleep(3600)
        return tool_result(None)

    ex = FleetExecutor(settings=private_prefix)
    task = asyncio.ensure_future(
        ex.execute("async () => await t.slow()", providers=TOOLS, dispatch=dispatch, count_host_waits=False)
    )
    await asyncio.wait_for(entered.wait(), 30)
    (job_id,) = job_ids(redis_sync, private_prefix.key_prefix, "lease")
    await ex.aclose()
    with pytest.raises(Disposed) as info:
        await task
    assert info.value.started is True and not info.value.retryable
    with pytest.raises(Disposed):
        await ex.execute("() => 1")
    # The worker was told: the run stops and its lease goes away.
    keys = keys_of(private_prefix.key_prefix, job_id)
    await eventually(lambda: not redis_sync.exists(keys.lease), 15, "the run to stop")


async def test_a_worker_logs_a_job_once_with_its_summary_and_not_its_receipt(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """At INFO a job is one line, written as it ends: Celery's own "succeeded" line, whose
    result is the job's summary; Celery's "received" line is left out below DEBUG."""
    worker = start_worker(private_queue, name="logging")
    async with FleetExecutor(settings=private_queue) as ex:
        for _ in range(3):
            assert (await ex.execute("() => 6 * 7")).result == 42
    await eventually(lambda: worker.log_text().count("finished job") == 3, 10, "the three summary lines")
    text = worker.log_text()
    assert text.count("succeeded in") == 3 and "] received" not in text


SLOW = "async () => { await new Promise(r => setTimeout(r, 1500)); return 7 }"


async def test_a_busy_worker_takes_no_job_past_its_concurrency(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """What bounds a worker to ``concurrency`` jobs is its channel's prefetch count and its
    pool's threads, and a job's message stays unacked until the job ends. A second job waits in the queue, where an idle worker
    could take it, not in a busy worker."""
    start_worker(private_queue, concurrency=1, name="busy")
    async with FleetExecutor(settings=private_queue) as ex:
        slow = asyncio.ensure_future(ex.execute(SLOW))
        await asyncio.sleep(0.5)
        quick = asyncio.ensure_future(ex.execute("() => 1"))
        await eventually(lambda: redis_sync.llen(private_queue.queue) == 1, 5, "the second job to be queued")
        for _ in range(5):
            await asyncio.sleep(0.1)
            assert redis_sync.llen(private_queue.queue) == 1 and not quick.done()
        assert (await slow).result == 7 and (await quick).result == 1


@pytest.mark.parametrize("pool", ["threads", "solo"])
async def test_a_warm_shutdown_lets_the_running_job_end(
    pool: str,
    private_queue: BrokerSettings,
    redis_sync: redis.Redis,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    """SIGTERM to the worker alone (its isolate children are its own to stop): the job
    running ends with its result, its message is acked, and the worker exits. With either
    Celery pool."""
    worker = start_worker(private_queue, concurrency=1, name="warm", env={ENV_WORKER_POOL: pool})
    async with FleetExecutor(settings=private_queue) as ex:

        async def one(provider: str, tool: str, args: str) -> str:
            return tool_result(1)

        ten = "async () => { let s = 0; for (let i = 0; i < 10; i++) s += await t.echo(i); return s }"
        assert (await ex.execute(ten, providers=TOOLS, dispatch=one)).result == 10
        slow = asyncio.ensure_future(ex.execute(SLOW))
        await asyncio.sleep(0.5)
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGTERM)
        assert (await slow).result == 7
    await asyncio.to_thread(worker.proc.wait, 30)
    if pool == "threads":  # solo runs the job on the consumer's thread: it ends before the stop
        assert "letting 1 running job(s) end" in worker.log_text()
    assert "already claimed" not in worker.log_text()
    assert redis_sync.llen(private_queue.queue) == 0


async def test_a_worker_with_pin_cpus_off_leaves_its_children_unpinned(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    allowed = os.sched_getaffinity(0)
    worker = start_worker(private_queue, env={ENV_WORKER_PIN_CPUS: "false"}, name="unpinned")
    async with FleetExecutor(settings=private_queue) as ex:
        assert (await ex.execute("() => 6 * 7")).result == 42
    children = worker.children()
    assert children, "the worker runs its isolates in children"
    for pid in children:
        for tid in os.listdir(f"/proc/{pid}/task"):
            assert os.sched_getaffinity(int(tid)) == allowed, f"child {pid} thread {tid} is pinned"


async def test_a_worker_keeps_a_standby_child_unless_told_not_to(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """One child per job slot and per retained handle (concurrency 1, max_handles 1 here),
    plus the standby that replaces one that exits; CODEMODE_WORKER_STANDBY=false drops it."""

    def standbys(worker: WorkerProcess) -> list[int]:
        found = []
        for pid in worker.children():
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[-2:-1] == [b"standby"]:
                    found.append(pid)
        return found

    with_standby = start_worker(private_queue, name="with-standby")
    without = start_worker(
        replace(private_queue, queue=private_queue.queue + "-b"),
        env={ENV_WORKER_STANDBY: "false"},
        name="without-standby",
    )
    await eventually(lambda: len(standbys(with_standby)) == 1, 30, "the standby to start")
    assert len(with_standby.children()) == 3
    await asyncio.sleep(0.5)
    assert standbys(without) == [] and len(without.children()) == 2


async def test_a_program_may_start_thousands_of_tool_calls_at_once(executor: FleetExecutor) -> None:
    """Each call is a push on the worker and a reply push on the host: they wait their turn
    for a connection, they never fail for want of one (redis-py's pool refuses a 101st)."""

    async def dispatch(provider: str, tool: str, args: str) -> str:
        return tool_result(json.loads(args)[0])

    outcome = await executor.execute(
        "async () => (await Promise.all(Array.from({ length: 2000 }, (_, i) => t.echo(i))))"
        ".reduce((a, b) => a + b, 0)",
        providers=TOOLS,
        dispatch=dispatch,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == sum(range(2000))


async def test_one_host_keeps_hundreds_of_jobs_in_flight(settings: BrokerSettings) -> None:
    """Every job in flight waits on its channel with a connection of its own: a host with
    300 of them needs more than redis-py's default 100; beyond the fleet's bound, the excess
    is refused with QUEUE_FULL, never with BROKER_UNREACHABLE."""
    code = "async () => { await new Promise((r) => setTimeout(r, 20)); return 1 }"
    async with FleetExecutor(settings=settings, queue_timeout=60_000) as ex:
        outcomes = await asyncio.gather(*(ex.execute(code) for _ in range(300)))
    assert [o.result for o in outcomes] == [1] * 300
    bounded = replace(settings, key_prefix=f"t-{uuid.uuid4().hex[:8]}", fleet_max_jobs=20)
    async with FleetExecutor(settings=bounded, queue_timeout=60_000) as ex:
        results = await asyncio.gather(*(ex.execute(code) for _ in range(300)), return_exceptions=True)
    kinds = {type(r).__name__ for r in results}
    assert kinds <= {"Outcome", "QueueFull"}, kinds
    assert "Outcome" in kinds and "QueueFull" in kinds


def test_a_ping_task_is_answered_by_a_worker_with_no_isolate_and_no_job_keys(
    settings: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """codemode.ping: Celery's own round trip through the shared queue (the fleet benchmark
    measures codemode's framing against it). The worker pushes pong onto the named list,
    with an expiry, and writes nothing of a job's."""
    from celery import Celery

    from codemode.fleet.settings import PING_TASK_NAME

    app = Celery("codemode-test", set_as_current=False)
    app.conf.update(settings.celery_config())
    key = f"{settings.key_prefix}:test-pong:{uuid.uuid4().hex}"
    before = set(redis_sync.keys(f"{settings.key_prefix}:job:*"))
    try:
        app.send_task(PING_TASK_NAME, args=[key], queue=settings.queue)
        deadline = time.monotonic() + 20
        while not redis_sync.exists(key) and time.monotonic() < deadline:
            time.sleep(0.01)
        ttl_ms = redis_sync.pttl(key)
        assert redis_sync.lrange(key, 0, -1) == [b"pong"]
    finally:
        app.close()
        redis_sync.delete(key)
    assert 0 < ttl_ms <= 60_000  # the pong expires if nobody reads it
    assert set(redis_sync.keys(f"{settings.key_prefix}:job:*")) <= before


async def test_malformed_execute_messages_are_dropped_and_the_worker_serves_on(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Messages for codemode.execute that no producer of codemode's would send reach the
    consumer's own hand-off (codemode/fleet/worker/strategy.py): one with no job at all and one whose job
    is not a job are each logged, acked (nothing left in the queue or unacked), kept in the
    queue's dead-letter list and never run; the next real job runs. (test_poison.py pushes
    a corpus of such messages.)"""
    from celery import Celery

    from codemode.fleet.settings import TASK_NAME

    worker = start_worker(private_queue, name="garbage")
    app = Celery("codemode-test", set_as_current=False)
    app.conf.update(private_queue.celery_config())
    try:
        app.send_task(TASK_NAME, queue=private_queue.queue)  # no arguments
        app.send_task(TASK_NAME, kwargs={"job": {"code": 42}}, queue=private_queue.queue)
    finally:
        app.close()
    await eventually(
        lambda: (
            "a malformed codemode.execute message: it carries no job" in worker.log_text()
            and "a malformed codemode.execute message: its job is malformed" in worker.log_text()
        ),
        20,
        "both messages refused",
    )
    assert redis_sync.llen(f"{private_queue.queue}.dead") == 2
    async with FleetExecutor(settings=private_queue) as ex:
        assert (await ex.execute("() => 6 * 7")).result == 42
    assert redis_sync.llen(private_queue.queue) == 0
    # kombu's unacked records of every queue share one hash: none may be this queue's.
    await eventually(
        lambda: not any(private_queue.queue.encode() in record for record in redis_sync.hvals("unacked")),
        10,
        "every message acked",
    )
