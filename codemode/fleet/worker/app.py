"""A codemode worker's Celery app, made from the fleet's settings by :func:`create_app`.

``codemode worker`` (``cli.py``) makes one; the repository's ``workers`` package makes the
same for ``celery -A workers worker`` (or ``-A workers.app``). However a worker is started,
the number of jobs it takes and the isolate pool that runs them agree: Celery lets a worker
hold ``concurrency`` unacked jobs (its prefetch count, with the multiplier at 1), and the
isolate pool is sized from Celery's resolved ``concurrency`` when the worker starts
(``worker_init``), whether it came from ``-c``, ``--concurrency``,
``CODEMODE_WORKER_CONCURRENCY`` or Celery's own configuration. What would break that
agreement (``--autoscale``, a prefetch multiplier other than 1, prefork) is refused at start
with a sentence.

The worker process never forks a process that has loaded V8, and loads none itself: its
isolate pool spawns children. The runtime starts when the worker starts (``worker_init``)
and ends with it (``worker_shutdown``).

Besides the shared queue, every worker consumes a queue of its own,
``codemode.worker.<worker id>`` (added in ``celeryd_after_setup``, so ``celery -A workers.app
worker -Q ...`` gets it too): the invocations and releases of the handles it retains.

Jobs take Celery's request path (``strategy.py``, ``request.py``): a pool thread runs the
task body, which waits for the job on the runtime's loop, and ``DrainJobs`` lets running
jobs end on a warm shutdown. A job's log line is Celery's own ("succeeded in ...", with
the job's summary as its result, or "raised expected: JobFault('CODE: ...')"), written as
it ends; Celery's "received" line is left out below DEBUG (``_quiet_received``): it is
written on the consumer's thread before a job can start.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any, Final

from celery import Celery, bootsteps, signals

from ..settings import ENV_WORKER_CONCURRENCY, BrokerSettings, WorkerSettings
from .canvas import register_canvas
from .runtime import WorkerRuntime
from .tasks import register_tasks

__all__ = ["READY_MARK", "WorkerApp", "create_app", "jobs_at_once"]

READY_MARK: Final = "codemode-worker ready"
"""Printed once the isolate pool is warm and the worker consumes its queue."""

log = logging.getLogger("codemode.fleet.worker")


@dataclass(frozen=True)
class WorkerApp:
    """A worker's Celery app and the runtime its tasks run on."""

    celery: Any
    """The ``celery.Celery`` app (``celery -A`` finds it as ``app``)."""
    runtime: WorkerRuntime
    settings: BrokerSettings


def create_app(settings: BrokerSettings | None = None, worker: WorkerSettings | None = None) -> WorkerApp:
    """The Celery app of one worker process, with its tasks, its runtime and the signals
    that start and stop it; settings not given are read from the environment."""
    settings = BrokerSettings.from_env() if settings is None else settings
    worker = WorkerSettings.from_env() if worker is None else worker
    app = Celery("codemode", set_as_current=True)
    app.conf.update(settings.celery_config())
    app.conf.update(worker.celery_config())
    runtime = WorkerRuntime(settings, worker)
    register_tasks(app, runtime, settings)
    register_canvas(app, runtime, settings, worker)  # before _Lifecycle: its tools load first
    _Lifecycle(app, runtime, settings).connect()
    return WorkerApp(app, runtime, settings)


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


class _Lifecycle:
    """The signal handlers that start, announce and stop one app's runtime (Celery's
    signals are process-wide: each handler looks at its own app only)."""

    def __init__(self, app: Any, runtime: WorkerRuntime, settings: BrokerSettings) -> None:
        self.app = app
        self.runtime = runtime
        self.settings = settings

    def connect(self) -> None:
        self.app.steps["worker"].add(_drain_step(self.runtime))
        signals.after_setup_logger.connect(_quiet_received, weak=False)
        signals.worker_init.connect(self.start, weak=False)
        signals.celeryd_after_setup.connect(self.consume_own_queue, weak=False)
        signals.worker_ready.connect(self.announce, weak=False)
        signals.worker_shutdown.connect(self.stop, weak=False)

    def _ours(self, sender: Any) -> bool:
        app = getattr(sender, "app", None)
        return app is None or app is self.app

    def start(self, sender: Any = None, **_: Any) -> None:
        if not self._ours(sender):
            return
        pool = str(getattr(getattr(sender, "pool_cls", None), "__module__", ""))
        if "prefork" in pool:
            raise SystemExit(
                "codemode workers run with --pool threads or --pool solo: a prefork child must "
                "not run an isolate pool (deadlines are the executor's own, not Celery's)."
            )
        runtime = self.runtime
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

    def consume_own_queue(self, sender: Any = None, instance: Any = None, **_: Any) -> None:
        """After ``-Q`` was applied: add this worker's own queue (handle invocations)."""
        if instance is not None and self._ours(instance):
            instance.app.amqp.queues.select_add(self.runtime.queue)

    def announce(self, sender: Any = None, **_: Any) -> None:
        if not self._ours(sender):
            return
        runtime = self.runtime
        print(
            f"{READY_MARK} worker={runtime.worker_id} queue={self.settings.queue} "
            f"own_queue={runtime.queue} concurrency={runtime.worker.concurrency} "
            f"max_handles={runtime.worker.max_handles}",
            flush=True,
        )

    def stop(self, sender: Any = None, **_: Any) -> None:
        if self._ours(sender):
            self.runtime.close()


class _Drain:
    """What ``DrainJobs`` starts and stops (a bootstep's object)."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self.runtime = runtime

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.runtime.drain()

    def terminate(self) -> None:
        """A cold shutdown waits for nothing (the jobs' messages are restored, unacked)."""


def _drain_step(runtime: WorkerRuntime) -> type[Any]:
    """A bootstep class bound to ``runtime`` (Celery instantiates steps itself)."""

    class DrainJobs(bootsteps.StartStopStep):  # type: ignore[misc]
        """On a warm shutdown, the running jobs end after the consumer stops taking
        messages and before the pool and the hub stop: the hub's last callbacks send their
        acks. (Celery's threads pool waits for its threads too; the solo pool runs a
        job on the consumer's thread.)"""

        name = "codemode.DrainJobs"
        requires = ("celery.worker.components:Pool",)

        def create(self, worker: Any) -> _Drain:
            return _Drain(runtime)

    return DrainJobs


RECEIVED_LOGGER: Final = "celery.worker.strategy"
"""Where Celery logs a task's "received" line (it checks the level once, as its consumer
starts, after the logging is set up)."""


def _quiet_received(loglevel: Any = None, **_: Any) -> None:
    """Leave Celery's per-task "received" line out unless the worker logs at DEBUG."""
    level = logging.getLevelName(loglevel) if isinstance(loglevel, str) else loglevel
    if not isinstance(level, int) or level > logging.DEBUG:
        logging.getLogger(RECEIVED_LOGGER).setLevel(logging.WARNING)
