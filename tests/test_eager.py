"""The eager starter (codemode/_host/eager.py): each call's first step at once, as a task.

Every test starts coroutines from a callback of the loop, as the worker's reader does, and
checks what code in a dispatch relies on: a current task, timeouts that fire after a wait,
cancellation, contextvars of its own, and exceptions reported rather than raised.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from codemode._host.eager import EagerStarter

Started = asyncio.Task[None] | None


async def _from_callback(starter: EagerStarter, coro: Coroutine[Any, Any, None]) -> Started:
    """Start ``coro`` from a callback of the running loop and return what start gave."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[Started] = loop.create_future()
    loop.call_soon(lambda: got.set_result(starter.start(coro)))
    return await got


@pytest.fixture(params=["asyncio", "uvloop"], autouse=True)
def _loop_kind(request: pytest.FixtureRequest) -> Any:
    """Every test on asyncio's own loop and on uvloop (the host's loop is the application's)."""
    global _LOOP_FACTORY
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        _LOOP_FACTORY = uvloop.new_event_loop
    else:
        _LOOP_FACTORY = None
    yield
    _LOOP_FACTORY = None


_LOOP_FACTORY: Callable[[], asyncio.AbstractEventLoop] | None = None


def _run(main: Callable[[EagerStarter], Coroutine[Any, Any, None]]) -> None:
    async def outer() -> None:
        starter = EagerStarter(asyncio.get_running_loop(), "test-calls")
        try:
            await main(starter)
        finally:
            starter.close()

    with asyncio.Runner(loop_factory=_LOOP_FACTORY) as runner:
        runner.run(outer())


def _run_to_its_end(
    call: Callable[[], Coroutine[Any, Any, None]], outcome: list[str], expected: list[str]
) -> None:
    """Start a call that waits; once its task ends, what it recorded is ``expected``."""

    async def main(starter: EagerStarter) -> None:
        task = await _from_callback(starter, call())
        assert task is not None
        await asyncio.wait_for(task, 5)
        assert outcome == expected

    _run(main)


def test_a_coroutine_that_does_not_wait_finishes_at_once_with_a_current_task() -> None:
    seen: list[asyncio.Task[Any] | None] = []

    async def call() -> None:
        seen.append(asyncio.current_task())
        async with asyncio.timeout(5):  # needs a current task
            pass

    async def main(starter: EagerStarter) -> None:
        assert await _from_callback(starter, call()) is None
        assert await _from_callback(starter, call()) is None
        assert seen[0] is not None and seen[0] is seen[1]  # the stand-in, shared
        assert asyncio.current_task() is not seen[0]

    _run(main)


def test_a_coroutine_that_waits_goes_on_in_the_task_it_started_as() -> None:
    seen: list[asyncio.Task[Any] | None] = []
    done = asyncio.Event()

    async def call() -> None:
        seen.append(asyncio.current_task())
        await asyncio.sleep(0.01)
        seen.append(asyncio.current_task())
        await asyncio.sleep(0)  # a bare yield, too
        seen.append(asyncio.current_task())
        done.set()

    async def main(starter: EagerStarter) -> None:
        task = await _from_callback(starter, call())
        assert task is not None and seen == [task]
        await done.wait()
        assert seen == [task, task, task]
        await asyncio.sleep(0)
        assert task.done() and not task.cancelled()
        nxt: list[asyncio.Task[Any] | None] = []

        async def other() -> None:
            nxt.append(asyncio.current_task())

        await _from_callback(starter, other())
        assert nxt[0] is not None and nxt[0] is not task  # a fresh stand-in

    _run(main)


def test_a_timeout_entered_in_the_first_step_fires_into_the_call_after_it_waits() -> None:
    outcome: list[str] = []

    async def call() -> None:
        try:
            async with asyncio.timeout(0.02):
                await asyncio.sleep(10)
        except TimeoutError:
            outcome.append("timed out")
        task = asyncio.current_task()
        assert task is not None
        outcome.append(f"cancelling={task.cancelling()}")

    _run_to_its_end(call, outcome, ["timed out", "cancelling=0"])


def test_anyio_cancel_scopes_work_across_the_hand_on() -> None:
    anyio = pytest.importorskip("anyio")
    outcome: list[str] = []

    async def call() -> None:
        try:
            with anyio.fail_after(0.02):
                await anyio.sleep(10)
        except TimeoutError:
            outcome.append("timed out")
        with anyio.move_on_after(5):
            await anyio.sleep(0)
        outcome.append("after")

    _run_to_its_end(call, outcome, ["timed out", "after"])


@pytest.mark.parametrize("when", ["before its task ran", "while it waits"])
def test_cancelling_the_task_of_a_waiting_call_cancels_the_call(when: str) -> None:
    events: list[str] = []

    async def call() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        finally:
            events.append("finally")

    async def main(starter: EagerStarter) -> None:
        loop = asyncio.get_running_loop()
        got: list[Started] = []

        def start_and_maybe_cancel() -> None:
            got.append(starter.start(call()))
            if when == "before its task ran":
                assert got[0] is not None
                got[0].cancel()

        loop.call_soon(start_and_maybe_cancel)
        await asyncio.sleep(0)
        task = got[0]
        assert task is not None
        if when == "while it waits":
            await asyncio.sleep(0.01)
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert events == ["cancelled", "finally"]

    _run(main)


def test_each_call_has_a_context_of_its_own() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []

    async def call(name: str, wait: bool) -> None:
        seen.append(f"{name} saw {var.get()}")
        var.set(name)
        if wait:
            await asyncio.sleep(0.01)
            seen.append(f"{name} kept {var.get()}")

    async def main(starter: EagerStarter) -> None:
        first = await _from_callback(starter, call("a", True))
        assert await _from_callback(starter, call("b", False)) is None
        assert await _from_callback(starter, call("c", False)) is None
        assert first is not None
        await first
        assert seen == ["a saw unset", "b saw unset", "c saw unset", "a kept a"]
        assert var.get() == "unset"

    _run(main)


def test_a_coroutine_that_raises_is_reported_not_raised() -> None:
    reported: list[dict[str, Any]] = []

    async def broken() -> None:
        raise ValueError("boom")

    async def main(starter: EagerStarter) -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        assert await _from_callback(starter, broken()) is None
        assert [type(c["exception"]) for c in reported] == [ValueError]

    _run(main)


def test_started_from_a_task_it_runs_at_once_and_the_task_is_current_again() -> None:
    """As asyncio's eager tasks do: the running task steps aside for the first step."""
    ran: list[asyncio.Task[Any] | None] = []

    async def call(wait: bool) -> None:
        ran.append(asyncio.current_task())
        if wait:
            await asyncio.sleep(0.01)
            ran.append(asyncio.current_task())

    async def main(starter: EagerStarter) -> None:
        me = asyncio.current_task()
        assert starter.start(call(False)) is None
        assert asyncio.current_task() is me and ran[0] not in (None, me)
        task = starter.start(call(True))
        assert task is not None and asyncio.current_task() is me and ran[1] is task
        assert task is not None  # mypy reads ``ran[1] is task`` as widening task to Optional again
        await task
        assert ran[2] is task

    _run(main)


def test_closing_the_starter_lets_its_parked_stand_in_go() -> None:
    async def call() -> None:
        pass

    async def main(starter: EagerStarter) -> None:
        await _from_callback(starter, call())
        stand_ins = [t for t in asyncio.all_tasks() if t.get_name() == "test-calls"]
        assert len(stand_ins) == 1
        starter.close()
        await asyncio.sleep(0)
        assert stand_ins[0].cancelled()

    _run(main)
