"""codemode as a fleet: producers enqueue execute jobs onto Redis, Celery workers run them.

:class:`FleetExecutor` keeps the contract of :class:`codemode.IsolateExecutor` (the same
``execute``, ``invoke_handle`` and ``release_handle``, the same Outcome, the same faults,
``aclose()``/``dispose()``, ``async with``); tool calls and outbound requests travel back to
the host that enqueued the job, on that job's reply channel in Redis, while the program runs.

Layout (the host side and the worker side share only the wire, the errors, the settings
and the Redis plumbing; ``tests/test_layout.py`` checks it)::

    host/          the caller's process: FleetExecutor, a job's session, the producer,
                   the heartbeat, the table of retained handles
    worker/        the Celery worker process: app factory, tasks, strategy, runtime, job
                   runner, reader, leases, transport, dead letters, ``codemode worker``
    redis/         links, reply channels, the Lua scripts (lua/*.lua), keys, clock
    wire.py        msgspec messages: the job and both channel directions
    canvas.py      ``codemode.run`` in Celery canvas: run_signature, CanvasFault (both sides)
    errors.py      Redis/kombu errors as BROKER_UNREACHABLE; the fleet's sentences
    settings.py    every Celery and Redis setting, read from the environment
    testing.py     a private redis-server and worker processes, for tests and benchmarks

Settings come from ``settings.py`` (environment variables, ``CODEMODE_REDIS_URL`` first).
"""

from typing import TYPE_CHECKING, Any

from .errors import BROKER_LOST_TEXT
from .host.client import FleetExecutor

if TYPE_CHECKING:
    from .worker.runtime import WorkerRuntime

__all__ = ["BROKER_LOST_TEXT", "FleetExecutor", "WorkerRuntime"]


def __getattr__(name: str) -> Any:
    """``WorkerRuntime`` is the worker side's: loaded when asked for, not with the host."""
    if name == "WorkerRuntime":
        from .worker.runtime import WorkerRuntime

        return WorkerRuntime
    raise AttributeError(f"module 'codemode.fleet' has no attribute {name!r}")
