"""The Celery app of a codemode worker, configured from ``broker_config`` (the environment).

``celery -A workers worker`` (or ``-A workers.app``) works too (the pool defaults to threads
here); the one documented command is ``python -m workers`` (see ``workers/cli.py``).

However a worker is started, the number of jobs it takes and the isolate pool that runs them
agree: Celery lets a worker hold ``concurrency`` unacked jobs (its prefetch count, with the
multiplier at 1), and the isolate pool is sized from Celery's resolved ``concurrency`` when
the worker starts (``worker_init``), whether it came from ``-c``, ``--concurrency``,
``CODEMODE_WORKER_CONCURRENCY`` or Celery's own configuration. What would break that
agreement (``--autoscale``, a prefetch multiplier other than 1, prefork) is refused at start
with a sentence.

The worker process never forks a process that has loaded V8, and loads none itself: its
isolate pool spawns children. The runtime starts when the worker starts (``worker_init``)
and ends with it (``worker_shutdown``).

Besides the shared queue, every worker consumes a queue of its own,
``codemode.worker.<worker id>`` (added in ``celeryd_after_setup``, so ``celery -A workers.app
worker -Q ...`` gets it too): the invocations and releases of the handles it retains.

Jobs do not go through Celery's pool: the consumer hands each one to the runtime
(``workers/strategy.py``), and ``DrainJobs`` lets running jobs end on a warm shutdown,
as the pool would have. A job's log line is its summary (``finished job ...``, ``refused
job ...``), written as it ends. For the tasks that do go through the pool (``codemode.ping``)
Celery's "received" line is left out below DEBUG (``_quiet_received``): written on the
consumer's thread before a task can start, it cost every job 0.35 ms when jobs had it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from celery import Celery, bootsteps, signals

from broker_config import ENV_WORKER_CONCURRENCY, BrokerSettings, WorkerSettings
from codemode.fleet import WorkerRuntime

__all__ = ["READY_MARK", "app", "jobs_at_once", "runtime", "settings"]

READY_MARK = "codemode-worker ready"
"""Printed once the isolate pool is warm and the worker consumes its queue."""

settings = BrokerSettings.from_env()
worker_settings = WorkerSettings.from_env()

app = Celery("codemode", set_as_current=True)
app.conf.update(settings.celery_config())
app.conf.update(worker_settings.celery_config())

runtime = WorkerRuntime(settings, worker_settings)

log = logging.getLogger("codemode.fleet.worker")


def jobs_at_once(worker: Any) -> int:
    """How many jobs Celery lets ``worker`` (its ``WorkController``, at ``worker_init``)
    hold at once: its prefetch count, ``concurrency`` with the multiplier at 1. Raises
    ``SystemExit`` with a sentence for a start whose job count would not be fixed."""
    options = getattr(worker, "options", None) or {}
    if options.get("autoscale"):
        raise SystemExit(
            "codemode workers have a fixed size: start them with --concurrency N (jobs at once, "
            "one isolate child each), not --autoscale; the isolate pool is sized once, at start."
        )
    multiplier = getattr(worker, "prefetch_multiplier", 1)
    if multiplier != 1:
        raise SystemExit(
            f"codemode workers take one job per isolate child: leave --prefetch-multiplier at 1 "
            f"(got {multiplier}) and raise --concurrency for more jobs at once."
        )
    concurrency = getattr(worker, "concurrency", None)
    if isinstance(concurrency, str):  # Celery's "auto": resolved here, so both sides agree
        concurrency = len(os.sched_getaffinity(0))
        worker.concurrency = concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise SystemExit(f"codemode workers need a concurrency of at least 1, got {concurrency!r}.")
    return concurrency


def _start_runtime(sender: Any = None, **_: Any) -> None:
    pool = str(getattr(getattr(sender, "pool_cls", None), "__module__", ""))
    if "prefork" in pool:
        raise SystemExit(
            "codemode workers run with --pool threads or --pool solo: a prefork child must not "
            "run an isolate pool (deadlines are the executor's own, not Celery's)."
        )
    if sender is not None:
        jobs = jobs_at_once(sender)
        if jobs != runtime.worker.concurrency:
            log.info(
                "codemode worker: Celery takes %d jobs at once; the isolate pool follows (%s was %d)",
                jobs,
                ENV_WORKER_CONCURRENCY,
                runtime.worker.concurrency,
            )
            runtime.worker = dataclasses.replace(runtime.worker, concurrency=jobs)
    runtime.start()


def _consume_own_queue(sender: Any = None, instance: Any = None, **_: Any) -> None:
    """After ``-Q`` was applied: add this worker's own queue (handle invocations)."""
    if instance is not None:
        instance.app.amqp.queues.select_add(runtime.queue)


def _announce(sender: Any = None, **_: Any) -> None:
    print(
        f"{READY_MARK} worker={runtime.worker_id} queue={settings.queue} "
        f"own_queue={runtime.queue} concurrency={runtime.worker.concurrency} "
        f"max_handles={runtime.worker.max_handles}",
        flush=True,
    )


def _stop_runtime(**_: Any) -> None:
    runtime.close()


class _Drain:
    """What ``DrainJobs`` starts and stops (a bootstep's object)."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        runtime.drain()

    def terminate(self) -> None:
        """A cold shutdown waits for nothing (the jobs' messages are restored, unacked)."""


class DrainJobs(bootsteps.StartStopStep):  # type: ignore[misc]
    """On a warm shutdown, the running jobs end after the consumer stops taking messages and
    before the pool and the hub stop: the hub's last callbacks send their acks. (The
    consumer hands jobs to the runtime itself, ``workers/strategy.py``: Celery's pool,
    which would wait for them, never holds one.)"""

    requires = ("celery.worker.components:Pool",)

    def create(self, worker: Any) -> _Drain:
        return _Drain()


RECEIVED_LOGGER = "celery.worker.strategy"
"""Where Celery logs a task's "received" line (it checks the level once, as its consumer
starts, after the logging is set up)."""


def _quiet_received(loglevel: Any = None, **_: Any) -> None:
    """Leave Celery's per-task "received" line out unless the worker logs at DEBUG."""
    level = logging.getLevelName(loglevel) if isinstance(loglevel, str) else loglevel
    if not isinstance(level, int) or level > logging.DEBUG:
        logging.getLogger(RECEIVED_LOGGER).setLevel(logging.WARNING)


app.steps["worker"].add(DrainJobs)
signals.after_setup_logger.connect(_quiet_received, weak=False)
signals.worker_init.connect(_start_runtime, weak=False)
signals.celeryd_after_setup.connect(_consume_own_queue, weak=False)
signals.worker_ready.connect(_announce, weak=False)
signals.worker_shutdown.connect(_stop_runtime, weak=False)

import workers.tasks  # noqa: E402,F401  (registers the execute task on ``app``)
