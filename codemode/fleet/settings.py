"""Every Celery and Redis setting of the codemode fleet, typed, with their environment readers.

Producers (:class:`codemode.fleet.FleetExecutor`), workers (``codemode worker``), the tests,
the benchmarks and the docker files all take their settings from here, so a setting is
changed once and named once. Each environment variable has a name constant (``ENV_*``) that
the docker test checks against ``docker/compose.yaml``; the repository's ``broker_config``
package is the operator's view of the same names.

The workload these settings are chosen for: a job is short (its own clock, at most
``DEFAULT_MAX_TIMEOUT_MS``), it must never run twice once started (its tool calls would
repeat), a worker may be killed at any moment, and the producer waits on the job's reply
channel while it runs. Only ``CODEMODE_REDIS_URL`` is usually set; the rest have defaults.

::

    settings = BrokerSettings.from_env()
    app.config_from_object(settings.celery_config())
    client = redis.asyncio.Redis.from_url(settings.redis_url, **settings.redis_kwargs())
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from .._config import (
    MAX_HANDLE_IDLE_TTL_S,
    MAX_MEMORY_LIMIT_MB,
    MAX_MESSAGE_BYTES_BOUND,
    MAX_POOL_WORKERS,
    MAX_TIMEOUT_CEILING_MS,
    MIN_MEMORY_LIMIT_MB,
)

__all__ = [
    "ENV_FLEET_MAX_JOBS",
    "ENV_HANDLE_IDLE_TTL_S",
    "ENV_HOST_TTL_MS",
    "ENV_JOB_KEY",
    "ENV_JOB_KEY_PREVIOUS",
    "ENV_KEY_PREFIX",
    "ENV_KEY_TTL_MS",
    "ENV_LEASE_TTL_MS",
    "ENV_QUEUE",
    "ENV_QUEUE_TIMEOUT_MS",
    "ENV_REDIS_URL",
    "ENV_RESULT_BACKEND",
    "ENV_RESULT_EXPIRES_S",
    "ENV_SOCKET_CONNECT_TIMEOUT_S",
    "ENV_SOCKET_TIMEOUT_S",
    "ENV_UNACKED_RESTORE_INTERVAL_S",
    "ENV_VISIBILITY_TIMEOUT_S",
    "ENV_WORKER_CONCURRENCY",
    "ENV_WORKER_MAX_HANDLES",
    "ENV_WORKER_MAX_MESSAGE_BYTES",
    "ENV_WORKER_MAX_TIMEOUT_MS",
    "ENV_WORKER_MEMORY_MB",
    "ENV_WORKER_METRICS_PORT",
    "ENV_WORKER_NETWORK",
    "ENV_WORKER_PIN_CPUS",
    "ENV_WORKER_POOL",
    "ENV_WORKER_STANDBY",
    "ENV_WORKER_TOOLS",
    "MAX_BLOCKING_WAIT_S",
    "MAX_JOB_SECONDS",
    "MIN_JOB_KEY_CHARS",
    "PING_TASK_NAME",
    "TASK_NAME",
    "WORKER_QUEUE_PREFIX",
    "BrokerSettings",
    "SettingsError",
    "WorkerSettings",
    "check_redis_url",
    "check_tools_path",
]

TASK_NAME: Final = "codemode.execute"
"""The Celery task every producer sends and every worker registers."""

PING_TASK_NAME: Final = "codemode.ping"
"""A task that runs nothing: the worker pushes ``pong`` onto the Redis list the message
names. Celery's own round trip through a queue (``benchmarks/fleet_bench.py`` measures the
fleet's overhead against it), and a check that some worker consumes a queue."""

WORKER_QUEUE_PREFIX: Final = "codemode.worker."
"""Each worker also consumes a queue of its own, this prefix plus its worker id: the
invocations of the handles it retains are sent there (``codemode.fleet.redis.keys.worker_queue``)."""

MAX_BLOCKING_WAIT_S: Final = 2.0
"""The longest any blocking Redis command of the fleet waits (BLPOP on a reply channel;
kombu's own BRPOP waits 1 s). Socket timeouts must be longer than this, or a quiet wait
would be mistaken for a dead connection."""

