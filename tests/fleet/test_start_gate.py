"""The consumer thread's wait for a job's start (``codemode/fleet/worker/gate.py``): the
gate's rules with real threads, and a real runtime opening it as the job's run begins, not
as it ends."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any

import pytest
import redis

from codemode.fleet import FleetExecutor
from codemode.fleet.host.producer import queue_key
from codemode.fleet.settings import BrokerSettings, WorkerSettings
from codemode.fleet.wire import job_from_celery
from codemode.fleet.worker.gate import StartGate
from codemode.fleet.worker.runtime import WorkerRuntime


def test_the_consumer_waits_until_the_loop_says_the_job_started() -> None:
    gate = StartGate(lambda: True, bound_s=10.0)
    threading.Timer(0.05, gate.open, ("job-1",)).start()
    began = time.monotonic()
    gate.hand_off("job-1", lambda handed: handed(object()))
    assert 0.04 < time.monotonic() - began < 5.0


def test_a_job_that_never_starts_holds_the_consumer_no_longer_than_the_bound() -> None:
    gate = StartGate(lambda: True, bound_s=0.05)
    event = gate.expect("job-1")
    assert event is not None
    began = time.monotonic()
    assert gate.wait("job-1", event) is False
    assert 0.04 < time.monotonic() - began < 5.0
    gate.open("job-1")  # after the wait: nothing waits, nothing breaks
    assert not event.is_set()


def test_a_job_celery_holds_back_is_not_waited_for() -> None:
    """The default strategy calls its callbacks only as it hands the job to the pool: a
    job held for its rate limit or eta never calls ``handed``."""
    gate = StartGate(lambda: True, bound_s=10.0)
    began = time.monotonic()
    gate.hand_off("job-1", lambda handed: None)
    assert time.monotonic() - began < 1.0


def test_without_a_free_slot_the_consumer_does_not_wait() -> None:
    gate = StartGate(lambda: False, bound_s=10.0)
    assert gate.expect("job-1") is None
    began = time.monotonic()
    gate.hand_off("job-1", lambda handed: handed(object()))
    assert time.monotonic() - began < 1.0


SLOW = "async () => { await new Promise(r => setTimeout(r, 1500)); return 7 }"


@pytest.mark.fleet
@pytest.mark.anyio
async def test_a_runtime_opens_the_gate_as_the_run_begins_not_as_it_ends(
    private_queue: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """A real host's job, popped off its queue (no worker consumes it) and given to a real
    runtime in this process as a pool thread would: the gate opens while the program runs,
    and the host gets the program's result."""
    runtime = WorkerRuntime(private_queue, WorkerSettings(concurrency=1))
    runtime.gate.bound_s = 10.0
    await asyncio.to_thread(runtime.start)
    try:
        async with FleetExecutor(settings=private_queue) as host:
            result = asyncio.ensure_future(host.execute(SLOW))
            popped = await asyncio.to_thread(redis_sync.brpop, [queue_key(private_queue.queue)], 10)
            assert popped is not None, "the host's job never reached its queue"
            body: Any = json.loads(base64.b64decode(json.loads(popped[1])["body"]))
            spec = job_from_celery(body[1]["job"])
            event = runtime.gate.expect(spec.job_id)
            assert event is not None
            submitted = time.monotonic()
            running = await asyncio.to_thread(runtime.submit, spec)
            assert await asyncio.to_thread(runtime.gate.wait, spec.job_id, event) is True
            opened_after = time.monotonic() - submitted
            assert opened_after < 1.0, f"the gate opened {opened_after:.2f} s in: as the job ended"
            assert not running.done()
            outcome = await asyncio.wait_for(result, 30)
            assert outcome.error is None and outcome.result == 7
            assert running.result(10).fault is None
    finally:
        await asyncio.to_thread(runtime.close)
