"""The fleet's settings as an operator gives them: every Celery and Redis setting of a
codemode fleet, read from the environment (``CODEMODE_REDIS_URL`` first).

A thin module over :mod:`codemode.fleet.settings`, where the types, their defaults, the
checks and the environment readers live (an installed codemode needs nothing from this
repository). It stays here, beside ``workers/`` and ``docker/``, as the one place an
operator looks up a variable::

    from broker_config import ENV_REDIS_URL, broker_settings
    settings = broker_settings()        # BrokerSettings.from_env()

Every ``ENV_*`` name is a variable the fleet reads; the docker test checks
``docker/compose.yaml`` against them.
"""

from __future__ import annotations

from codemode.fleet.settings import (
    ENV_FLEET_MAX_JOBS,
    ENV_HANDLE_IDLE_TTL_S,
    ENV_HOST_TTL_MS,
    ENV_KEY_PREFIX,
    ENV_KEY_TTL_MS,
    ENV_LEASE_TTL_MS,
    ENV_QUEUE,
    ENV_QUEUE_TIMEOUT_MS,
    ENV_REDIS_URL,
    ENV_RESULT_BACKEND,
    ENV_RESULT_EXPIRES_S,
    ENV_SOCKET_CONNECT_TIMEOUT_S,
    ENV_SOCKET_TIMEOUT_S,
    ENV_UNACKED_RESTORE_INTERVAL_S,
    ENV_VISIBILITY_TIMEOUT_S,
    ENV_WORKER_CONCURRENCY,
    ENV_WORKER_MAX_HANDLES,
    ENV_WORKER_MAX_MESSAGE_BYTES,
    ENV_WORKER_MAX_TIMEOUT_MS,
    ENV_WORKER_MEMORY_MB,
    ENV_WORKER_NETWORK,
    ENV_WORKER_PIN_CPUS,
    ENV_WORKER_POOL,
    ENV_WORKER_STANDBY,
    ENV_WORKER_TOOLS,
    MAX_BLOCKING_WAIT_S,
    MAX_JOB_SECONDS,
    PING_TASK_NAME,
    TASK_NAME,
    WORKER_QUEUE_PREFIX,
    BrokerSettings,
    SettingsError,
    WorkerSettings,
    check_redis_url,
)

__all__ = [
    "ENV_FLEET_MAX_JOBS",
    "ENV_HANDLE_IDLE_TTL_S",
    "ENV_HOST_TTL_MS",
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
    "ENV_WORKER_NETWORK",
    "ENV_WORKER_PIN_CPUS",
    "ENV_WORKER_POOL",
    "ENV_WORKER_STANDBY",
    "ENV_WORKER_TOOLS",
    "MAX_BLOCKING_WAIT_S",
    "MAX_JOB_SECONDS",
    "PING_TASK_NAME",
    "TASK_NAME",
    "WORKER_QUEUE_PREFIX",
    "BrokerSettings",
    "SettingsError",
    "WorkerSettings",
    "broker_settings",
    "check_redis_url",
    "worker_settings",
]


def broker_settings() -> BrokerSettings:
    """The producers' and workers' Redis and Celery settings, from the environment."""
    return BrokerSettings.from_env()


def worker_settings() -> WorkerSettings:
    """This worker process's settings (its pool and bounds), from the environment."""
    return WorkerSettings.from_env()
