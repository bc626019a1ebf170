"""Pool admission: up to ``pool.max_workers`` runs in flight plus ``pool.max_queue`` callers
waiting, at any moment, whether the children are warm, starting or being replaced.

Each burst below is started in one turn of the event loop (``asyncio.gather`` runs every
call up to its admission before any child can answer), so the counts are exact.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from codemode import IsolateExecutor, QueueFull

SLOW = "async () => { await new Promise((r) => setTimeout(r, 200)); return 1 }"


async def burst(ex: IsolateExecutor, calls: int, code: str = SLOW) -> tuple[int, list[QueueFull]]:
    """``calls`` concurrent executes: how many were served, and the QUEUE_FULL faults."""
    results = await asyncio.gather(*(ex.execute(code) for _ in range(calls)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, QueueFull)]
    served = [r for r in results if not isinstance(r, BaseException)]
    others = [r for r in results if isinstance(r, BaseException) and not isinstance(r, QueueFull)]
    assert not others, others
    assert all(outcome.result == 1 for outcome in served)
    return len(served), refused


def test_a_cold_pool_admits_what_a_warm_one_does() -> None:
    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 1, "max_queue": 1}, timeout=30_000) as ex:
            served, refused = await burst(ex, 6)  # the first calls: the child is still starting
            assert (served, len(refused)) == (2, 4)
            served, refused = await burst(ex, 6)  # warm
            assert (served, len(refused)) == (2, 4)
            fault = refused[0]
            assert fault.retryable and not fault.started
            assert "pool.max_workers=1" in str(fault) and "pool.max_queue=1" in str(fault)

    asyncio.run(main())


def test_max_queue_zero_means_no_waiting_line_not_nothing_runs() -> None:
    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 2, "max_queue": 0}, timeout=30_000) as ex:
            served, refused = await burst(ex, 3)  # cold: both starting children take a caller
            assert (served, len(refused)) == (2, 1)
            assert "pool.max_queue=0" in str(refused[0])
            for _ in range(3):  # one at a time, every call is served
                assert (await ex.execute("() => 7")).result == 7
            served, refused = await burst(ex, 3)  # warm: two run, nobody waits
            assert (served, len(refused)) == (2, 1)

    asyncio.run(main())


def test_a_burst_on_a_fresh_executor_admits_workers_plus_queue() -> None:
    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 2, "max_queue": 100}, timeout=60_000) as ex:
            served, refused = await burst(ex, 1_000, "() => 1")
            assert (served, len(refused)) == (102, 898)

    asyncio.run(main())


def test_a_child_being_replaced_counts_as_capacity() -> None:
    async def main() -> None:
        # No standby: a replacement starts from scratch, which leaves the slot empty for
        # longer (an adopted standby takes the same path, only faster).
        pool = {"max_workers": 1, "max_queue": 1, "standby": False}
        async with IsolateExecutor(pool=pool, timeout=30_000) as ex:
            assert (await ex.execute("() => 1")).result == 1
            # Kill the child and start the burst while its slot is being refilled (the
            # pool has noticed the exit: no live child is listed). A replacement that is
            # ready before the burst is seen is killed again.
            deadline = time.monotonic() + 60
            while True:
                assert time.monotonic() < deadline, "never caught the slot being refilled"
                pids = ex.worker_pids
                if not pids:
                    break
                os.kill(pids[0], signal.SIGKILL)
                while ex.worker_pids == pids and time.monotonic() < deadline:
                    await asyncio.sleep(0.002)
            served, refused = await burst(ex, 6)
            assert (served, len(refused)) == (2, 4)

    asyncio.run(main())


def test_a_child_cleaning_up_after_its_run_counts_as_capacity() -> None:
    """A run that timed out is reported before its child has disposed of the isolate (the
    child is held until it says Idle): a burst that follows at once is admitted as on an
    idle child."""

    async def main() -> None:
        pool = {"max_workers": 1, "max_queue": 1}
        async with IsolateExecutor(pool=pool, timeout=30_000) as ex:
            assert (await ex.execute("() => 1")).result == 1
            for _ in range(3):
                stuck = await ex.execute("async () => { while (true) {} }", timeout=200)
                assert stuck.error is not None and "timed out" in stuck.error
                served, refused = await burst(ex, 6)
                assert (served, len(refused)) == (2, 4)

    asyncio.run(main())
