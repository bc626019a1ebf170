"""Bulk execution and retries, the same contract on both executors: ``map`` and
``map_ordered`` (completion order, input order, a bounded window, QUEUE_FULL waited out,
nothing left running after the consumer leaves) and ``RetryPolicy`` around one execute."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from codemode import (
    InvalidRequest,
    IsolateExecutor,
    Job,
    Outcome,
    QueueFull,
    RetryPolicy,
    WorkerCrashed,
    tool_result,
)
from codemode.fleet import FleetExecutor
from codemode.fleet.testing import SharedFleet

pytestmark = pytest.mark.anyio

BOUND_S = 90
"""A generous bound on any one test's bulk run (the machine is shared)."""
CANCEL_BOUND_S = 30
"""A generous bound on the end of cancelled runs."""


def sleeper(ms: int, value: Any) -> str:
    return f"async () => {{ await new Promise((r) => setTimeout(r, {ms})); return {value!r} }}"


@pytest.fixture
async def tight(request: pytest.FixtureRequest, executor: Any) -> AsyncIterator[Any]:
    """An executor of the same kind as ``executor`` with room for almost nothing: one child
    and no waiting line in process, two admitted jobs on the fleet."""
    if isinstance(executor, IsolateExecutor):
        ex: Any = IsolateExecutor(timeout=10_000, pool={"max_workers": 1, "max_queue": 0})
    else:
        settings = request.getfixturevalue("fleet_settings")
        ex = FleetExecutor(settings=settings, timeout=10_000, queue_timeout=30_000, max_jobs=2)
    async with ex:
        yield ex