MAX_JOB_SECONDS: Final = 300 + 300
"""The longest a job can legitimately live: the operator ceiling on a run's clock
(``codemode.limits.DEFAULT_MAX_TIMEOUT_MS``, 300 s) plus the longest queue timeout we accept (300 s).
The visibility timeout must stay well above it."""

ENV_REDIS_URL: Final = "CODEMODE_REDIS_URL"
ENV_QUEUE: Final = "CODEMODE_QUEUE"
ENV_KEY_PREFIX: Final = "CODEMODE_KEY_PREFIX"
ENV_FLEET_MAX_JOBS: Final = "CODEMODE_FLEET_MAX_JOBS"
ENV_QUEUE_TIMEOUT_MS: Final = "CODEMODE_QUEUE_TIMEOUT_MS"
ENV_LEASE_TTL_MS: Final = "CODEMODE_LEASE_TTL_MS"
ENV_HOST_TTL_MS: Final = "CODEMODE_HOST_TTL_MS"
ENV_KEY_TTL_MS: Final = "CODEMODE_KEY_TTL_MS"
ENV_VISIBILITY_TIMEOUT_S: Final = "CODEMODE_VISIBILITY_TIMEOUT_S"
ENV_UNACKED_RESTORE_INTERVAL_S: Final = "CODEMODE_UNACKED_RESTORE_INTERVAL_S"
ENV_SOCKET_TIMEOUT_S: Final = "CODEMODE_SOCKET_TIMEOUT_S"
ENV_SOCKET_CONNECT_TIMEOUT_S: Final = "CODEMODE_SOCKET_CONNECT_TIMEOUT_S"
ENV_RESULT_EXPIRES_S: Final = "CODEMODE_RESULT_EXPIRES_S"
ENV_JOB_KEY: Final = "CODEMODE_JOB_KEY"
ENV_JOB_KEY_PREVIOUS: Final = "CODEMODE_JOB_KEY_PREVIOUS"

MIN_JOB_KEY_CHARS: Final = 32
"""The shortest job key accepted: a random secret, such as
``python -c "import secrets; print(secrets.token_urlsafe(32))"`` prints."""
ENV_RESULT_BACKEND: Final = "CODEMODE_RESULT_BACKEND"

_ENV_BY_FIELD: Final = {
    "redis_url": ENV_REDIS_URL,
    "queue": ENV_QUEUE,
    "key_prefix": ENV_KEY_PREFIX,
    "fleet_max_jobs": ENV_FLEET_MAX_JOBS,
    "queue_timeout_ms": ENV_QUEUE_TIMEOUT_MS,
    "lease_ttl_ms": ENV_LEASE_TTL_MS,
    "host_ttl_ms": ENV_HOST_TTL_MS,
    "key_ttl_ms": ENV_KEY_TTL_MS,
    "visibility_timeout_s": ENV_VISIBILITY_TIMEOUT_S,
    "unacked_restore_interval_s": ENV_UNACKED_RESTORE_INTERVAL_S,
    "socket_timeout_s": ENV_SOCKET_TIMEOUT_S,
    "socket_connect_timeout_s": ENV_SOCKET_CONNECT_TIMEOUT_S,
    "result_expires_s": ENV_RESULT_EXPIRES_S,
    "result_backend": ENV_RESULT_BACKEND,
    "job_key": ENV_JOB_KEY,
    "job_key_previous": ENV_JOB_KEY_PREVIOUS,
}


class SettingsError(ValueError):
    """A fleet setting from the environment is malformed or contradicts another."""


REDIS_URL_SCHEMES: Final = ("redis://", "rediss://", "unix://")


def check_redis_url(url: str, source: str) -> None:
    """Refuse a Redis URL that no client could connect with; ``source`` names where it came
    from (an environment variable, or a command-line flag), so the message points there."""
    if not isinstance(url, str) or not url.startswith(REDIS_URL_SCHEMES):
        raise SettingsError(
            f"{source} must be a Redis URL (redis://host:port/db, rediss://... or "
            f"unix:///path.sock), got {url!r}."
        )


