"""Injected faults, each with real processes: the outcome each must produce.

| fault                              | the caller gets                                  |
|------------------------------------|--------------------------------------------------|
| worker SIGKILLed mid-job           | WORKER_CRASHED, started=True, within the lease   |
|   (a quiet start, before any call) | the same                                         |
| a claim with no Started ever sent  | the host finds the claim, then the lost lease    |
| its message redelivered later      | refused by the claim: the program never reruns   |
| Redis restarted mid-job            | BROKER_UNREACHABLE; client and worker reconnect  |
| host SIGKILLed while its job runs  | pending tool call rejects with host_gone_text(), |
|                                    | slot freed, keys expire                          |
| Redis refuses a call's push        | that call rejects with Redis's error; the run    |
|   (the worker's user loses RPUSH)  | goes on and its outcome arrives                  |
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from fleet_helpers import eventually, job_ids, keys_of

from codemode import (
    BrokerUnreachable,
    Disposed,
    JobExpired,
    Outcome,
    WorkerCrashed,
    tool_result,
)
from codemode._texts import host_gone_text
from codemode.fleet import FleetExecutor
from codemode.fleet.redis.client import make_client
from codemode.fleet.redis.keys import admission_key, host_key
from codemode.fleet.redis.link import Links
from codemode.fleet.redis.scripts import FleetScripts
from codemode.fleet.settings import MAX_BLOCKING_WAIT_S, BrokerSettings
from codemode.fleet.testing import FAST_FAULTS, RedisServer, WorkerProcess
from codemode.fleet.wire import Failed, Finished, Started, decode_up, encode

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

TOOLS = [{"name": "t", "tools": ["slow"]}]
HERE = Path(__file__).parent


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "zombie" not in status


async def test_worker_killed_mid_job_is_worker_crashed_and_never_reruns(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    # Short visibility timeout: kombu restores the dead worker's message within seconds,
    # so the test sees the redelivery that late acks make possible, and its refusal.
    settings = replace(private_queue, visibility_timeout_s=3, unacked_restore_interval_s=1)
    victim = start_worker(settings, name="victim")
    entered = asyncio.Event()
    calls = 0

    async def dispatch(provider: str, tool: str, args: str) -> str:
        nonlocal calls
        calls += 1
        entered.set()
        await asyncio.sleep(3600)
        return tool_result(None)

    async with FleetExecutor(settings=settings) as ex:
        task = asyncio.ensure_future(
            ex.execute(
                "async () => await t.slow()",
                providers=TOOLS,
                dispatch=dispatch,
                count_host_waits=False,
                timeout=120_000,
            )
        )
        await asyncio.wait_for(entered.wait(), 30)
        children = victim.children()
        assert children, "the worker runs its isolates in children"
        (job_id,) = job_ids(redis_sync, settings.key_prefix, "lease")
        victim.kill()
        killed_at = time.monotonic()
        with pytest.raises(WorkerCrashed) as info:
            await asyncio.wait_for(task, 30)
        noticed = time.monotonic() - killed_at
    assert info.value.started is True and info.value.retryable
    assert "the program had started" in str(info.value)
    assert noticed < settings.lease_ttl_ms / 1000 + 5, noticed
    # The isolate children died with their worker (parent-death signal).
    await eventually(lambda: not any(_running(pid) for pid in children), 15, "the isolate children to exit")
    # Late acks: the message is restored to the queue and delivered again. The claim
    # refuses it: the program does not run a second time.
    rescuer = start_worker(settings, name="rescuer")
    assert rescuer.wait_for_log(f"refused job {job_id}", 60), rescuer.log_text()[-3000:]
    assert calls == 1
    claim = redis_sync.get(keys_of(settings.key_prefix, job_id).claim)
    assert not isinstance(claim, str)  # the client does not decode: bytes or None
    assert claim is not None and claim.decode().endswith(str(victim.pid))


async def test_a_quiet_start_killed_before_any_message_is_worker_crashed(
    private_queue: BrokerSettings, redis_sync: redis.Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A job that makes no call sends its Started STARTED_DELAY_S into the run (none with
    the claim): its worker's death mid-run is still a started job's crash."""
    victim = start_worker(private_queue, name="quiet-victim")
    async with FleetExecutor(settings=private_queue) as ex:
        task = asyncio.ensure_future(
            ex.execute("async () => { await new Promise((r) => setTimeout(r, 60_000)); }", timeout=120_000)
        )
        await eventually(lambda: job_ids(redis_sync, private_queue.key_prefix, "lease"), 30, "the claim")
        await asyncio.sleep(0.3)  # past STARTED_DELAY_S: the worker has said Started
        victim.kill()
        killed_at = time.monotonic()
        with pytest.raises(WorkerCrashed) as info:
            await asyncio.wait_for(task, 30)
        noticed = time.monotonic() - killed_at
    assert info.value.started is True and "the program had started" in str(info.value)
    assert noticed < private_queue.lease_ttl_ms / 1000 + 5, noticed


