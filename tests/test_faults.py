"""The fault table: each injected fault and the outcome it must produce.

| fault                                  | outcome                                              |
|----------------------------------------|------------------------------------------------------|
| child SIGKILLed mid-run                | WORKER_CRASHED, started=True, names SIGKILL(-9)      |
| child SIGKILLed while idle             | replaced without a second engine probe; serves       |
| child sends a garbage frame            | WORKER_CRASHED, started=False, "malformed message"   |
| the host's reader of a child fails     | WORKER_CRASHED "could not be read"; child replaced   |
| dispatch raises                        | the call rejects with a short message (test_tools)   |
| dispatch never answers                 | the timeout text at the bound (test_bounds)          |
| 50 concurrent over 2 workers, queue 3  | served or QUEUE_FULL at once (test_bounds)           |
| child stopped (SIGSTOP) mid-run        | killed past its deadline; the timeout text           |
| dispose during a run                   | DISPOSED, started=True; waiting calls started=False  |
| engine lacks a behaviour               | WORKER_CRASHED "Worker 1 failed to start." + causes  |
| host SIGKILLed / forgets to dispose    | no child outlives it                                 |
| run ends before a queued call is served| the call's dispatch coroutine is closed, not leaked  |
| the caller stops waiting (cancelled)   | CancelledError at once; the child stops the program, |
|                                        | releases a handle it made, and serves the next run   |

After every fault the pool keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from codemode import Disposed, IsolateExecutor, SyncIsolateExecutor, WorkerCrashed, tool_result
from codemode._host.pool import Pool
from codemode._protocol import Run
from codemode.texts import memory_text, timeout_text

from .conftest import child_fault_env, child_pids


def _pool_of(ex: IsolateExecutor) -> Pool:
    """The executor's pool, which its first run started."""
    assert ex._pool is not None
    return ex._pool


def test_a_child_killed_mid_run_fails_only_that_run() -> None:
    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 2}, timeout=30_000) as ex:
            await ex.execute("() => 1")
            code = "async () => { await new Promise((r) => setTimeout(r, 2000)); return 'late' }"
            victim_task = asyncio.ensure_future(ex.execute(code))
            other_task = asyncio.ensure_future(
                ex.execute("async () => { await new Promise((r) => setTimeout(r, 500)); return 'ok' }")
            )
            await asyncio.sleep(0.3)
            busy = [
                c
                for c in _pool_of(ex).children()
                if c.run is not None and isinstance(c.run.msg, Run) and "late" in c.run.msg.code
            ]
            assert busy, "the long run should be on a child"
            assert busy[0].pid is not None
            os.kill(busy[0].pid, signal.SIGKILL)
            with pytest.raises(WorkerCrashed) as info:
                await victim_task
            err = info.value
            assert err.code == "WORKER_CRASHED" and err.retryable and err.started
            assert "crashed with SIGKILL(-9)" in str(err) and "the program had started" in str(err)
            assert (await other_task).result == "ok"  # the other run was untouched
            for _ in range(5):
                assert (await ex.execute("async () => 6 * 7")).result == 42

    asyncio.run(main())


@pytest.mark.parametrize("tool_wait_s", [0.0, 0.05, 0.6])
def test_a_child_that_cannot_keep_its_deadline_is_ended_by_the_host(tool_wait_s: float) -> None:
    """The host's backstop: a child stopped mid-run (SIGSTOP: it can neither settle the run
    nor answer) is killed shortly after the run's deadline, and the run gets the timeout
    text. Time in a tool call does not count against the clock, so the deadline moves by
    it; the backstop's timer either fires during the call (0.6 s, longer than the 300 ms
    clock: re-armed when the call returns) or before the moved deadline (0.05 s: it arms
    itself again), and never ends the run before the moved deadline."""

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        await asyncio.sleep(tool_wait_s)
        return tool_result(1)

    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 1}, timeout=300) as ex:
            await ex.execute("() => 1")
            code = "async () => { await host.wait(); await new Promise((r) => setTimeout(r, 60000)); }"
            started = time.monotonic()
            run = asyncio.ensure_future(
                ex.execute(
                    code,
                    providers=[{"name": "host", "tools": ["wait"]}],
                    dispatch=dispatch,
                    count_host_waits=False,
                )
            )
            pool = ex._pool
            assert pool is not None
            deadline = time.monotonic() + 5
            while not (
                pool.children()
                and (active := pool.children()[0].run) is not None
                and not active.open_calls
                and active.paused_total > 0
            ):
                assert time.monotonic() < deadline, "the tool call should have been answered"
                await asyncio.sleep(0.002)
            [child] = pool.children()
            assert child.pid is not None
            os.kill(child.pid, signal.SIGSTOP)
            outcome = await asyncio.wait_for(run, 10)
            elapsed = time.monotonic() - started
            assert outcome.error == timeout_text(300)
            assert elapsed >= 0.3 + tool_wait_s, elapsed  # the call's time did not count
            assert elapsed < 0.3 + tool_wait_s + 3.0, elapsed
            assert (await ex.execute("async () => 6 * 7")).result == 42  # replaced, serving

    asyncio.run(main())


