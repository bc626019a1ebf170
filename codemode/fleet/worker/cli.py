"""``codemode worker`` (and the repository's ``python -m workers``): start one codemode
Celery worker, from an installed codemode alone.

::

    codemode worker [--redis-url URL] [--queue NAME] [--concurrency N]
                      [--pool threads|solo] [--loglevel INFO] [--hostname NAME]
                      [--wait-for-redis SECONDS] [--events | -E] [--metrics-port PORT]

Flags override the environment (``CODEMODE_REDIS_URL``, ``CODEMODE_QUEUE``,
``CODEMODE_WORKER_CONCURRENCY``, ``CODEMODE_WORKER_POOL``, ``CODEMODE_METRICS_PORT``); every
other setting, such as
``CODEMODE_WORKER_MAX_HANDLES`` and ``CODEMODE_HANDLE_IDLE_TTL_S`` for retained handles, comes
from the environment only (see ``codemode/fleet/settings.py``). The worker runs until SIGTERM (warm
shutdown: running jobs finish) or SIGINT.

Before Celery starts, the command checks everything it can say in one sentence: a flag or
setting that is malformed (exit 2, naming the flag or the variable), the fleet extra not
installed (exit 2), Redis not answering (said on the first line; the worker waits for it,
or, with ``--wait-for-redis SECONDS``, gives up after that long with exit 1).

It consumes ``--queue`` and a queue of its own, ``codemode.worker.<worker id>``, where the
invocations of the handles it retains arrive (``celery_argv`` names both when given the
worker's own queue; the app adds it in any case, ``app.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from ..settings import (
    ENV_QUEUE,
    ENV_REDIS_URL,
    ENV_WORKER_CONCURRENCY,
    ENV_WORKER_METRICS_PORT,
    ENV_WORKER_POOL,
    BrokerSettings,
    SettingsError,
    WorkerSettings,
    check_redis_url,
)

__all__ = ["EXIT_USAGE", "LOG_LEVELS", "celery_argv", "main"]

EXIT_USAGE = 2
"""Bad arguments, a malformed setting, or the fleet extra missing: nothing to retry."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")
"""What Celery's ``--loglevel`` accepts (in any case)."""

FLEET_MODULES = frozenset({"celery", "kombu", "redis", "billiard", "hiredis", "vine", "click"})
"""Top-level modules of the ``fleet`` extra: one of them missing means it is not installed."""

INSTALL_HINT = "Install the fleet extra: pip install 'codemode[fleet]'."


def _loglevel(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return level


def _concurrency(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of jobs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a TCP port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"expected a port from 1 to 65535 (0: no metrics server), got {value}"
        )
    return value


def _redis_url(text: str) -> str:
    try:
        check_redis_url(text, "the URL")
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode worker",
        description="Run a codemode Celery worker: it takes execute jobs from Redis and runs "
        "them on its own isolate pool.",
    )
    parser.add_argument("--redis-url", type=_redis_url, help=f"Redis URL (default: ${ENV_REDIS_URL})")
    parser.add_argument("--queue", help=f"queue to consume (default: ${ENV_QUEUE} or codemode)")
    parser.add_argument(
        "--concurrency",
        type=_concurrency,
        help=f"jobs at once = isolate children (default: ${ENV_WORKER_CONCURRENCY} or 2)",
    )
    parser.add_argument(
        "--pool", choices=("threads", "solo"), help=f"Celery pool (default: ${ENV_WORKER_POOL} or threads)"
    )
    parser.add_argument(
        "--loglevel", type=_loglevel, default="INFO", help=f"one of {', '.join(LOG_LEVELS)} (default: INFO)"
    )
    parser.add_argument("--hostname", help="Celery node name (default: codemode@%%h)")
    parser.add_argument(
        "-E",
        "--events",
        action="store_true",
        help="send task events (for Flower and celery events; without it, `celery control "
        "enable_events` turns them on later)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help=f"serve Prometheus metrics on http://0.0.0.0:PORT/metrics (default: ${ENV_WORKER_METRICS_PORT} "
        "or none; docs/observability.md)",
    )
    parser.add_argument(
        "--wait-for-redis",
        type=_seconds,
        metavar="SECONDS",
        help="give up (exit 1) when Redis has not answered after this long at start "
        "(default: wait for it as long as it takes)",
    )
    return parser


def celery_argv(
    settings: BrokerSettings,
    worker: WorkerSettings,
    *,
    loglevel: str = "INFO",
    hostname: str | None = None,
    own_queue: str | None = None,
    events: bool = False,
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
        # No mingle or gossip: workers share nothing but the queue, and the fleet's own
        # lease keys say who is alive. Heartbeats stay: monitors (Flower) see live workers
        # by them, and they keep the event dispatcher that enable_events turns on.
        "--without-mingle",
        "--without-gossip",
        "--hostname",
        hostname or "codemode@%h",
    ]
    if events:
        argv.append("--task-events")
    return argv


def _apply_flags(args: argparse.Namespace) -> None:
    """The flags go into the environment, where the settings are read from (and where
    ``celery -A workers`` would read them too)."""
    if args.redis_url:
        os.environ[ENV_REDIS_URL] = args.redis_url
    if args.queue:
        os.environ[ENV_QUEUE] = args.queue
    if args.concurrency is not None:
        os.environ[ENV_WORKER_CONCURRENCY] = str(args.concurrency)
    if args.pool:
        os.environ[ENV_WORKER_POOL] = args.pool
    if args.metrics_port is not None:
        os.environ[ENV_WORKER_METRICS_PORT] = str(args.metrics_port)


def _fleet_missing(exc: ModuleNotFoundError, err: TextIO) -> int:
    if (exc.name or "").split(".")[0] not in FLEET_MODULES:
        raise exc
    print(
        f"codemode worker: the fleet is not installed (missing module {exc.name!r}). {INSTALL_HINT}", file=err
    )
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run a worker until it is stopped; returns the exit status (2 for bad arguments or
    settings and a missing fleet extra, 1 when Redis did not answer in time)."""
    err = sys.stderr
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, or arguments argparse refused
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    _apply_flags(args)
    try:
        settings = BrokerSettings.from_env()
        worker = WorkerSettings.from_env()
    except SettingsError as exc:
        print(f"codemode worker: {exc}", file=err)
        return EXIT_USAGE
    try:
        from .app import create_app
        from .redis_wait import wait_for_redis

        made = create_app(settings, worker)
    except ModuleNotFoundError as exc:
        return _fleet_missing(exc, err)
    status = wait_for_redis(settings, args.wait_for_redis, err)
    if status is not None:
        return status
    try:
        made.celery.worker_main(
            celery_argv(
                settings,
                worker,
                loglevel=args.loglevel,
                hostname=args.hostname,
                own_queue=made.runtime.queue,
                events=args.events,
            )
        )
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, str):  # a sentence (the app refuses a start it cannot serve)
            print(f"codemode worker: {code}", file=err)
            return EXIT_USAGE
        return code if isinstance(code, int) else 0
    return 0