@dataclass(frozen=True)
class BrokerSettings:
    """The fleet's Redis and Celery settings; :meth:`from_env` reads them.

    Units are in the names. Defaults are chosen for the workload described in the module
    docstring; :meth:`__post_init__` refuses combinations that would break it.
    """

    redis_url: str = "redis://localhost:6379/0"
    """Broker and reply channels share one Redis (``CODEMODE_REDIS_URL``)."""
    queue: str = "codemode"
    """The Celery queue execute jobs go to; workers consume it with ``-Q``."""
    key_prefix: str = "codemode"
    """Prefix of every key the fleet writes (reply channels, leases, admission)."""
    fleet_max_jobs: int = 1000
    """Fleet-wide admission bound: jobs queued or running at once, counted in Redis."""
    queue_timeout_ms: int = 30_000
    """How long a job may wait for a worker; a job not started by then never starts."""
    lease_ttl_ms: int = 6_000
    """A worker's lease on a running job; refreshed every third of it. A killed worker is
    noticed within about this long (plus one check interval)."""
    host_ttl_ms: int = 6_000
    """A host's heartbeat key; refreshed every third of it. A dead host is noticed by the
    worker running its job within about this long (plus one lease refresh)."""
    key_ttl_ms: int = 120_000
    """Every per-job key expires this long after it was last touched."""
    visibility_timeout_s: int = 3_600
    """kombu restores an unacked message after this long, even if its job still runs.
    Well above any job's life (``MAX_JOB_SECONDS``); a restored started job refuses to run."""
    unacked_restore_interval_s: int = 10
    """How often a worker sweeps for unacked messages past the visibility timeout."""
    socket_timeout_s: float = 30.0
    """Read timeout on every Redis socket: longer than any blocking wait (``MAX_BLOCKING_WAIT_S``
    and kombu's 1 s BRPOP), short enough that a half-open connection is dropped."""
    socket_connect_timeout_s: float = 3.0
    """Connecting to Redis fails after this long: a producer gets BROKER_UNREACHABLE quickly."""
    result_expires_s: int = 3_600
    """A stored Celery result expires after this long. Execute jobs store none (their
    outcomes travel on the reply channel); canvas jobs (``codemode.run``) store theirs when
    a result backend is set."""
    result_backend: str = ""
    """The Redis URL where canvas jobs (``codemode.run``, ``docs/pipelines.md``) keep their
    results, for groups and chords to collect; empty: no result backend (chains still
    pass results along, nothing is stored)."""
    job_key: str = field(default="", repr=False)
    """When set, producers sign every job with it and workers refuse jobs it did not sign
    (``codemode/fleet/signing.py``, docs/threat-model.md). Empty: jobs are not signed."""
    job_key_previous: str = field(default="", repr=False)
    """Workers also accept jobs signed with this key, while keys rotate (producers always
    sign with ``job_key``)."""

    def __post_init__(self) -> None:
        for name in (
            "fleet_max_jobs",
            "queue_timeout_ms",
            "lease_ttl_ms",
            "host_ttl_ms",
            "key_ttl_ms",
            "visibility_timeout_s",
            "unacked_restore_interval_s",
            "result_expires_s",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{name} must be a positive integer, got {value!r}.")
        if self.lease_ttl_ms < 300 or self.host_ttl_ms < 300:
            raise SettingsError("lease_ttl_ms and host_ttl_ms must be at least 300 ms.")
        if self.queue_timeout_ms > 300_000:
            raise SettingsError("queue_timeout_ms must be at most 300000 (5 minutes).")
        if self.socket_timeout_s <= MAX_BLOCKING_WAIT_S + 1:
            raise SettingsError(
                f"socket_timeout_s must be longer than the longest blocking wait "
                f"({MAX_BLOCKING_WAIT_S} s) plus a margin, got {self.socket_timeout_s}."
            )
        if self.key_ttl_ms < 2 * max(self.lease_ttl_ms, self.host_ttl_ms):
            raise SettingsError("key_ttl_ms must be at least twice the lease and host TTLs.")
        check_redis_url(self.redis_url, ENV_REDIS_URL)
        if self.result_backend:
            check_redis_url(self.result_backend, f"{ENV_RESULT_BACKEND} (the canvas jobs' result backend)")
        self._check_job_keys()

    def _check_job_keys(self) -> None:
        for name, key in ((ENV_JOB_KEY, self.job_key), (ENV_JOB_KEY_PREVIOUS, self.job_key_previous)):
            if not isinstance(key, str):
                raise SettingsError(f"{name} must be text, got {type(key).__name__}.")
            if key and len(key) < MIN_JOB_KEY_CHARS:
                raise SettingsError(
                    f"{name} must be at least {MIN_JOB_KEY_CHARS} characters of random text (got "
                    f'{len(key)}); make one with: python -c "import secrets; '
                    'print(secrets.token_urlsafe(32))"'
                )
        if self.job_key_previous and not self.job_key:
            raise SettingsError(
                f"{ENV_JOB_KEY_PREVIOUS} is set without {ENV_JOB_KEY}: while keys rotate, workers "
                f"take both, and producers sign with {ENV_JOB_KEY}. Set {ENV_JOB_KEY} to the new key."
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> BrokerSettings:
        """Read every ``CODEMODE_*`` variable that is set; ``overrides`` win over both."""
        values = _values_from_env(cls, _ENV_BY_FIELD, environ)
        values.update(overrides)
        return cls(**values)

    def env(self) -> dict[str, str]:
        """These settings as environment variables (to start a worker with the same ones)."""
        return {_ENV_BY_FIELD[f.name]: str(getattr(self, f.name)) for f in fields(self)}

    # ---- Redis (redis-py, used for reply channels, leases and admission) -----------------

    def redis_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``redis.asyncio.Redis.from_url`` (and the sync client)."""
        kwargs: dict[str, Any] = {
            # Longer than any BLPOP the fleet issues, so a quiet channel is not a dead socket.
            "socket_timeout": self.socket_timeout_s,
            # A producer facing a dead Redis raises BROKER_UNREACHABLE after this, not later.
            "socket_connect_timeout": self.socket_connect_timeout_s,
            # Detect half-open sockets on idle pooled connections before reusing them.
            "socket_keepalive": True,
            "health_check_interval": 10,
            # No automatic retries: a retried RPUSH whose first reply was lost would deliver a
            # tool call twice. The fleet decides itself what a lost connection means.
            "retry_on_timeout": False,
            "client_name": "codemode-fleet",
        }
        if self.redis_url.startswith("unix://"):
            del kwargs["socket_keepalive"]  # a TCP option: redis-py's unix connection refuses it
        return kwargs

    # ---- Celery (broker: the same Redis) -------------------------------------------------

    def celery_config(self) -> dict[str, Any]:
        """The Celery configuration of producers and workers, as one mapping."""
        redis_transport = {
            # Well above the longest job: a restored message of a job that still runs (or
            # was started by a worker that died) finds its job claimed and refuses to run.
            "visibility_timeout": self.visibility_timeout_s,
            # Sweep for messages of dead workers this often; every sweep does a real scan.
            "unacked_restore_interval": self.unacked_restore_interval_s,
            "unacked_restore_throttle": 1,
            # Longer than kombu's 1 s BRPOP: a quiet queue is not a dead connection.
            "socket_timeout": self.socket_timeout_s,
            "socket_connect_timeout": self.socket_connect_timeout_s,
            "socket_keepalive": True,
            # kombu also drops a BRPOP connection overdue by brpop_timeout + this.
            "health_check_interval": 10,
            "retry_on_timeout": False,
        }
        return {
            "broker_url": self.redis_url,
            # kombu's Redis transport, with every popped message screened first (no
            # message can stop a worker): see its module.
            "broker_transport": "codemode.fleet.worker.transport:RedisTransport",
            "broker_transport_options": redis_transport,
            # Keep reconnecting forever after Redis restarts, including at worker start-up.
            "broker_connection_retry": True,
            "broker_connection_retry_on_startup": True,
            "broker_connection_max_retries": None,
            "broker_channel_error_retry": True,
            # Execute jobs' outcomes travel on the per-job reply channel and are never
            # stored; canvas jobs store theirs here when one is set (docs/pipelines.md).
            "result_backend": self.result_backend or None,
            "task_ignore_result": True,
            "result_expires": self.result_expires_s,
            # Only plain data crosses: JSON, never pickle.
            "task_serializer": "json",
            "result_serializer": "json",
            "accept_content": ["json"],
            "result_accept_content": ["json"],
            # Ack after the job ran: a message whose worker died stays unacked and is
            # restored, and the claim key makes the redelivery refuse (never a second run).
            "task_acks_late": True,
            # With late acks a failed job is still acked: its outcome was already sent.
            "task_acks_on_failure_or_timeout": True,
            # Requeue a job whose worker process was lost (prefork mechanics; with threads
            # the restore above does it). A started job still refuses to run twice.
            "task_reject_on_worker_lost": True,
            # One message per free thread, and none reserved ahead of a free slot: a job never
            # waits behind a long one on a busy worker while another worker is idle.
            "worker_prefetch_multiplier": 1,
            "worker_disable_prefetch": True,
            # Deadlines are the isolate executor's own (Celery time limits need prefork).
            "task_time_limit": None,
            "task_soft_time_limit": None,
            # A lost broker connection does not cancel running jobs: they finish, and their
            # outcome goes out when Redis is back (the claim stops any redelivery).
            "worker_cancel_long_running_tasks_on_connection_loss": False,
            # Publishing fails fast when Redis is gone: the producer raises BROKER_UNREACHABLE.
            "task_publish_retry": True,
            "task_publish_retry_policy": {
                "max_retries": 2,
                "interval_start": 0,
                "interval_step": 0.2,
                "interval_max": 0.5,
            },
            "task_default_queue": self.queue,
            "task_create_missing_queues": True,
            "task_track_started": False,
            "worker_send_task_events": False,
            "task_send_sent_event": False,
            "worker_hijack_root_logger": False,
            "broker_pool_limit": 10,
        }


# ---- the worker process (Celery pool and the isolate pool it wraps) -----------------------

ENV_WORKER_CONCURRENCY: Final = "CODEMODE_WORKER_CONCURRENCY"
ENV_WORKER_POOL: Final = "CODEMODE_WORKER_POOL"
ENV_WORKER_MEMORY_MB: Final = "CODEMODE_WORKER_MEMORY_MB"
ENV_WORKER_MAX_MESSAGE_BYTES: Final = "CODEMODE_WORKER_MAX_MESSAGE_BYTES"
ENV_WORKER_MAX_TIMEOUT_MS: Final = "CODEMODE_WORKER_MAX_TIMEOUT_MS"
ENV_WORKER_NETWORK: Final = "CODEMODE_WORKER_NETWORK"
ENV_WORKER_MAX_HANDLES: Final = "CODEMODE_WORKER_MAX_HANDLES"
ENV_HANDLE_IDLE_TTL_S: Final = "CODEMODE_HANDLE_IDLE_TTL_S"
ENV_WORKER_PIN_CPUS: Final = "CODEMODE_WORKER_PIN_CPUS"
ENV_WORKER_STANDBY: Final = "CODEMODE_WORKER_STANDBY"
ENV_WORKER_METRICS_PORT: Final = "CODEMODE_METRICS_PORT"
ENV_WORKER_TOOLS: Final = "CODEMODE_WORKER_TOOLS"

_WORKER_ENV: Final = {
    "concurrency": ENV_WORKER_CONCURRENCY,
    "pool": ENV_WORKER_POOL,
    "memory_limit_mb": ENV_WORKER_MEMORY_MB,
    "max_message_bytes": ENV_WORKER_MAX_MESSAGE_BYTES,
    "max_timeout_ms": ENV_WORKER_MAX_TIMEOUT_MS,
    "network": ENV_WORKER_NETWORK,
    "max_handles": ENV_WORKER_MAX_HANDLES,
    "handle_idle_ttl_s": ENV_HANDLE_IDLE_TTL_S,
    "pin_cpus": ENV_WORKER_PIN_CPUS,
    "standby": ENV_WORKER_STANDBY,
    "tools": ENV_WORKER_TOOLS,
    "metrics_port": ENV_WORKER_METRICS_PORT,
}
MIN_MESSAGE_BYTES: Final = 1024
"""The smallest ``max_message_bytes`` the isolate pool accepts."""
_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")


def check_tools_path(path: object) -> None:
    """Refuse a ``CODEMODE_WORKER_TOOLS`` that is not ``package.module:name`` (or empty)."""
    if path == "":
        return
    module, sep, name = path.partition(":") if isinstance(path, str) else ("", "", "")
    if not sep or not name.isidentifier() or not all(part.isidentifier() for part in module.split(".")):
        raise SettingsError(
            f"{ENV_WORKER_TOOLS} must be package.module:name, naming a codemode.ToolRegistry "
            f"(for example myapp.tools:registry), got {path!r}."
        )


def _values_from_env(
    cls: type, env_by_field: Mapping[str, str], environ: Mapping[str, str] | None
) -> dict[str, Any]:
    """The fields of the settings class ``cls`` whose variable (``env_by_field``) is set and
    not empty in ``environ`` (the process environment when None), converted by the field's
    type: a flag for ``bool``, a number for ``int`` and ``float``, the text otherwise."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(cls):
        name = env_by_field[f.name]
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        if f.type == "bool":
            values[f.name] = _flag(name, raw)
            continue
        try:
            values[f.name] = int(raw) if f.type == "int" else float(raw) if f.type == "float" else raw
        except ValueError:
            raise SettingsError(f"{name} must be a number, got {raw!r}.") from None
    return values


def _flag(name: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false (1/0, yes/no, on/off), got {raw!r}.")


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class WorkerSettings:
    """One worker process: how many jobs it runs at once and the isolate pool behind them."""

    concurrency: int = 2
    """Jobs at once, and isolate children for jobs: one job holds one isolate while it
    runs, so the two are equal and a claimed job never waits for an isolate (the pool has
    ``max_handles`` children more, for retained handles). The same with either Celery pool:
    jobs never go through it. A worker started with Celery's own ``-c N`` sizes its isolate
    pool from that instead (``workers/app.py``), so the two never disagree."""
    pool: str = "threads"
    """``threads`` or ``solo``. Never prefork: the worker supervises its own children, and
    no process that forks ever loads V8 (isolates live in spawned children)."""
    memory_limit_mb: int = 128
    """V8 heap bound per isolate (``IsolateExecutor(memory_limit=...)``)."""
    max_message_bytes: int = 1024 * 1024
    """Ceiling on any one message a run sends out, tool replies included."""
    max_timeout_ms: int = 300_000
    """The longest clock a job may ask for; longer requests fail with INVALID_REQUEST."""
    network: str = "network"
    """What ``outbound`` left out means on this worker: ``network`` (its own) or ``none``."""
    max_handles: int = 1
    """Retained handles this worker keeps at once (``retain_handles=True`` jobs). Each holds
    an isolate child of its own, on top of the ``concurrency`` children that run jobs; a
    job that would retain one more fails with QUEUE_FULL (nothing ran). 0 turns handles off."""
    handle_idle_ttl_s: float = 300.0
    """A retained handle not invoked for this long is released (HANDLE_EXPIRED afterwards)."""
    pin_cpus: bool = True
    """Pin each isolate child to one core (``pool.pin_cpus``, see docs/performance.md).
    Best where the worker has the machine to itself. On a machine it shares with Redis and
    the producers, unpinned children can be faster for jobs with a few tool calls and
    pinned ones for longer chains of calls (benchmarks/README.md has the measurements)."""
    standby: bool = True
    """Keep a standby isolate child that takes the place of one that exits (``pool.standby``,
    see docs/performance.md): a child that exits is replaced in a fraction of the time a
    fresh start takes, for the private memory of one idle child per worker
    (benchmarks/README.md has the numbers)."""
    tools: str = ""
    """``package.module:name``, a :class:`codemode.ToolRegistry` serving the tool calls of
    canvas jobs (``codemode.run``, which have no host to call back); imported when the
    worker starts, which refuses a path that names none. Empty: canvas jobs have no tools."""
    metrics_port: int = 0
    """Serve Prometheus metrics on this TCP port (``/metrics``, docs/observability.md);
    0: no metrics server."""

    def __post_init__(self) -> None:
        if self.pool not in ("threads", "solo"):
            raise SettingsError(
                f"{ENV_WORKER_POOL} must be threads or solo (prefork children must not run "
                f"isolate pools), got {self.pool!r}."
            )
        if self.network not in ("network", "none"):
            raise SettingsError(f"{ENV_WORKER_NETWORK} must be network or none.")
        for name in ("concurrency", "memory_limit_mb", "max_message_bytes", "max_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{name} must be a positive integer, got {value!r}.")
        self._check_pool_bounds()
        port = self.metrics_port
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise SettingsError(
                f"{ENV_WORKER_METRICS_PORT} must be a TCP port from 1 to 65535, or 0 for no metrics "
                f"server, got {port!r}."
            )
        if (
            isinstance(self.max_handles, bool)
            or not isinstance(self.max_handles, int)
            or self.max_handles < 0
        ):
            raise SettingsError(f"max_handles must be an integer >= 0, got {self.max_handles!r}.")
        ttl = self.handle_idle_ttl_s
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
            raise SettingsError(f"handle_idle_ttl_s must be a positive number, got {ttl!r}.")
        for name in ("pin_cpus", "standby"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise SettingsError(f"{name} must be true or false, got {value!r}.")
        check_tools_path(self.tools)
        if ttl > MAX_HANDLE_IDLE_TTL_S:
            raise SettingsError(
                f"{ENV_HANDLE_IDLE_TTL_S} must be at most {MAX_HANDLE_IDLE_TTL_S:g} s (a day), got {ttl!r}."
            )

    def _check_pool_bounds(self) -> None:
        """The bounds the worker's isolate pool will apply, checked at start: a worker the
        pool would refuse stops with a sentence naming the variable, not later, as it builds
        its pool."""
        if not MIN_MEMORY_LIMIT_MB <= self.memory_limit_mb <= MAX_MEMORY_LIMIT_MB:
            raise SettingsError(
                f"{ENV_WORKER_MEMORY_MB} must be from {MIN_MEMORY_LIMIT_MB} to {MAX_MEMORY_LIMIT_MB} "
                f"(MB of V8 heap per isolate), got {self.memory_limit_mb}."
            )
        children = self.concurrency + self.max_handles
        if children > MAX_POOL_WORKERS:
            raise SettingsError(
                f"{ENV_WORKER_CONCURRENCY} plus {ENV_WORKER_MAX_HANDLES} must be at most "
                f"{MAX_POOL_WORKERS} (one isolate child each), got {self.concurrency} + "
                f"{self.max_handles} = {children}. Run more workers instead."
            )
        if self.max_timeout_ms > MAX_TIMEOUT_CEILING_MS:
            raise SettingsError(
                f"{ENV_WORKER_MAX_TIMEOUT_MS} must be at most {MAX_TIMEOUT_CEILING_MS} (an hour), "
                f"got {self.max_timeout_ms}."
            )
        if not MIN_MESSAGE_BYTES <= self.max_message_bytes <= MAX_MESSAGE_BYTES_BOUND:
            raise SettingsError(
                f"{ENV_WORKER_MAX_MESSAGE_BYTES} must be from {MIN_MESSAGE_BYTES} to "
                f"{MAX_MESSAGE_BYTES_BOUND}, got {self.max_message_bytes}."
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> WorkerSettings:
        values = _values_from_env(cls, _WORKER_ENV, environ)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def env(self) -> dict[str, str]:
        return {_WORKER_ENV[f.name]: _env_text(getattr(self, f.name)) for f in fields(self)}

    def celery_config(self) -> dict[str, Any]:
        return {
            # Threads (or solo): the task body waits on the worker's own event loop.
            "worker_pool": self.pool,
            "worker_concurrency": self.concurrency,
        }