async def claim_quietly(settings: BrokerSettings, redis_sync: redis.Redis, host_id: str, worker: str) -> None:
    """Play a worker with the fleet's own scripts: take the host's one admitted job with a
    quiet claim (claim and lease written, no Started), and then do nothing more."""
    admitted = await eventually(
        lambda: redis_sync.zrange(admission_key(settings.key_prefix), 0, -1), 10, "the admission"
    )
    first = admitted[0]
    assert isinstance(first, bytes)
    job_id = first.decode()
    keys = keys_of(settings.key_prefix, job_id)
    client = make_client(settings)
    links = Links(client.connection_pool, timeout_s=settings.socket_timeout_s)
    try:
        claim = await FleetScripts(links).claim(
            [
                keys.claim,
                keys.up,
                keys.lease,
                host_key(settings.key_prefix, host_id),
                admission_key(settings.key_prefix),
            ],
            worker=worker,
            start_by_ms=int(time.time() * 1000) + 60_000,
            lease_ttl_ms=settings.lease_ttl_ms,
            key_ttl_ms=settings.key_ttl_ms,
            job_id=job_id,
            started=encode(Started(worker)),
            expired=encode(Failed(JobExpired("late").to_data())),
            announce=False,
        )
    finally:
        await links.aclose()
        await client.aclose()
        redis_sync.delete(settings.queue)  # no worker will take the job's message now
    assert claim.state == "started"