def bulk_tasks() -> list[asyncio.Task[Any]]:
    """The tasks a bulk run started that are still alive."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and getattr(t.get_coro(), "__qualname__", "").startswith("_Flight.")
    ]


async def test_map_yields_every_key_in_completion_order(executor: Any) -> None:
    jobs = [Job("slow", sleeper(1_500, "slow"))] + [Job(f"fast{i}", f"async () => {i}") for i in range(3)]
    got: list[tuple[Any, Any]] = []
    async with asyncio.timeout(BOUND_S):
        async for key, outcome in executor.map(jobs, concurrency=4):
            got.append((key, outcome))
    assert [key for key, _ in got][-1] == "slow"
    assert sorted(str(key) for key, _ in got) == ["fast0", "fast1", "fast2", "slow"]
    for key, outcome in got:
        assert isinstance(outcome, Outcome) and outcome.ok, (key, outcome)
        assert outcome.attempts == 1 and outcome.duration_ms is not None and outcome.duration_ms > 0
    assert dict(got)["slow"].result == "slow" and dict(got)["fast2"].result == 2


async def test_map_ordered_yields_in_input_order(executor: Any) -> None:
    # The first job ends last: every later one waits in the buffer for it.
    codes = [sleeper(600 - 150 * i, i) for i in range(4)]
    async with asyncio.timeout(BOUND_S):
        got = [(key, outcome.result) async for key, outcome in executor.map_ordered(codes, concurrency=4)]
    assert got == [(0, 0), (1, 1), (2, 2), (3, 3)]


async def test_map_waits_out_queue_full_and_never_reports_it(tight: Any) -> None:
    """Eight in flight against room for one or two: the executor refuses most submissions
    with QUEUE_FULL, and map submits them again instead of yielding the fault."""
    results: dict[Any, Any] = {}
    async with asyncio.timeout(BOUND_S):
        async for key, outcome in tight.map((sleeper(20, i) for i in range(20)), concurrency=8, retry=None):
            results[key] = outcome
    assert sorted(results) == list(range(20))
    assert all(isinstance(o, Outcome) and o.result == k for k, o in results.items()), results


async def test_map_pulls_only_as_runs_end(executor: Any) -> None:
    """An endless source: map holds at most ``concurrency`` jobs in flight and as many
    finished results the consumer has not taken, and leaving early ends it."""
    pulled = 0

    def endless() -> Iterator[str]:
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield f"async () => {i}"

    handed = 0
    results = executor.map(endless(), concurrency=3)
    async with contextlib.aclosing(results), asyncio.timeout(BOUND_S):
        async for _key, outcome in results:
            handed += 1
            assert outcome.ok
            assert pulled - handed <= 2 * 3, (pulled, handed)
            if handed == 12:
                break
    assert pulled <= 12 + 2 * 3
    assert bulk_tasks() == []


async def test_map_takes_an_async_iterable_fed_by_its_own_results(executor: Any) -> None:
    """The source hands over the next job only after the consumer saw a result: map waits
    for the source and for its runs at once."""
    feed: asyncio.Queue[str | None] = asyncio.Queue()
    await feed.put("async () => 0")

    async def source() -> AsyncIterator[str]:
        while (code := await feed.get()) is not None:
            yield code

    seen = []
    async with asyncio.timeout(BOUND_S):
        async for key, outcome in executor.map(source()):
            seen.append((key, outcome.result))
            await feed.put(f"async () => {key + 1}" if key < 4 else None)
    assert seen == [(i, i) for i in range(5)]


async def test_a_bad_job_is_its_own_fault_and_program_errors_are_answers(executor: Any) -> None:
    jobs = [
        Job("ok", "async () => 1"),
        Job("bad", "async () => 2", timeout=-5),
        Job("throws", "async () => { throw new Error('no such order') }"),
    ]
    async with asyncio.timeout(BOUND_S):
        got = {key: outcome async for key, outcome in executor.map(jobs)}
    assert got["ok"].result == 1
    assert isinstance(got["bad"], InvalidRequest) and "timeout" in str(got["bad"])
    assert isinstance(got["throws"], Outcome) and "no such order" in (got["throws"].error or "")
    assert got["throws"].attempts == 1  # a program's error is an answer: never retried


def test_a_job_refuses_options_execute_does_not_take() -> None:
    with pytest.raises(InvalidRequest, match="retains no handles"):
        Job("k", "async () => 1", retain_handles=True)
    with pytest.raises(InvalidRequest, match="timout"):
        Job("k", "async () => 1", timout=5)


async def _started_jobs(executor: Any, entered: asyncio.Event) -> Any:
    """A map of long runs whose tool calls never answer."""

    async def dispatch(provider: str, tool: str, args: str) -> str:
        entered.set()
        await asyncio.sleep(3600)
        return tool_result(None)

    return executor.map(
        ["async () => await t.wait()"] * 6,
        providers=[{"name": "t", "tools": ["wait"]}],
        dispatch=dispatch,
        timeout=60_000,
        count_host_waits=False,
    )


async def _serves_again_soon(executor: Any) -> None:
    """The runs that were in flight no longer hold the executor: a new one is served
    long before any of them could have ended on its own."""
    started = time.monotonic()
    async with asyncio.timeout(40):
        outcome = await executor.execute("async () => 'next'")
    assert outcome.result == "next"
    assert time.monotonic() - started < 40


async def test_closing_map_early_cancels_what_is_in_flight(executor: Any) -> None:
    entered = asyncio.Event()
    results = await _started_jobs(executor, entered)
    step = asyncio.ensure_future(anext(results))
    await asyncio.wait_for(entered.wait(), 30)
    step.cancel()
    async with asyncio.timeout(CANCEL_BOUND_S):
        with pytest.raises(asyncio.CancelledError):
            await step
        await results.aclose()
    assert bulk_tasks() == []
    await _serves_again_soon(executor)


async def test_cancelling_the_consumer_cancels_what_is_in_flight(executor: Any) -> None:
    """On the fleet, a cancel swallowed inside a redis-py command once left the job's
    session waiting for good (about one run in ten with a tool call open)."""
    entered = asyncio.Event()

    async def consume() -> None:
        async for _ in await _started_jobs(executor, entered):
            pass

    consumer = asyncio.ensure_future(consume())
    await asyncio.wait_for(entered.wait(), 30)
    consumer.cancel()
    async with asyncio.timeout(CANCEL_BOUND_S):
        with pytest.raises(asyncio.CancelledError):
            await consumer
    assert bulk_tasks() == []
    await _serves_again_soon(executor)


async def test_map_refuses_bad_arguments_clearly(executor: Any) -> None:
    with pytest.raises(InvalidRequest, match="concurrency"):
        await anext(executor.map(["async () => 1"], concurrency=0))
    with pytest.raises(InvalidRequest, match="Job"):
        await anext(executor.map([42]))
    with pytest.raises(InvalidRequest, match="retry"):
        await anext(executor.map(["async () => 1"], retry=3))


# ---- RetryPolicy around one execute -------------------------------------------------


async def test_retry_policy_retries_queue_full_until_served(tight: Any) -> None:
    """QUEUE_FULL is retryable and nothing ran: the policy tries again after a back-off."""
    room = 1 if isinstance(tight, IsolateExecutor) else 2
    blockers = [asyncio.ensure_future(tight.execute(sleeper(1_500, "blocker"))) for _ in range(room)]
    await asyncio.sleep(0.5)
    with pytest.raises(QueueFull):
        await tight.execute("async () => 'refused'")
    policy = RetryPolicy(attempts=40, base_delay_s=0.05, max_delay_s=0.3)
    async with asyncio.timeout(BOUND_S):
        outcome = await policy.execute(tight, "async () => 'served'")
    assert outcome.result == "served" and outcome.attempts > 1
    assert outcome.duration_ms is not None and outcome.duration_ms >= 0
    for blocker in blockers:
        assert (await blocker).result == "blocker"


@pytest.fixture
def kill_runners(executor: Any) -> Callable[[], None]:
    """Kill every process that may be running a program of ``executor`` right now: the
    pool's children in process, the isolate children of every worker on the fleet."""
    fleet = None if isinstance(executor, IsolateExecutor) else SharedFleet.acquire()
    if fleet is not None:
        SharedFleet.release()  # the session's fixture holds it; this only finds it

    def pids() -> list[int]:
        if fleet is None:
            return list(executor.worker_pids)
        return [pid for worker in fleet.workers for pid in worker.children()]

    def kill() -> None:
        for pid in pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    return kill


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_crash_after_the_start_is_retried_only_when_idempotent(
    executor: Any, kill_runners: Callable[[], None], idempotent: bool
) -> None:
    calls = 0

    def dispatch(provider: str, tool: str, args: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            kill_runners()
            time.sleep(5)  # the child's death reaches the executor while this call is open
        return tool_result("charged")

    policy = RetryPolicy(attempts=3, base_delay_s=0.2)
    kwargs: dict[str, Any] = {
        "providers": [{"name": "pay", "tools": ["charge"]}],
        "dispatch": dispatch,
        "idempotent": idempotent,
        "timeout": 30_000,
    }
    async with asyncio.timeout(BOUND_S):
        if idempotent:
            outcome = await policy.execute(executor, "async () => await pay.charge()", **kwargs)
            assert outcome.result == "charged" and outcome.attempts == 2
        else:
            with pytest.raises(WorkerCrashed) as info:
                await policy.execute(executor, "async () => await pay.charge()", **kwargs)
            assert info.value.started is True
            assert calls == 1  # the tool's side effect happened once, and was not repeated


async def test_map_yields_a_fault_that_remains_and_goes_on(
    executor: Any, kill_runners: Callable[[], None]
) -> None:
    """A crash after the start of a job not marked idempotent is that job's result (a
    fault, yielded, not raised); the jobs after it are served."""

    def dispatch(provider: str, tool: str, args: str) -> str:
        kill_runners()
        time.sleep(5)
        return tool_result(None)

    jobs = [
        Job(
            "crash",
            "async () => await pay.charge()",
            providers=[{"name": "pay", "tools": ["charge"]}],
            dispatch=dispatch,
        ),
        Job("a", "async () => 1"),
        Job("b", "async () => 2"),
    ]
    async with asyncio.timeout(BOUND_S):
        got = [(key, outcome) async for key, outcome in executor.map_ordered(jobs, concurrency=1)]
    assert [key for key, _ in got] == ["crash", "a", "b"]
    fault = got[0][1]
    assert isinstance(fault, WorkerCrashed) and fault.started is True, fault
    assert [o.result for _, o in got[1:]] == [1, 2]
