"""Flower (the real ``flower`` package) watching a codemode worker: a test starts Flower
against a real worker (``codemode worker --events``) and Redis on free ports, and reads its
HTTP API: the worker is listed, and every job with its state, runtime and, for a fault,
its code."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_helpers import eventually

from codemode import Cancelled
from codemode.fleet import FleetExecutor
from codemode.fleet.settings import TASK_NAME, BrokerSettings, WorkerSettings
from codemode.fleet.testing import WorkerProcess, free_port

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]
pytest.importorskip("flower", reason="Flower is in the test extra: pip install -e '.[test]'")

REPO = Path(__file__).resolve().parents[2]
FOREVER = "async () => { for (;;) await new Promise(r => setTimeout(r, 20)) }"


class EventfulWorker(WorkerProcess):
    """``codemode worker --events``: task events from the start."""

    def command(self) -> list[str]:
        return [*super().command(), "--events"]


@pytest.fixture
def flower(private_queue: BrokerSettings, tmp_path: Path) -> Iterator[str]:
    """``celery -A workers flower`` on a free port; its base URL."""
    port = free_port()
    env = {**os.environ, **private_queue.env(), "FLOWER_UNAUTHENTICATED_API": "true"}
    log = (tmp_path / "flower.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers", "flower", f"--port={port}", "--address=127.0.0.1"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def test_flower_lists_the_worker_and_every_job_with_its_state(
    private_queue: BrokerSettings, flower: str, tmp_path: Path, control: Any
) -> None:
    worker = EventfulWorker(private_queue, WorkerSettings(concurrency=2), log_dir=tmp_path, name="flowered")
    worker.start()
    try:
        async with httpx.AsyncClient(base_url=flower, timeout=10) as http:

            async def workers() -> list[str]:
                try:
                    reply = await http.get("/api/workers", params={"refresh": "1"})
                except httpx.HTTPError:
                    return []
                return [
                    n for n in (reply.json() if reply.status_code == 200 else {}) if n.startswith("flowered-")
                ]

            listed: list[str] = []
            for _ in range(120):
                listed = await workers()
                if listed:
                    break
                await asyncio.sleep(0.5)
            assert listed, "Flower never listed the worker"
            await asyncio.sleep(1.0)  # Flower's event receiver is connected by now

            ids: list[str] = []
            async with FleetExecutor(settings=private_queue, on_job_id=ids.append) as ex:
                assert (await ex.execute("() => 6 * 7")).result == 42
                assert (await ex.execute("() => { throw new Error('no') }")).error is not None
                running = asyncio.ensure_future(ex.execute(FOREVER, timeout=60_000))
                await eventually(lambda: len(ids) == 3, 10, "the third job's id")
                await asyncio.sleep(1.0)
                control.control.revoke(ids[2], terminate=True)
                with pytest.raises(Cancelled):
                    await running

            async def tasks() -> dict[str, Any]:
                reply = await http.get("/api/tasks")
                return dict(reply.json()) if reply.status_code == 200 else {}

            seen: dict[str, Any] = {}
            for _ in range(60):
                seen = await tasks()
                if all(seen.get(i, {}).get("state") in ("SUCCESS", "FAILURE") for i in ids):
                    break
                await asyncio.sleep(0.5)
    finally:
        worker.stop()
    ok, program_error, cancelled = (seen[i] for i in ids)
    for task in (ok, program_error, cancelled):
        assert task["name"] == TASK_NAME and task["worker"].startswith("flowered-")
        assert task["received"] and task["started"] and task["runtime"] is not None
    assert ok["state"] == "SUCCESS" and ok["succeeded"]
    assert program_error["state"] == "SUCCESS"  # a program's error is a served run
    assert cancelled["state"] == "FAILURE" and cancelled["failed"]
    assert "CANCELLED" in cancelled["exception"]
