"""Starting a worker, every documented way: the jobs it takes and the isolate pool that
runs them agree, and a start that cannot keep them equal is refused with a sentence."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codemode.fleet import FleetExecutor
from codemode.fleet.settings import ENV_WORKER_CONCURRENCY, ENV_WORKER_POOL, BrokerSettings, WorkerSettings
from codemode.fleet.testing import WorkerProcess
from codemode.fleet.worker.cli import celery_argv

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
"""Where the deployable app lives (``workers/``: the repository's, not installed)."""

HOLD = "async () => { await new Promise((r) => setTimeout(r, 1500)); return 1 }"
"""A job that holds its isolate long enough for every job of a burst to be running at once."""


class CeleryCommandWorker(WorkerProcess):
    """A worker started with Celery's own command line (``celery -A <app> worker ...``)."""

    def __init__(
        self, settings: BrokerSettings, app: str, celery_args: list[str], *, name: str, log_dir: Path
    ) -> None:
        # The environment says one job at once, and no handle or standby children.
        super().__init__(
            settings,
            WorkerSettings(concurrency=1, max_handles=0, standby=False),
            name=name,
            log_dir=log_dir,
            cwd=REPO,
        )
        self.app = app
        self.celery_args = celery_args

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            self.app,
            "worker",
            "--loglevel",
            "INFO",
            "-Q",
            self.settings.queue,
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"{self.name}-{time.monotonic_ns()}@%h",
            *self.celery_args,
        ]


@pytest.fixture
def celery_workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        proc.stop()
        assert not proc.alive(), f"{proc.name} left processes behind"


@pytest.mark.parametrize(("app", "flag"), [("workers", "-c"), ("workers.app", "--concurrency")])
async def test_celery_concurrency_sizes_the_isolate_pool(
    app: str, flag: str, private_queue: BrokerSettings, celery_workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """``celery -A workers worker -c 3`` with ``CODEMODE_WORKER_CONCURRENCY=1``: Celery takes
    three jobs at once, so the isolate pool has three children for them. Three jobs sent
    together to the idle worker all run (the pool sized from the environment refused the
    ones past its one child and its line of one with QUEUE_FULL)."""
    worker = CeleryCommandWorker(private_queue, app, [flag, "3"], name="celery-c3", log_dir=tmp_path)
    celery_workers.append(worker)
    worker.start(timeout_s=90)
    assert "concurrency=3" in worker.log_text()
    async with FleetExecutor(settings=private_queue, queue_timeout=60_000) as ex:
        outcomes = await asyncio.gather(*(ex.execute(HOLD, timeout=20_000) for _ in range(3)))
    assert [o.result for o in outcomes] == [1, 1, 1], [o.error for o in outcomes]


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["--autoscale", "4,1"], "not --autoscale"),
        (["--prefetch-multiplier", "4"], "leave --prefetch-multiplier at 1"),
    ],
)
def test_a_start_whose_size_would_drift_is_refused(args: list[str], sentence: str) -> None:
    """Nothing to connect to: the refusal comes at start, before Redis is asked."""
    env = {**os.environ, "CODEMODE_REDIS_URL": "redis://127.0.0.1:1/0"}
    proc = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "workers", "worker", *args],
        capture_output=True,
        timeout=90,
        env=env,
        cwd=REPO,
    )
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    assert proc.returncode != 0, out
    assert sentence in out
    assert "Traceback" not in out


NOT_INSTALLED = """
import sys


class _NotInstalled:
    \"\"\"The repository's deployment is not installed: workers and broker_config do not import.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("workers", "broker_config"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


async def test_codemode_worker_runs_from_the_installed_library_alone(
    private_queue: BrokerSettings, celery_workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """``codemode worker`` from a directory that is not the repository, with the repository
    on no path and its ``workers`` and ``broker_config`` refused at import (as after a plain
    ``pip install 'codemode[fleet]'``): the worker starts and runs a job."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOT_INSTALLED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    worker = WorkerProcess(
        private_queue,
        WorkerSettings(concurrency=1, max_handles=0, standby=False),
        env={"PYTHONPATH": str(site)},
        log_dir=tmp_path,
        name="installed",
        cwd=elsewhere,
    )
    celery_workers.append(worker)
    worker.start(timeout_s=90)
    async with FleetExecutor(settings=private_queue, queue_timeout=60_000) as ex:
        assert (await ex.execute("() => 6 * 7")).result == 42
    assert "No module named" not in worker.log_text()


def test_solo_keeps_the_concurrency_it_is_given() -> None:
    """``codemode worker`` passes its own concurrency to Celery, whatever the pool: with
    ``solo`` too (jobs never go through Celery's pool), four means four jobs at once (it
    was quietly one, while Celery started with ``-c`` took more)."""
    settings = WorkerSettings.from_env({ENV_WORKER_CONCURRENCY: "4", ENV_WORKER_POOL: "solo"})
    assert settings.concurrency == 4
    argv = celery_argv(BrokerSettings(), settings)
    assert argv[argv.index("--concurrency") + 1] == "4"


@pytest.mark.parametrize("how", ["SIGTERM to the worker", "SIGINT to its process group"])
async def test_a_stopping_worker_replaces_no_child(
    how: str, private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A warm shutdown ends the isolate children without calling them replaced, and starts
    none. Ctrl+C in a terminal reaches the whole process group: the children ignore it, and
    the worker ends them as it closes (they died of it, were "replaced", and died again)."""
    worker = start_worker(private_queue, concurrency=2, name="stopping")
    async with FleetExecutor(settings=private_queue) as ex:
        assert (await ex.execute("() => 2")).result == 2
    assert worker.proc is not None
    if how.startswith("SIGTERM"):
        worker.proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(worker.proc.pid, signal.SIGINT)
    assert await asyncio.to_thread(worker.proc.wait, 60) is not None
    log = worker.log_text()
    assert "Warm shutdown" in log, log[-2000:]
    assert "replacing it" not in log, log[-2000:]
    assert "exited unexpectedly" not in log, log[-2000:]
