"""codemode as a fleet: producers enqueue execute jobs onto Redis, Celery workers run them.

:class:`FleetExecutor` keeps the contract of :class:`codemode.IsolateExecutor` (the same
``execute``, ``invoke_handle`` and ``release_handle``, the same Outcome, the same faults,
``aclose()``/``dispose()``, ``async with``); tool calls and outbound requests travel back to
the host that enqueued the job, on that job's reply channel in Redis, while the program runs.

Layout::

    _client.py     FleetExecutor: validate, admit and enqueue, wait
    _session.py    the host's side of one job (reply channel, dispatch, policy, liveness)
    _producer.py   a job's Celery task message (the admission script enqueues it)
    _clock.py      Redis time as the host estimates it (a job's start-by time)
    _heartbeat.py  the host's heartbeat key
    _jobrunner.py  the worker's side of one job (claim, lease, relay); liveness keys
    _handles.py    retained handles: the host's table, the worker's table and routes
    _runtime.py    the worker process's event loop, isolate pool and Redis client
    _scripts.py    the Lua scripts: admission, claim, heartbeat, settle
    _channel.py    reply channels: Redis lists with expiries
    _wire.py       msgspec messages: the job and both channel directions
    _keys.py       the keyspace and what expires when
    _transport.py  kombu's Redis transport as the fleet runs it (no message stops a consumer)
    _deadletter.py <queue>.dead: the messages a worker could not take, with their reasons
    _errors.py     Redis/kombu errors as BROKER_UNREACHABLE; the fleet's sentences
    testing.py     a private redis-server and worker processes, for tests and benchmarks

Settings come from ``settings.py`` (environment variables, ``CODEMODE_REDIS_URL`` first).
"""

from ._client import FleetExecutor
from ._errors import BROKER_LOST_TEXT
from ._runtime import WorkerRuntime

__all__ = ["BROKER_LOST_TEXT", "FleetExecutor", "WorkerRuntime"]