def _argv(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")[:-1]


def _kill_and_await_replacement(ex: SyncIsolateExecutor, pid: int, sig: int) -> int:
    """Send ``sig`` to the pool's only child ``pid``; return the pid of the child that
    replaces it (runs that meet the dead child in the meantime may fail: that is allowed)."""
    os.kill(pid, sig)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ex.worker_pids in ([], [pid]):
        with contextlib.suppress(WorkerCrashed):
            ex.execute("() => 0")
        time.sleep(0.05)
    [replacement] = ex.worker_pids
    assert replacement != pid
    return replacement


def test_a_replacement_child_skips_the_engine_probe_and_serves() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        assert ex.execute("() => 1").result == 1
        [first] = ex.worker_pids
        assert b"probe" in _argv(first)  # the pool's first child checks the engine
        second = _kill_and_await_replacement(ex, first, signal.SIGKILL)
        assert b"probed" in _argv(second)  # same binary, same flags: no second probe
        assert ex.execute("async () => 6 * 7").result == 42


def test_a_child_that_crashes_writes_no_core_even_where_the_host_may(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child runs untrusted code and reserves ~1.4 TB of address space: a crash must not
    dump it (the dump held the child's pipes open for seconds, and its slot with them)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("this host may not raise its core limit, so it cannot show the child lowers it")
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    monkeypatch.chdir(tmp_path)  # a plain core pattern writes into the child's working directory
    try:
        with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
            assert ex.execute("() => 1").result == 1
            [first] = ex.worker_pids
            with open(f"/proc/{first}/limits") as f:
                core = next(line for line in f if line.startswith("Max core file size"))
            assert core.split()[4:6] == ["0", "0"], core
            _kill_and_await_replacement(ex, first, signal.SIGABRT)
            assert ex.execute("async () => 6 * 7").result == 42
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    assert not list(tmp_path.iterdir())


def test_a_garbage_frame_from_a_child_is_a_typed_fault() -> None:
    env = child_fault_env("garbage-frame")
    with SyncIsolateExecutor(pool={"max_workers": 1}, child_env=env) as ex:
        with pytest.raises(WorkerCrashed) as info:
            ex.execute("async () => 1")
        assert "sent a malformed message" in str(info.value)
        assert not info.value.started  # the garbage came before the child marked the run started


def test_a_reader_that_fails_in_the_host_is_a_typed_fault_and_the_pool_serves_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in the host's frame reader must end the run it was serving with a fault, not
    leave the caller waiting for frames nobody reads any more."""
    from codemode._protocol import PipeFrames

    real_read = PipeFrames.read
    failures: list[int] = []

    def failing_read(self: PipeFrames) -> list[bytes] | None:
        if not failures:
            failures.append(1)
            raise RuntimeError("a reader bug")
        return real_read(self)

    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 1}) as ex:
            assert (await ex.execute("async () => 1")).result == 1
            monkeypatch.setattr(PipeFrames, "read", failing_read)
            with pytest.raises(WorkerCrashed) as info:
                await asyncio.wait_for(ex.execute("async () => 2"), 30)
            assert "could not be read (RuntimeError)" in str(info.value)
            assert (await asyncio.wait_for(ex.execute("async () => 6 * 7"), 60)).result == 42

    asyncio.run(main())


def test_an_out_of_memory_death_with_a_long_backtrace_is_the_memory_text() -> None:
    """V8 says "out of memory" first and prints its backtrace after: a backtrace longer than
    the stderr tail the host keeps must not turn the memory text into a crash."""
    env = child_fault_env("oom-long-trace")
    with SyncIsolateExecutor(pool={"max_workers": 1}, child_env=env, memory_limit=64) as ex:
        assert ex.execute("async () => 1").error == memory_text(64)


def test_dispose_during_a_run_fails_the_run_and_the_line() -> None:
    async def main() -> None:
        ex = IsolateExecutor(pool={"max_workers": 1, "max_queue": 10}, timeout=30_000)
        await ex.execute("() => 1")
        running = asyncio.ensure_future(ex.execute("async () => new Promise(() => {})"))
        waiting = asyncio.ensure_future(ex.execute("() => 2"))
        await asyncio.sleep(0.3)
        pids = ex.worker_pids
        await ex.aclose()
        with pytest.raises(Disposed) as ran:
            await running
        assert ran.value.started
        with pytest.raises(Disposed) as waited:
            await waiting
        assert not waited.value.started
        assert not [p for p in pids if p in child_pids()]

    asyncio.run(main())


def test_a_child_whose_engine_fails_the_probe_rejects_the_first_call() -> None:
    # A real engine made to fail: a tiny V8 stack cannot even install the runtime.
    env = dict(os.environ, CODEMODE_CHILD_V8_FLAGS="--stack-size=8")
    with SyncIsolateExecutor(pool={"max_workers": 1}, child_env=env) as ex:
        with pytest.raises(WorkerCrashed) as info:
            ex.execute("async () => 1")
        err = info.value
        assert str(err) == "Worker 1 failed to start."
        assert not err.started
        assert err.causes and "cannot create an isolate and install the runtime" in err.causes[0]
        assert isinstance(err.__cause__, RuntimeError)


HOST = textwrap.dedent(
    """
    import sys, time
    from codemode import SyncIsolateExecutor
    ex = SyncIsolateExecutor(pool={"max_workers": 2})
    print(ex.execute("async () => 6 * 7").result, flush=True)
    time.sleep(0.5)
    print(" ".join(map(str, ex.worker_pids)), flush=True)
    sys.stdin.readline()
    if sys.argv[1] == "hang":
        time.sleep(3600)
    # "forget": exit without dispose
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("mode", ["hang", "forget"])
def test_no_child_outlives_its_host(mode: str) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, mode], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    assert host.stdout.readline().strip() == "42"
    pids = [int(p) for p in host.stdout.readline().split()]
    assert pids and all(_alive(p) for p in pids)
    assert host.stdin is not None
    host.stdin.write("go\n")
    host.stdin.flush()
    if mode == "hang":
        time.sleep(0.2)
        host.kill()  # SIGKILL: the host gets no chance to clean up
    assert host.wait(timeout=30) is not None
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)]


