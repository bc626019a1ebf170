"""Fixtures of the fleet tests: a private redis-server and real worker processes.

The session fleet (one Redis, two workers) is shared with ``tests/contract`` through
:class:`codemode.fleet.testing.SharedFleet`; tests that kill or restart things get their own
worker (and Redis) from the factories below. Every process is stopped at teardown, with its
whole process group: nothing is left behind.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from fleet_helpers import require_redis_server

from codemode.fleet import FleetExecutor
from codemode.fleet.settings import BrokerSettings, WorkerSettings
from codemode.fleet.testing import RedisServer, SharedFleet, WorkerProcess


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def fleet() -> Iterator[SharedFleet]:
    require_redis_server()
    shared = SharedFleet.acquire()
    try:
        yield shared
    finally:
        SharedFleet.release()


@pytest.fixture
def settings(fleet: SharedFleet) -> BrokerSettings:
    return fleet.settings


@pytest.fixture
async def executor(settings: BrokerSettings) -> AsyncIterator[FleetExecutor]:
    async with FleetExecutor(settings=settings, queue_timeout=30_000) as ex:
        yield ex


@pytest.fixture
def private_queue(settings: BrokerSettings) -> BrokerSettings:
    """The session Redis with a queue and a key prefix of its own: no shared worker consumes
    the queue, and the test's keys (admission included) are its alone."""
    tag = uuid.uuid4().hex[:8]
    return replace(settings, queue=f"q-{tag}", key_prefix=f"t-{tag}")


@pytest.fixture
def private_prefix(settings: BrokerSettings) -> BrokerSettings:
    """The shared workers' queue, with keys of this test's own (workers follow the job's
    prefix), so a test can find its job's keys without guessing."""
    return replace(settings, key_prefix=f"t-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def control(private_queue: BrokerSettings) -> Iterator[Any]:
    """A Celery app on the fleet's Redis, for its remote control (``app.control``)."""
    from celery import Celery

    app = Celery("codemode-control", set_as_current=False)
    app.conf.update(private_queue.celery_config())
    yield app
    app.close()


@pytest.fixture
def redis_sync(settings: BrokerSettings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.redis_url)
    yield client
    client.close()


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start extra worker processes; every one is stopped (process group and all) at the end."""
    started: list[WorkerProcess] = []

    def start(
        settings: BrokerSettings,
        *,
        concurrency: int = 1,
        wait: bool = True,
        env: dict[str, str] | None = None,
        name: str = "extra",
    ) -> WorkerProcess:
        proc = WorkerProcess(
            settings, WorkerSettings(concurrency=concurrency), env=env, log_dir=tmp_path, name=name
        )
        started.append(proc)
        return proc.start(wait=wait)

    yield start
    for proc in started:
        proc.stop()
        assert not proc.alive(), f"{proc.name} left processes behind"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    require_redis_server()
    server = RedisServer(log_dir=tmp_path).start()
    try:
        yield server
    finally:
        server.stop()
