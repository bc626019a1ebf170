"""Celery's own tools on codemode workers, against real worker processes and a real Redis:
``inspect`` (active, reserved, stats), events (``-E``, ``control enable_events``),
``control revoke --terminate`` (CANCELLED), rate limits, and one id for a job everywhere.

Each test starts its own worker on a queue of its own (``private_queue``); broadcasts reach
every worker on the session's Redis, so replies are read by this worker's node name, and a
broadcast that changes a worker's state (events, a rate limit) names this worker as its only
destination: the shared fleet's workers must not be slowed for the tests after it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from fleet_helpers import eventually

from codemode import Cancelled
from codemode.fleet import FleetExecutor
from codemode.fleet.redis.keys import admission_key
from codemode.fleet.settings import TASK_NAME, BrokerSettings
from codemode.fleet.testing import WorkerProcess

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
FOREVER = "async () => { for (;;) await new Promise(r => setTimeout(r, 20)) }"
SLOW = "async () => { await new Promise(r => setTimeout(r, 1500)); return 7 }"


def node_of(worker: WorkerProcess, replies: dict[str, Any] | None) -> Any:
    """The reply of ``worker`` (by its node name's prefix) in a broadcast's replies."""
    for node, reply in (replies or {}).items():
        if node.startswith(f"{worker.name}-"):
            return reply
    return None


def node_name(worker: WorkerProcess, control: Any) -> str:
    """The full node name of ``worker``, so that a broadcast that changes a worker's state
    (events, rate limits) reaches it alone and not the shared fleet's workers on this Redis."""
    for reply in control.control.ping(timeout=2.0) or []:
        for node in reply:
            if node.startswith(f"{worker.name}-"):
                return str(node)
    raise AssertionError(f"{worker.name} did not answer a ping")


def recorder() -> tuple[list[str], Callable[[str], None]]:
    ids: list[str] = []
    return ids, ids.append


async def test_inspect_shows_a_running_job_by_the_id_its_host_holds(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess], control: Any
) -> None:
    """``inspect active`` lists a running job under the id ``on_job_id`` gave its host,
    ``inspect reserved`` is empty on a worker whose one slot is taken (the next job waits in
    the queue), and ``inspect stats`` counts the jobs the worker took."""
    worker = start_worker(private_queue, name="inspected")
    ids, on_job_id = recorder()
    async with FleetExecutor(settings=private_queue, on_job_id=on_job_id) as ex:
        running = asyncio.ensure_future(ex.execute(SLOW, timeout=10_000))
        await eventually(lambda: ids, 10, "the job's id")

        def active() -> Any:
            return node_of(worker, control.control.inspect(timeout=1.0).active())

        found = await eventually(lambda: (a := active()) and a, 15, "the job in inspect active")
        assert [job["id"] for job in found] == ids
        assert found[0]["name"] == TASK_NAME and found[0]["time_start"]
        assert node_of(worker, control.control.inspect(timeout=1.0).reserved()) == []
        assert (await running).result == 7
    stats = node_of(worker, control.control.inspect(timeout=1.0).stats())
    assert stats["total"] == {TASK_NAME: 1}
    assert node_of(worker, control.control.inspect(timeout=1.0).active()) == []


async def test_enable_events_answers_ok(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess], control: Any
) -> None:
    """Workers keep their event dispatcher (heartbeats on): ``enable_events`` turns task
    events on instead of answering "event dispatcher unavailable"."""
    worker = start_worker(private_queue, name="eventful")
    replies = control.control.broadcast(
        "enable_events", reply=True, timeout=2.0, destination=[node_name(worker, control)]
    )
    answer = next((r for r in replies for node in r if node.startswith(f"{worker.name}-")), None)
    assert answer is not None, replies
    assert "ok" in next(iter(answer.values())), answer


