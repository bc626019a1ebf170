"""The in-process executor's metrics (``executor.metrics_registry``), read after real runs on a
real pool: each count moves by what happened, and nothing is counted before the registry is
asked for. The executor itself runs without prometheus_client."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from codemode import ExecutorError, IsolateExecutor, SyncIsolateExecutor
from codemode.metrics import INSTALL_HINT

pytestmark = pytest.mark.anyio


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value, 0 when it is not there (yet)."""
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


async def settles(registry: CollectorRegistry, name: str, expected: float, **labels: str) -> None:
    """Wait (generously) until a gauge reads ``expected``: a child cleans up after its run."""
    deadline = time.monotonic() + 30
    while value(registry, name, **labels) != expected:
        assert time.monotonic() < deadline, generate_latest(registry).decode()
        await asyncio.sleep(0.02)


async def test_jobs_by_outcome_and_code_and_their_latency() -> None:
    async with IsolateExecutor(pool={"max_workers": 2}, timeout=10_000) as executor:
        registry = executor.metrics_registry
        for i in range(5):
            assert (await executor.execute(f"async () => {i}")).result == i
        timed_out = await executor.execute("async () => { while (true) {} }", timeout=300)
        assert timed_out.error is not None and timed_out.error.startswith("Execution timed out")
        thrown = await executor.execute("async () => { throw new TypeError('no') }")
        assert thrown.error_detail is not None
        with pytest.raises(ExecutorError) as fault:
            await executor.execute("async () => 1", timeout=-5)
        assert fault.value.code == "INVALID_REQUEST"

        assert value(registry, "codemode_jobs_total", outcome="ok", code="") == 5
        assert value(registry, "codemode_jobs_total", outcome="error", code="TIMEOUT") == 1
        assert value(registry, "codemode_jobs_total", outcome="error", code="THROWN") == 1
        assert value(registry, "codemode_jobs_total", outcome="fault", code="INVALID_REQUEST") == 1
        assert value(registry, "codemode_job_duration_seconds_count") == 8
        # The timed-out run alone took its 300 ms: the histogram's sum holds it.
        assert value(registry, "codemode_job_duration_seconds_sum") >= 0.3
        assert value(registry, "codemode_job_duration_seconds_bucket", le="0.25") <= 7
        # Every run that reached the pool waited for a child (the refused one never did).
        assert value(registry, "codemode_queue_wait_seconds_count") == 7


async def test_nothing_is_counted_before_the_registry_is_asked_for() -> None:
    async with IsolateExecutor(pool={"max_workers": 1}) as executor:
        await executor.execute("async () => 1")
        registry = executor.metrics_registry
        assert executor.metrics_registry is registry
        assert value(registry, "codemode_jobs_total", outcome="ok", code="") == 0
        await executor.execute("async () => 1")
        assert value(registry, "codemode_jobs_total", outcome="ok", code="") == 1


async def test_tool_calls_by_outcome_and_their_latency() -> None:
    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        if tool == "fail":
            raise RuntimeError("the tool failed")
        await asyncio.sleep(0.02)
        return '{"result": 1}'

    code = """async () => {
        await t.ok(); await t.ok();
        try { await t.fail() } catch (e) {}
        return 1
    }"""
    async with IsolateExecutor(pool={"max_workers": 1}) as executor:
        registry = executor.metrics_registry
        outcome = await executor.execute(
            code, providers=[{"name": "t", "tools": ["ok", "fail"]}], dispatch=dispatch
        )
        assert outcome.result == 1, outcome
        assert value(registry, "codemode_tool_calls_total", outcome="ok") == 2
        assert value(registry, "codemode_tool_calls_total", outcome="error") == 1
        assert value(registry, "codemode_tool_call_duration_seconds_count") == 3
        assert value(registry, "codemode_tool_call_duration_seconds_sum") >= 0.04
        # The two 20 ms calls are above the 10 ms bucket; the failing one is below it.
        assert value(registry, "codemode_tool_call_duration_seconds_bucket", le="0.01") <= 1


async def test_a_killed_child_is_a_restart_by_its_signal() -> None:
    async with IsolateExecutor(pool={"max_workers": 1, "standby": False}) as executor:
        registry = executor.metrics_registry
        await executor.execute("async () => 1")
        (pid,) = executor.worker_pids
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while value(registry, "codemode_child_restarts_total", cause="SIGKILL") < 1:
            assert time.monotonic() < deadline, generate_latest(registry).decode()
            await asyncio.sleep(0.05)
        assert (await executor.execute("async () => 2")).result == 2
        assert value(registry, "codemode_child_restarts_total", cause="SIGKILL") == 1


async def test_the_pool_gauges_are_read_at_scrape_time() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        entered.set()
        await release.wait()
        return '{"result": 1}'

    async with IsolateExecutor(pool={"max_workers": 2, "max_queue": 3, "standby": False}) as executor:
        registry = executor.metrics_registry
        assert value(registry, "codemode_admission_slots") == 0  # no pool yet: no gauges
        await asyncio.gather(*(executor.execute("async () => 1") for _ in range(2)))
        await settles(registry, "codemode_pool_children", 2, state="idle")
        assert value(registry, "codemode_admission_slots") == 5
        run = asyncio.ensure_future(
            executor.execute(
                "async () => t.wait()", providers=[{"name": "t", "tools": ["wait"]}], dispatch=dispatch
            )
        )
        await asyncio.wait_for(entered.wait(), 30)
        assert value(registry, "codemode_pool_children", state="busy") == 1
        assert value(registry, "codemode_pool_children", state="idle") == 1
        assert value(registry, "codemode_admission_slots_in_use") == 1
        release.set()
        assert (await run).result == 1
        await settles(registry, "codemode_admission_slots_in_use", 0)
        await settles(registry, "codemode_pool_children", 2, state="idle")


def test_the_sync_executor_exposes_the_same_registry() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as executor:
        registry = executor.metrics_registry
        executor.execute("async () => 1")
        text = generate_latest(registry).decode()
        assert 'codemode_jobs_total{code="",outcome="ok"} 1.0' in text


def test_the_executor_runs_without_prometheus_client() -> None:
    """With prometheus_client made unimportable, runs work and reading the registry says what
    to install."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["prometheus_client"] = None  # as if it were not installed
        from codemode import SyncIsolateExecutor
        with SyncIsolateExecutor(pool={"max_workers": 1}) as executor:
            assert executor.execute("async () => 6 * 7").result == 42
            try:
                executor.metrics_registry
            except ModuleNotFoundError as exc:
                print(exc)
            assert executor.execute("async () => 1").result == 1
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == INSTALL_HINT
