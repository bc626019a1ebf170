"""A real worker's /metrics, scraped over HTTP after real jobs: the counts move by what the
jobs did (N jobs that worked, a timeout by its code, tool calls, a killed isolate child as a
restart by its signal, claims and queue waits), and a port the worker cannot use stops it with
a sentence."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from codemode.fleet import FleetExecutor
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import WorkerProcess, free_port

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

JOBS = 4


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the worker's endpoint, by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_a_workers_metrics_move_with_its_jobs(
    private_queue: BrokerSettings,
    start_worker: Callable[..., WorkerProcess],
    redis_sync: redis.Redis,
) -> None:
    port = free_port()
    worker = start_worker(private_queue, env={"CODEMODE_METRICS_PORT": str(port)})
    before = scrape(port)
    assert sample(before, "codemode_jobs_total", outcome="ok", code="") == 0  # the warm-up is not a job
    assert sample(before, "codemode_fleet_admission_slots") == private_queue.fleet_max_jobs

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        return '{"result": 5}'

    async with FleetExecutor(settings=private_queue, queue_timeout=60_000) as host:
        for i in range(JOBS):
            assert (await host.execute(f"async () => {i}")).result == i
        timed_out = await host.execute("async () => { while (true) {} }", timeout=300)
        assert timed_out.error is not None and timed_out.error.startswith("Execution timed out")
        called = await host.execute(
            "async () => await t.five()", providers=[{"name": "t", "tools": ["five"]}], dispatch=dispatch
        )
        assert called.result == 5

    after = scrape(port)
    assert sample(after, "codemode_jobs_total", outcome="ok", code="") == JOBS + 1
    assert sample(after, "codemode_jobs_total", outcome="error", code="TIMEOUT") == 1
    assert sample(after, "codemode_job_duration_seconds_count") == JOBS + 2
    assert sample(after, "codemode_tool_calls_total", outcome="ok") == 1
    assert sample(after, "codemode_tool_call_duration_seconds_count") == 1
    assert sample(after, "codemode_fleet_claims_total", state="started") == JOBS + 2
    assert sample(after, "codemode_fleet_queue_wait_seconds_count") == JOBS + 2
    # Queue waits are measured against Redis time: none of these took a minute.
    assert sample(after, "codemode_fleet_queue_wait_seconds_bucket", le="30.0") == JOBS + 2
    assert sample(after, "codemode_fleet_admission_slots_in_use") == 0
    assert (
        sample(after, "codemode_pool_children", state="busy")
        + sample(after, "codemode_pool_children", state="idle")
        >= 1
    )

    child = worker.children()[0]
    os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while sample(scrape(port), "codemode_child_restarts_total", cause="SIGKILL") < 1:
        assert time.monotonic() < deadline, "the killed child was not counted as a restart"
        await asyncio.sleep(0.1)


def test_a_metrics_port_in_use_stops_the_worker_with_a_sentence(private_queue: BrokerSettings) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, **private_queue.env(), "CODEMODE_METRICS_PORT": str(port)}
        done = subprocess.run(
            [sys.executable, "-m", "codemode", "worker", "--concurrency", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"could not listen on port {port}" in done.stderr


def test_a_bad_metrics_port_flag_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "worker", "--metrics-port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--metrics-port" in done.stderr and "65535" in done.stderr