async def test_the_host_finds_a_claimed_job_whose_started_never_comes(
    private_queue: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """A quiet claim, then nothing (its worker died before its first message): the host's
    check finds the claim, follows the lease from then on, and reports the started job's
    crash when the lease lapses."""
    settings = replace(private_queue, lease_ttl_ms=1_500)
    async with FleetExecutor(settings=settings) as ex:
        task = asyncio.ensure_future(ex.execute("() => 1"))
        await claim_quietly(settings, redis_sync, ex.host_id, "gone-worker")
        claimed_at = time.monotonic()
        with pytest.raises(WorkerCrashed) as info:
            await asyncio.wait_for(task, 30)
        noticed = time.monotonic() - claimed_at
    assert info.value.started is True and "gone-worker" in str(info.value)
    assert noticed < MAX_BLOCKING_WAIT_S + settings.lease_ttl_ms / 1000 + 3, noticed


async def test_disposing_during_a_quiet_start_says_the_program_started(
    private_queue: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """Disposed before the job's Started came (a quiet start says it late): the claim, not
    the Started message, decides what the fault says."""
    ex = FleetExecutor(settings=private_queue)
    task = asyncio.ensure_future(ex.execute("() => 1"))
    await claim_quietly(private_queue, redis_sync, ex.host_id, "quiet-worker")
    await ex.aclose()
    with pytest.raises(Disposed) as info:
        await task
    assert info.value.started is True, info.value
    assert "The program had started" in str(info.value)


async def test_redis_restart_mid_job_is_a_typed_fault_and_everyone_reconnects(
    private_redis: RedisServer, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = BrokerSettings(redis_url=private_redis.url, **FAST_FAULTS)  # type: ignore[arg-type]  # a dict of BrokerSettings' timing fields
    worker = start_worker(settings, name="survivor")
    entered = asyncio.Event()

    async def dispatch(provider: str, tool: str, args: str) -> str:
        entered.set()
        await asyncio.sleep(3600)
        return tool_result(None)

    async with FleetExecutor(settings=settings, queue_timeout=5_000) as ex:
        assert (await ex.execute("() => 'before'")).result == "before"
        task = asyncio.ensure_future(
            ex.execute(
                "async () => { try { return await t.slow() } catch (e) { return e.message } }",
                providers=TOOLS,
                dispatch=dispatch,
                count_host_waits=False,
                timeout=120_000,
            )
        )
        await asyncio.wait_for(entered.wait(), 30)
        private_redis.restart()
        with pytest.raises(BrokerUnreachable) as info:
            await asyncio.wait_for(task, 30)
        assert info.value.retryable and info.value.started is True
        # Nothing hangs, and nobody needs restarting: the same executor and the same worker
        # process serve again once they have reconnected.
        deadline = time.monotonic() + 90
        outcome: Outcome | None = None
        errors: list[str] = []
        while time.monotonic() < deadline:
            try:
                outcome = await ex.execute("() => 'after'")
                break
            except (BrokerUnreachable, WorkerCrashed) as exc:
                errors.append(exc.code)
                await asyncio.sleep(0.5)
            except Exception as exc:  # JOB_EXPIRED while the worker reconnects
                errors.append(getattr(exc, "code", type(exc).__name__))
        assert outcome is not None and outcome.result == "after", errors
    assert worker.proc is not None and worker.proc.poll() is None
    # The running job's pending call was rejected when the reply channel went away.
    assert "reply channel lost" in worker.log_text()


async def test_a_push_redis_refuses_rejects_that_call_with_redis_error_and_the_run_goes_on(
    private_redis: RedisServer, start_worker: Callable[..., WorkerProcess]
) -> None:
    """The worker's push rides ahead of its BLPOP (``_reader.py``); a refusal comes back
    as that command's reply, and must fail the call at once, not leave it waiting for a
    reply the host never had a call for. The worker connects as a Redis user of its own,
    which the host's first tool takes RPUSH from for a moment: the next call's push is
    refused, the host (another user) goes on answering."""
    admin = redis.Redis.from_url(private_redis.url)
    admin.execute_command("ACL", "SETUSER", "worker", "on", ">pw", "~*", "&*", "+@all")  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    host_settings = BrokerSettings(redis_url=private_redis.url)
    start_worker(replace(host_settings, redis_url=f"redis://worker:pw@127.0.0.1:{private_redis.port}/0"))
    restored = threading.Event()

    def restore() -> None:
        admin.execute_command("ACL", "SETUSER", "worker", "+rpush")  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        restored.set()

    async def dispatch(provider: str, tool: str, args: str) -> str:
        if tool == "revoke":
            admin.execute_command("ACL", "SETUSER", "worker", "-rpush")  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            threading.Timer(0.5, restore).start()
        return tool_result(tool)

    # The refused call's push rode ahead of the reader's BLPOP; the next one finds that
    # BLPOP still waiting and goes up on a link of its own: both ways must fail the call.
    code = """async () => {
        await t.revoke();
        let refused, alone = null;
        try { refused = 'answered: ' + await t.refused(); } catch (e) { refused = e.message; }
        for (;;) {
            try { await t.restored(); break; } catch (e) { alone = alone ?? e.message; }
            await new Promise(resolve => setTimeout(resolve, 100));
        }
        return [refused, alone];
    }"""
    try:
        async with FleetExecutor(settings=host_settings, queue_timeout=30_000) as ex:
            outcome = await ex.execute(
                code,
                providers=[{"name": "t", "tools": ["revoke", "refused", "restored"]}],
                dispatch=dispatch,
                timeout=20_000,
            )
    finally:
        restored.wait(5)
        admin.close()
    assert outcome.error is None, outcome.error
    for text in outcome.result:
        assert text.startswith("The worker could not send this call to its host ("), outcome.result
        assert "NOPERM" in text, outcome.result


async def test_host_killed_mid_job_frees_the_worker_and_the_slot(
    private_prefix: BrokerSettings, redis_sync: redis.Redis, tmp_path: Path
) -> None:
    settings = private_prefix
    env = {**os.environ, **settings.env(), "PYTHONUNBUFFERED": "1"}
    host = subprocess.Popen(
        [sys.executable, str(HERE / "host_process.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert host.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(host.stdout.readline), 60)
        assert line.strip() == b"entered", line
        (job_id,) = job_ids(redis_sync, settings.key_prefix, "lease")
        os.killpg(host.pid, signal.SIGKILL)
        host.wait(10)
        killed_at = time.monotonic()
    finally:
        if host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait(10)
    keys = keys_of(settings.key_prefix, job_id)

    def finished() -> Outcome | None:
        for raw in redis_sync.lrange(keys.up, 0, -1):
            assert isinstance(raw, bytes)
            with_msg = decode_up(raw)
            if isinstance(with_msg, Finished):
                return with_msg.outcome
        return None

    outcome = await eventually(finished, 30, "the worker to notice the host is gone")
    noticed = time.monotonic() - killed_at
    assert isinstance(outcome, Outcome)
    # The program's pending tool call rejected with the declared text.
    assert outcome.result == host_gone_text()
    assert noticed < (settings.host_ttl_ms + settings.lease_ttl_ms) / 1000 + 5, noticed
    assert redis_sync.zscore(admission_key(settings.key_prefix), job_id) is None
    assert not redis_sync.exists(keys.lease)
    for key in redis_sync.scan_iter(match=f"{settings.key_prefix}:*"):
        assert 0 < redis_sync.pttl(key) <= settings.key_ttl_ms + settings.queue_timeout_ms
    # The worker's slot is free: it serves the next job.
    async with FleetExecutor(settings=settings) as ex:
        assert (await ex.execute("() => 7")).result == 7
