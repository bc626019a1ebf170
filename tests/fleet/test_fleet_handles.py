"""Retained handles in the fleet, with a real redis-server and real worker processes.

| situation                                   | the caller gets                                |
|---------------------------------------------|------------------------------------------------|
| invocations of a handle                     | state kept, tools and policy served here       |
| released / unknown handle                   | HANDLE_LOST, without asking any worker         |
| its worker SIGKILLed                        | HANDLE_LOST (at once once its key lapsed;      |
|                                             | within the lease TTL if the call was queued)   |
| its worker SIGKILLed during an invocation   | WORKER_CRASHED (started=True), then HANDLE_LOST |
| the worker's idle TTL passed                | HANDLE_EXPIRED                                 |
| the host closed its executor                | the worker releases the handle by itself       |
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest
import redis
from fleet_helpers import eventually

from codemode import (
    HandleExpired,
    HandleLost,
    InvalidRequest,
    OutboundRequest,
    OutboundResponse,
    QueueFull,
    WorkerCrashed,
    tool_result,
)
from codemode.fleet import FleetExecutor
from codemode.fleet.redis.keys import worker_key, worker_queue
from codemode.fleet.settings import ENV_HANDLE_IDLE_TTL_S, ENV_WORKER_MAX_HANDLES, BrokerSettings
from codemode.fleet.testing import WorkerProcess
from codemode.texts import timeout_text

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

TOOLS = [{"name": "t", "tools": ["times", "slow"]}]

COUNTER = """async () => {
    let count = 0;                                // kept between invocations
    return async (request) => {
        count++;
        const path = new URL(request.url).pathname;
        const times = await t.times(count, path);  // a tool call from inside the invocation
        const body = request.method === 'POST' ? await request.text() : null;
        console.log('hit', count, path);
        return Response.json({ count, times, path, body, header: request.headers.get('x-test') },
                             { status: 201, headers: { 'x-count': String(count) } });
    };
}"""


def times(provider: str, tool: str, args_json: str) -> str:
    n, path = json.loads(args_json)
    return tool_result({"n": n * 10, "path": path})


def worker_id_of(handle: str) -> str:
    return handle.rsplit(":", 2)[0]


async def test_state_survives_and_tools_work_inside_invocations(executor: FleetExecutor) -> None:
    created = await executor.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)
    assert created.error is None and created.result is None and created.handle
    worker = worker_id_of(created.handle)
    assert created.handle.startswith(f"{worker}:")
    try:
        for n in (1, 2, 3):
            out = await executor.invoke_handle(
                created.handle,
                {
                    "method": "post",
                    "url": f"https://svc.test/p{n}",
                    "headers": {"x-test": "yes"},
                    "body": f"payload {n}",
                },
            )
            assert out.error is None and out.handle is None
            assert out.result["status"] == 201
            assert ["x-count", str(n)] in out.result["headers"]
            assert json.loads(out.result["body"]) == {
                "count": n,
                "times": {"n": n * 10, "path": f"/p{n}"},
                "path": f"/p{n}",
                "body": f"payload {n}",
                "header": "yes",
            }
            assert [e.text for e in out.logs] == [f"hit {n} /p{n}"]
        # Ordinary jobs keep running on the fleet meanwhile.
        others = await asyncio.gather(*(executor.execute(f"() => {i}") for i in range(6)))
        assert [o.result for o in others] == list(range(6))
        # Program errors in an invocation keep the handle, as in process.
        bad = await executor.invoke_handle(created.handle, {"url": "not a url"})
        assert bad.error is not None and "URL" in bad.error
        again = await executor.invoke_handle(created.handle, {"url": "https://svc.test/x"})
        assert json.loads(again.result["body"])["count"] == 4
    finally:
        await executor.release_handle(created.handle)


async def test_the_outbound_policy_decides_fetches_inside_invocations(executor: FleetExecutor) -> None:
    seen: list[str] = []

    async def policy(request: OutboundRequest) -> OutboundResponse:
        seen.append(request.url)
        return OutboundResponse(200, [("content-type", "text/plain")], b"from the host")

    handle = (
        await executor.execute(
            "async () => async (req) => new Response(await (await fetch('https://api.example/'"
            " + new URL(req.url).pathname.slice(1))).text())",
            outbound=policy,
            retain_handles=True,
        )
    ).handle
    assert handle is not None
    try:
        for name in ("a", "b"):
            out = await executor.invoke_handle(handle, {"url": f"https://svc.test/{name}"})
            assert out.error is None and out.result["body"] == "from the host"
        assert seen == ["https://api.example/a", "https://api.example/b"]
    finally:
        await executor.release_handle(handle)


async def test_twenty_invocations_some_concurrent(executor: FleetExecutor) -> None:
    handle = (await executor.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
    assert handle is not None
    try:
        results = []
        for batch in range(4):
            outs = await asyncio.gather(
                *(executor.invoke_handle(handle, {"url": f"https://svc.test/{batch}-{i}"}) for i in range(5)),
                executor.execute("async () => 'a job between'"),
            )
            assert outs[-1].result == "a job between"
            results.extend(outs[:-1])
        bodies = [json.loads(r.result["body"]) for r in results]
        # One at a time, in the order they were made, none lost; each invocation's tool
        # call came back on its own reply channel (the path it echoes is its own).
        assert [b["count"] for b in bodies] == list(range(1, 21))
        assert [b["times"] for b in bodies] == [
            {"n": 10 * (k + 1), "path": f"/{k // 5}-{k % 5}"} for k in range(20)
        ]
    finally:
        await executor.release_handle(handle)


async def test_release_then_handle_lost(executor: FleetExecutor) -> None:
    handle = (await executor.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
    assert handle is not None
    await executor.release_handle(handle)
    began = time.monotonic()
    with pytest.raises(HandleLost) as info:
        await executor.invoke_handle(handle, {"url": "https://svc.test/"})
    assert "released" in str(info.value) and info.value.code == "HANDLE_LOST"
    with pytest.raises(HandleLost):
        await executor.release_handle(handle)
    assert time.monotonic() - began < 2.5  # answered here, no worker asked
    with pytest.raises(HandleLost):
        await executor.invoke_handle("nobody:1:00", {"url": "https://svc.test/"})
    with pytest.raises(InvalidRequest):
        await executor.invoke_handle(42, {"url": "https://svc.test/"})  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested
    # A program that returns no handler retains nothing.
    plain = await executor.execute("async () => 42", retain_handles=True)
    assert plain.result == 42 and plain.handle is None


async def test_a_handle_belongs_to_the_executor_that_made_it(
    executor: FleetExecutor, settings: BrokerSettings
) -> None:
    handle = (await executor.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
    assert handle is not None
    try:
        async with FleetExecutor(settings=settings) as other:
            with pytest.raises(HandleLost):
                await other.invoke_handle(handle, {"url": "https://svc.test/"})
        out = await executor.invoke_handle(handle, {"url": "https://svc.test/"})
        assert json.loads(out.result["body"])["count"] == 1
    finally:
        await executor.release_handle(handle)


async def test_an_invocation_timeout_loses_the_handle_like_in_process(executor: FleetExecutor) -> None:
    handle = (
        await executor.execute(
            "async () => async (req) => { if (req.url.endsWith('/spin')) { await null; while (true) {} }"
            " return new Response('ok') }",
            retain_handles=True,
        )
    ).handle
    assert handle is not None
    assert (await executor.invoke_handle(handle, {"url": "https://a.test/"})).result["body"] == "ok"
    out = await executor.invoke_handle(handle, {"url": "https://a.test/spin"}, timeout=300)
    assert out.error == timeout_text(300)
    with pytest.raises(HandleLost):
        await executor.invoke_handle(handle, {"url": "https://a.test/"})


async def test_worker_killed_loses_its_handles_without_a_hang(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = private_queue
    victim = start_worker(settings, name="holder", env={ENV_WORKER_MAX_HANDLES: "2"})
    async with FleetExecutor(settings=settings) as ex:
        first = (await ex.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        second = (await ex.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        assert first is not None and second is not None
        worker = worker_id_of(first)
        assert worker.endswith(f":{victim.pid}") and worker_id_of(second) == worker
        key = worker_key(settings.key_prefix, worker)
        assert redis_sync.exists(key)
        assert (await ex.invoke_handle(first, {"url": "https://svc.test/"})).error is None
        victim.kill()
        killed_at = time.monotonic()
        # Its liveness key still stands: the invocation is queued for a worker that will
        # never take it. Once the key lapses it is marked, and the caller gets HANDLE_LOST.
        with pytest.raises(HandleLost) as info:
            await asyncio.wait_for(ex.invoke_handle(first, {"url": "https://svc.test/"}), 30)
        assert time.monotonic() - killed_at < settings.lease_ttl_ms / 1000 + 5
        assert "is gone" in str(info.value) and info.value.started is False
        # With the key gone, the other handle is lost at once, without enqueueing anything.
        await eventually(lambda: not redis_sync.exists(key), 15, "the liveness key to lapse")
        queued = redis_sync.llen(worker_queue(worker))
        began = time.monotonic()
        with pytest.raises(HandleLost):
            await ex.invoke_handle(second, {"url": "https://svc.test/"})
        assert time.monotonic() - began < 2.5
        assert redis_sync.llen(worker_queue(worker)) == queued
        with pytest.raises(HandleLost):
            await ex.invoke_handle(first, {"url": "https://svc.test/"})


async def test_a_worker_stopped_warmly_takes_its_handles_with_it(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = private_queue
    worker = start_worker(settings, name="leaving")
    async with FleetExecutor(settings=settings) as ex:
        handle = (await ex.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        assert handle is not None
        worker.stop()  # SIGTERM: warm shutdown deletes the liveness keys on its way out
        assert not redis_sync.exists(worker_key(settings.key_prefix, worker_id_of(handle)))
        began = time.monotonic()
        with pytest.raises(HandleLost) as info:
            await ex.invoke_handle(handle, {"url": "https://svc.test/"})
        assert time.monotonic() - began < 2.5 and "is gone" in str(info.value)


async def test_worker_killed_during_an_invocation_is_worker_crashed(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = private_queue
    victim = start_worker(settings, name="holder")
    entered = asyncio.Event()

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        if tool == "slow":
            entered.set()
            await asyncio.sleep(3600)
        return tool_result(1)

    async with FleetExecutor(settings=settings) as ex:
        handle = (
            await ex.execute(
                "async () => async (req) => new Response(String(await t.slow()))",
                providers=TOOLS,
                dispatch=dispatch,
                count_host_waits=False,
                timeout=120_000,
                retain_handles=True,
            )
        ).handle
        assert handle is not None
        task = asyncio.ensure_future(ex.invoke_handle(handle, {"url": "https://svc.test/"}))
        await asyncio.wait_for(entered.wait(), 30)
        victim.kill()
        killed_at = time.monotonic()
        with pytest.raises(WorkerCrashed) as info:
            await asyncio.wait_for(task, 30)
        assert info.value.started is True and info.value.retryable
        assert time.monotonic() - killed_at < settings.lease_ttl_ms / 1000 + 5
        with pytest.raises(HandleLost) as lost:
            await ex.invoke_handle(handle, {"url": "https://svc.test/"})
        assert "died during an invocation" in str(lost.value)


async def test_idle_handles_expire_on_their_worker(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = private_queue
    start_worker(settings, name="short-ttl", env={ENV_HANDLE_IDLE_TTL_S: "1.0"})
    async with FleetExecutor(settings=settings) as ex:
        handle = (await ex.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        assert handle is not None
        assert (await ex.invoke_handle(handle, {"url": "https://svc.test/"})).error is None
        await asyncio.sleep(2.0)
        with pytest.raises(HandleExpired) as info:
            await ex.invoke_handle(handle, {"url": "https://svc.test/"})
        assert info.value.code == "HANDLE_EXPIRED" and not info.value.retryable
        began = time.monotonic()
        with pytest.raises(HandleExpired):
            await ex.invoke_handle(handle, {"url": "https://svc.test/"})
        with pytest.raises(HandleExpired):
            await ex.release_handle(handle)
        assert time.monotonic() - began < 2.5
        # The expired isolate's child went back: the worker (max_handles=1) retains anew.
        fresh = (await ex.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        assert fresh is not None
        out = await ex.invoke_handle(fresh, {"url": "https://svc.test/"})
        assert json.loads(out.result["body"])["count"] == 1
        await ex.release_handle(fresh)


async def test_the_worker_cap_and_a_closed_host_releasing_its_handles(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = private_queue
    worker = start_worker(settings, name="one-handle")  # max_handles=1 (the default)
    async with FleetExecutor(settings=settings) as first:
        held = (await first.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        assert held is not None
        async with FleetExecutor(settings=settings) as second:
            with pytest.raises(QueueFull) as info:
                await second.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)
            assert info.value.started is False and "max_handles=1" in str(info.value)
            assert (await second.execute("() => 'jobs still run'")).result == "jobs still run"
    # The first host closed its executor: the worker saw its heartbeat key go and released
    # the handle, so a new host can retain one.
    assert worker.wait_for_log("is gone; releasing its handle", 15), worker.log_text()[-2000:]
    async with FleetExecutor(settings=settings) as third:
        handle = (await third.execute(COUNTER, providers=TOOLS, dispatch=times, retain_handles=True)).handle
        assert handle is not None
        await third.release_handle(handle)


async def test_a_worker_serves_a_handle_only_to_the_host_that_made_it() -> None:
    from codemode.fleet.worker.handles import HandleRoute, WorkerHandles

    table = WorkerHandles("w:1")
    entry = table.add("7", host_id="host-a", prefix="p", route=HandleRoute())
    other = table.add("7", host_id="host-a", prefix="p", route=HandleRoute())
    # A worker restarted under the same id names its handles anew: the token differs.
    assert entry.id.startswith("w:1:7:") and other.id != entry.id
    assert table.lookup(entry.id, "host-a") is entry
    with pytest.raises(HandleLost):
        table.lookup(entry.id, "host-b")
    table.drop(entry)
    with pytest.raises(HandleLost):
        table.lookup(entry.id, "host-a")


async def test_handle_settings_come_from_the_environment() -> None:
    from codemode.fleet.settings import SettingsError, WorkerSettings

    worker = WorkerSettings.from_env({ENV_WORKER_MAX_HANDLES: "3", ENV_HANDLE_IDLE_TTL_S: "1.5"})
    assert (worker.max_handles, worker.handle_idle_ttl_s) == (3, 1.5)
    assert WorkerSettings.from_env(worker.env()) == worker
    assert WorkerSettings(max_handles=0).max_handles == 0
    with pytest.raises(SettingsError):
        WorkerSettings.from_env({ENV_HANDLE_IDLE_TTL_S: "0"})
    with pytest.raises(SettingsError):
        WorkerSettings(max_handles=-1)


async def test_handle_jobs_travel_as_plain_json_with_their_own_schema_version() -> None:
    import msgspec

    from codemode._handles import plain_request
    from codemode.fleet.wire import (
        HANDLES_SCHEMA_VERSION,
        SCHEMA_VERSIONS,
        JobSpec,
        job_from_celery,
        job_to_celery,
    )

    spec = JobSpec(
        v=HANDLES_SCHEMA_VERSION,
        job_id="j",
        host_id="h",
        key_prefix="p",
        code="",
        timeout_ms=300,
        count_host_waits=True,
        start_by_ms=1,
        kind="invoke",
        handle="w:1:7:ab",
        request_json=plain_request({"method": "PUT", "url": "https://a/", "body": bytes(range(256))}),
    )
    data = msgspec.json.decode(msgspec.json.encode(job_to_celery(spec)))
    assert job_from_celery(data) == spec
    assert SCHEMA_VERSIONS == (1, 2, 3)
    # A plain job is still v1: workers from before handles keep reading it.
    assert (
        JobSpec(
            job_id="j",
            host_id="h",
            key_prefix="p",
            code="() => 1",
            timeout_ms=1,
            count_host_waits=True,
            start_by_ms=1,
        ).v
        == 1
    )