def test_a_call_whose_run_ended_before_it_was_served_is_closed_not_leaked() -> None:
    """A run that ends (its deadline, say) while calls are still being served cancels
    their tasks, and each call's coroutine is closed; a call answered at once leaves no
    task; the run keeps none."""
    from codemode._host.calls import ActiveRun
    from codemode._host.child import ChildProcess
    from codemode._host.spawn import SpawnSettings
    from codemode._protocol import Call

    async def main() -> None:
        loop = asyncio.get_running_loop()
        child = ChildProcess(1, SpawnSettings(64, 1 << 20, 100), lambda c: None, lambda c: None)
        made: list[Any] = []
        entered: list[int] = []

        async def on_call(call: Call) -> str:
            entered.append(call.call_id)
            if call.call_id != 3:
                await asyncio.sleep(3600)
            return "{}"

        def serve(call_id: int) -> Any:
            coroutine = on_call(Call(1, call_id, "p", "t", "[]"))
            made.append(coroutine)
            return coroutine

        run = Run(1, "() => 0", (), 1000, True, "none", time.monotonic())
        # (on_call stands in for on_fetch too: no fetch is made here)
        active = ActiveRun(msg=run, future=loop.create_future(), on_call=on_call, on_fetch=on_call)  # type: ignore[arg-type]
        child.run = active
        for call_id in (1, 2, 3):  # (from a callback of the loop, as the reader calls it)
            loop.call_soon(child._answer, active, call_id, lambda call_id=call_id: serve(call_id))
        await asyncio.sleep(0)
        assert entered == [1, 2, 3]
        assert len(active.tasks) == 2  # the third answered at once and left no task
        waiting = list(active.tasks)
        loop.call_soon(child._answer, active, 4, lambda: serve(4))  # started at once: waits
        await asyncio.sleep(0)
        latest = list(active.tasks - set(waiting))
        assert len(latest) == 1
        child._finish(active)  # the run ended
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not active.tasks and all(t.cancelled() for t in waiting + latest)
        assert len(made) == 4
        assert [inspect.getcoroutinestate(c) for c in made] == [inspect.CORO_CLOSED] * len(made)

    asyncio.run(main())


