"""A registry's sync tools run on the executor's dispatch threads, as a sync dispatch does:
never on the event loop, where one blocking tool would hold every run of the executor."""

from __future__ import annotations

import asyncio
import threading
import time

from codemode import IsolateExecutor, SyncIsolateExecutor, ToolRegistry

from .test_tools import InFlight


def test_parallel_calls_of_a_sync_tool_overlap(executor: SyncIsolateExecutor) -> None:
    """Four calls of a sync tool, made with Promise.all, are inside the tool at the same time:
    each waits at a barrier for the other three (on the loop they ran one after another, and
    the first would wait for the others forever: its barrier breaks and the call fails)."""
    tools = ToolRegistry()
    together = threading.Barrier(4, timeout=20)

    @tools.tool("api", "slow")
    def slow(i: int) -> int:
        together.wait()
        return i

    outcome = executor.execute(
        "async () => Promise.all([1, 2, 3, 4].map((i) => api.slow(i)))",
        providers=tools.providers(),
        dispatch=tools.dispatch,
        timeout=60_000,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [1, 2, 3, 4]


def test_a_blocking_sync_tool_holds_neither_its_siblings_nor_other_runs() -> None:
    """While four calls of a tool are all blocked inside it at once, another run of the
    same executor starts, runs and ends; then the four are let go. (On the loop, the first
    call held the loop: the other three never started and no other run could end.)"""
    release = threading.Event()
    calls = InFlight()
    tools = ToolRegistry()

    @tools.tool("api", "wait")
    def wait(i: int) -> int:
        with calls:
            release.wait(10)
        return i

    @tools.tool("api", "quick")
    async def quick() -> str:
        return "quick"

    async def scenario() -> None:
        async with IsolateExecutor(pool={"max_workers": 2}) as ex:
            blocked = asyncio.ensure_future(
                ex.execute(
                    "async () => Promise.all([1, 2, 3, 4].map((i) => api.wait(i)))",
                    providers=tools.providers(),
                    dispatch=tools.dispatch,
                    timeout=60_000,
                )
            )
            deadline = time.monotonic() + 30
            while calls.now < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert calls.now == 4, "all four calls are inside the tool at once"
            other = await ex.execute(
                "async () => [6 * 7, await api.quick()]",
                providers=tools.providers(),
                dispatch=tools.dispatch,
                timeout=30_000,
            )
            assert other.error is None and other.result == [42, "quick"]
            assert not release.is_set() and calls.now == 4, "the other run ended while they waited"
            release.set()
            assert (await blocked).result == [1, 2, 3, 4]

    try:
        asyncio.run(scenario())
    finally:
        release.set()
    assert calls.peak == 4
