"""The defaults every executor option takes, and the bounds each option is checked against.

Each is a named constant (units in the name); an option outside its bound is refused with
:class:`codemode.InvalidRequest` naming the option, the value and what is accepted
(docs/bounds.md, "Accepted values")::

    from codemode.limits import DEFAULT_TIMEOUT_MS, MAX_POOL_WORKERS
"""

from __future__ import annotations

from ._config import (
    DEFAULT_COUNT_HOST_WAITS,
    DEFAULT_MAX_LOG_ENTRIES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_TIMEOUT_MS,
    DEFAULT_MAX_WORKERS,
    DEFAULT_MEMORY_LIMIT_MB,
    DEFAULT_TIMEOUT_MS,
    MAX_HANDLE_IDLE_TTL_S,
    MAX_LOG_ENTRIES_BOUND,
    MAX_MEMORY_LIMIT_MB,
    MAX_MESSAGE_BYTES_BOUND,
    MAX_POOL_WORKERS,
    MAX_REQUEST_BYTES_CEILING,
    MAX_TIMEOUT_CEILING_MS,
    MIN_MEMORY_LIMIT_MB,
)

__all__ = [
    "DEFAULT_COUNT_HOST_WAITS",
    "DEFAULT_MAX_LOG_ENTRIES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_TIMEOUT_MS",
    "DEFAULT_MAX_WORKERS",
    "DEFAULT_MEMORY_LIMIT_MB",
    "DEFAULT_TIMEOUT_MS",
    "MAX_HANDLE_IDLE_TTL_S",
    "MAX_LOG_ENTRIES_BOUND",
    "MAX_MEMORY_LIMIT_MB",
    "MAX_MESSAGE_BYTES_BOUND",
    "MAX_POOL_WORKERS",
    "MAX_REQUEST_BYTES_CEILING",
    "MAX_TIMEOUT_CEILING_MS",
    "MIN_MEMORY_LIMIT_MB",
]