def test_the_started_mark_is_read_from_the_shared_page() -> None:
    """The child marks a run started in a page it shares with the host (codemode/_host/mark.py):
    what it stores there is what the host reads, and a child given no page says so."""
    from codemode._host.mark import StartedMark, open_mark

    mark = StartedMark.make()
    assert mark is not None and mark.fd is not None
    child_side = open_mark(str(os.dup(mark.fd)))  # the child's own descriptor, as inherited
    assert child_side is not None
    mark.spawned()
    assert not mark.marked(7)
    child_side.mark(7)
    assert mark.marked(7) and not mark.marked(8)
    mark.close()
    assert not mark.marked(7)
    assert open_mark("-") is None


async def _until_running(ex: IsolateExecutor) -> None:
    """Wait until a child has been handed a run (the executor's only one)."""
    deadline = time.monotonic() + 30
    while not any(c.run is not None for c in _pool_of(ex).children()):
        assert time.monotonic() < deadline, "the run never reached a child"
        await asyncio.sleep(0)


def test_a_caller_that_stops_waiting_stops_its_run_and_the_pool_serves_on() -> None:
    """A caller cancelled mid-run gets its CancelledError at once, whether the program is in
    a loop that never yields or waiting on a tool call the host is still serving; the
    child is told to stop the program, and the next run is served."""
    arrived = asyncio.Event()

    async def slow_dispatch(provider: str, tool: str, args_json: str) -> str:
        arrived.set()
        await asyncio.sleep(30)
        return tool_result("late")

    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 1, "standby": False}, timeout=60_000) as ex:
            await ex.execute("() => 1")
            for code in ("() => { while (true) {} }", "async () => { await t.slow(); return 'late' }"):
                run = asyncio.ensure_future(
                    ex.execute(code, providers=[{"name": "t", "tools": ["slow"]}], dispatch=slow_dispatch)
                )
                if "slow" in code:
                    await asyncio.wait_for(arrived.wait(), 30)  # the call is in the host
                else:
                    await _until_running(ex)
                    await asyncio.sleep(0.05)
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run
                outcome = await asyncio.wait_for(ex.execute("() => 6 * 7"), 60)
                assert outcome.result == 42

    asyncio.run(main())


def test_a_handle_whose_caller_stopped_waiting_is_released() -> None:
    """A run that would retain its isolate, whose caller left as it ran: nobody can hold
    the handle, so the child lets the isolate go and takes the next run (the caller leaves
    right after handing the run over: the program returns its handler either before the
    child reads the Cancel, or not at all)."""

    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 1, "standby": False}, timeout=30_000) as ex:
            await ex.execute("() => 1")
            for _ in range(8):
                run = asyncio.ensure_future(ex.execute("() => () => new Response('hi')", retain_handles=True))
                await _until_running(ex)
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run
                outcome = await asyncio.wait_for(ex.execute("() => 6 * 7"), 60)
                assert outcome.result == 42  # (a child still holding the isolate would not take it)
                assert ex._handles.live_count() == 0
                assert all(c.retained is None for c in _pool_of(ex).children())

    asyncio.run(main())
