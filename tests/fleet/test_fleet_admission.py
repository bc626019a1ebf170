"""The fleet's admission: ``fleet_max_jobs`` counts every job admitted and not yet finished,
queued or running, whatever state the workers are in. A job waiting for a worker that is
still starting holds its slot like any queued job, and no more than the bound is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis
from fleet_helpers import eventually

from codemode import Outcome, QueueFull
from codemode.fleet import FleetExecutor
from codemode.fleet.redis.keys import admission_key
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import WorkerProcess

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]


async def test_a_burst_before_any_worker_is_up_admits_exactly_the_bound(
    private_queue: BrokerSettings,
    redis_sync: redis.Redis,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    async with FleetExecutor(settings=private_queue, max_jobs=3, queue_timeout=120_000) as ex:
        calls = [asyncio.ensure_future(ex.execute("() => 6 * 7")) for _ in range(8)]
        # Nothing consumes the queue yet: the refusals come back at once, the rest wait.
        await eventually(lambda: sum(c.done() for c in calls) >= 5, 30, "the refusals")
        await asyncio.sleep(0.2)  # (a sixth refusal would have come with them)
        done = [c for c in calls if c.done()]
        refused = [c.exception() for c in done]
        assert len(refused) == 5 and all(isinstance(e, QueueFull) for e in refused), refused
        assert "fleet_max_jobs=3" in str(refused[0])
        assert redis_sync.llen(private_queue.queue) == 3
        assert redis_sync.zcard(admission_key(private_queue.key_prefix)) == 3
        # A worker starts: the three admitted jobs are served, and their slots come back.
        start_worker(private_queue, name="late", wait=False)
        served = await asyncio.wait_for(asyncio.gather(*(c for c in calls if c not in done)), 120)
        assert [o.result for o in served if isinstance(o, Outcome)] == [42, 42, 42]
        assert redis_sync.zcard(admission_key(private_queue.key_prefix)) == 0
