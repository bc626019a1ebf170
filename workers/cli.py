"""``python -m workers`` / ``codemode worker``: start one codemode Celery worker.

::

    python -m workers [--redis-url URL] [--queue NAME] [--concurrency N]
                      [--pool threads|solo] [--loglevel INFO] [--hostname NAME]

Flags override the environment (``CODEMODE_REDIS_URL``, ``CODEMODE_QUEUE``,
``CODEMODE_WORKER_CONCURRENCY``, ``CODEMODE_WORKER_POOL``); every other setting, such as
``CODEMODE_WORKER_MAX_HANDLES`` and ``CODEMODE_HANDLE_IDLE_TTL_S`` for retained handles, comes
from the environment only (see ``broker_config``). The worker runs until SIGTERM (warm
shutdown: running jobs finish) or SIGINT.

It consumes ``--queue`` and a queue of its own, ``codemode.worker.<worker id>``, where the
invocations of the handles it retains arrive (``celery_argv`` names both when given the
worker's own queue; ``workers.app`` adds it in any case).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from broker_config import (
    ENV_QUEUE,
    ENV_REDIS_URL,
    ENV_WORKER_CONCURRENCY,
    ENV_WORKER_POOL,
    BrokerSettings,
    SettingsError,
    WorkerSettings,
)

__all__ = ["celery_argv", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode worker",
        description="Run a codemode Celery worker: it takes execute jobs from Redis and runs "
        "them on its own isolate pool.",
    )
    parser.add_argument("--redis-url", help=f"Redis URL (default: ${ENV_REDIS_URL})")
    parser.add_argument("--queue", help=f"queue to consume (default: ${ENV_QUEUE} or codemode)")
    parser.add_argument(
        "--concurrency",
        type=int,
        help=f"jobs at once = isolate children (default: ${ENV_WORKER_CONCURRENCY} or 2)",
    )
    parser.add_argument(
        "--pool", choices=("threads", "solo"), help=f"Celery pool (default: ${ENV_WORKER_POOL} or threads)"
    )
    parser.add_argument("--loglevel", default="INFO")
    parser.add_argument("--hostname", help="Celery node name (default: codemode@%%h)")
    return parser


def celery_argv(
    settings: BrokerSettings,
    worker: WorkerSettings,
    *,
    loglevel: str = "INFO",
    hostname: str | None = None,
    own_queue: str | None = None,
) -> list[str]:
    """The ``celery worker`` arguments this command runs with (``own_queue``: the worker's
    own queue, consumed too)."""
    queues = settings.queue if own_queue is None else f"{settings.queue},{own_queue}"
    argv = [
        "worker",
        "--pool",
        worker.pool,
        "--concurrency",
        str(worker.concurrency),
        "--queues",
        queues,
        "--loglevel",
        loglevel,
        # No mingle/gossip/heartbeat events: workers share nothing but the queue, and
        # the fleet's own lease keys say who is alive.
        "--without-mingle",
        "--without-gossip",
        "--without-heartbeat",
        "--hostname",
        hostname or "codemode@%h",
    ]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run a worker until it is stopped; returns the exit status (2 for bad arguments)."""
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, or arguments argparse refused
        return exc.code if isinstance(exc.code, int) else 2
    # The app reads the environment at import: apply the flags there first.
    if args.redis_url:
        os.environ[ENV_REDIS_URL] = args.redis_url
    if args.queue:
        os.environ[ENV_QUEUE] = args.queue
    if args.concurrency is not None and args.concurrency < 1:
        print("codemode worker: --concurrency must be at least 1", file=sys.stderr)
        return 2
    if args.concurrency is not None:
        os.environ[ENV_WORKER_CONCURRENCY] = str(args.concurrency)
    if args.pool:
        os.environ[ENV_WORKER_POOL] = args.pool
    try:
        settings = BrokerSettings.from_env()
        worker = WorkerSettings.from_env()
    except SettingsError as exc:
        print(f"codemode worker: {exc}", file=sys.stderr)
        return 2
    from workers.app import app, runtime

    try:
        app.worker_main(
            celery_argv(
                settings, worker, loglevel=args.loglevel, hostname=args.hostname, own_queue=runtime.queue
            )
        )
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