async def test_revoke_terminate_ends_a_running_job_with_cancelled(
    private_queue: BrokerSettings,
    redis_sync: redis.Redis,
    start_worker: Callable[..., WorkerProcess],
    control: Any,
) -> None:
    """``control revoke <job id> --terminate`` ends a running job: its host gets CANCELLED
    (started, not retryable) at once, its admission slot is free, and the worker's one
    slot serves the next job."""
    worker = start_worker(private_queue, name="revoked")
    ids, on_job_id = recorder()
    async with FleetExecutor(settings=private_queue, on_job_id=on_job_id) as ex:
        running = asyncio.ensure_future(ex.execute(FOREVER, timeout=60_000))
        await eventually(
            lambda: node_of(worker, control.control.inspect(timeout=1.0).active()), 15, "running"
        )
        began = time.monotonic()
        control.control.revoke(ids[0], terminate=True)
        with pytest.raises(Cancelled) as info:
            await asyncio.wait_for(running, 10)
        took = time.monotonic() - began
        assert info.value.code == "CANCELLED" and info.value.started and not info.value.retryable
        assert took < 5, f"the revoke took {took:.2f} s to reach the host"
        assert redis_sync.zscore(admission_key(private_queue.key_prefix), ids[0]) is None
        assert (await asyncio.wait_for(ex.execute("() => 6 * 7"), 20)).result == 42
    await eventually(lambda: "JobFault('CANCELLED" in worker.log_text(), 10, "the task's failure")


async def test_revoke_with_celerys_command_line(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """The command docs/fleet.md gives: ``celery -A workers control terminate TERM <id>``
    (Celery's command line spells ``revoke --terminate`` so; the signal is not used)."""
    worker = start_worker(private_queue, name="cli-revoked")
    ids, on_job_id = recorder()
    async with FleetExecutor(settings=private_queue, on_job_id=on_job_id) as ex:
        running = asyncio.ensure_future(ex.execute(FOREVER, timeout=60_000))
        await eventually(lambda: "Task codemode.execute" in worker.log_text() or ids, 10, "the job's id")
        await asyncio.sleep(1.0)  # claimed and running
        env = {**os.environ, **private_queue.env()}
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "celery", "-A", "workers", "control", "terminate", "TERM", ids[0]],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        with pytest.raises(Cancelled):
            await asyncio.wait_for(running, 10)


async def test_a_cancelled_execute_ends_its_job_as_a_revoke_does(
    private_queue: BrokerSettings,
    redis_sync: redis.Redis,
    start_worker: Callable[..., WorkerProcess],
    control: Any,
) -> None:
    """The host's cancel travels on the job's channel and ends the job the same way: the
    worker's task fails with CANCELLED and its one slot serves the next job."""
    worker = start_worker(private_queue, name="host-cancel")
    async with FleetExecutor(settings=private_queue) as ex:
        running = asyncio.ensure_future(ex.execute(FOREVER, timeout=60_000))
        await eventually(
            lambda: node_of(worker, control.control.inspect(timeout=1.0).active()), 15, "running"
        )
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await eventually(lambda: "JobFault('CANCELLED" in worker.log_text(), 10, "the task's failure")
        assert (await asyncio.wait_for(ex.execute("() => 6 * 7"), 20)).result == 42


async def test_a_job_revoked_before_it_starts_tells_its_host(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess], control: Any
) -> None:
    """A revoke that reaches the worker before the job: Celery discards the message, and
    the host gets CANCELLED with ``started=False`` (not JOB_EXPIRED at its start-by time)."""
    start_worker(private_queue, concurrency=1, name="early")
    ids, on_job_id = recorder()
    async with FleetExecutor(settings=private_queue, on_job_id=on_job_id, queue_timeout=60_000) as ex:
        first = asyncio.ensure_future(ex.execute(SLOW, timeout=10_000))
        await eventually(lambda: ids, 10, "the first job's id")
        second = asyncio.ensure_future(ex.execute("() => 1"))
        await eventually(lambda: len(ids) == 2, 10, "the second job's id")
        control.control.revoke(ids[1])
        with pytest.raises(Cancelled) as info:
            await asyncio.wait_for(second, 20)
        assert info.value.started is False
        assert (await first).result == 7


async def test_a_rate_limit_spreads_jobs(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess], control: Any
) -> None:
    """``control rate_limit codemode.execute 120/m`` is honoured: six jobs sent at once
    start at least half a second apart (five gaps: 2.5 s), where they would otherwise all
    run within a moment on two slots."""
    worker = start_worker(private_queue, concurrency=2, name="limited")
    replies = control.control.rate_limit(
        TASK_NAME, "120/m", reply=True, timeout=2.0, destination=[node_name(worker, control)]
    )
    assert any(node.startswith(f"{worker.name}-") for r in replies for node in r), replies
    async with FleetExecutor(settings=private_queue, queue_timeout=60_000) as ex:
        began = time.monotonic()
        outcomes = await asyncio.gather(*(ex.execute("() => 1") for _ in range(6)))
        took = time.monotonic() - began
    assert [o.result for o in outcomes] == [1] * 6
    assert took >= 2.0, f"six jobs at 120/m ended within {took:.2f} s"
