"""Bounds as small validated config objects; every default is a named constant.

``UNSET`` marks "use the executor's own setting" and is distinct from ``None`` (for
``outbound``, ``None`` means *no network at all*).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Final

from ._faults import InvalidRequest

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
    "UNSET",
    "Ceilings",
    "ExecutorConfig",
    "PoolConfig",
    "Unset",
]


class Unset(enum.Enum):
    """The type of :data:`UNSET`: a field left out, so the executor's setting applies."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET

DEFAULT_TIMEOUT_MS: Final = 10_000
"""The clock one run gets when neither the executor nor the request names one."""
DEFAULT_MEMORY_LIMIT_MB: Final = 128
"""V8 heap bound per isolate; the child process backstop is derived from it."""
DEFAULT_MAX_WORKERS: Final = max(1, min(4, os.cpu_count() or 1))
"""Child processes in the pool: one isolate runs per child at a time."""
DEFAULT_MAX_QUEUE: Final = 100
"""Calls that may wait for a free child; past it ``execute`` raises QUEUE_FULL at once."""
DEFAULT_MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""Ceiling on any single message a run sends out: a tool argument list, a log line, the result."""
DEFAULT_MAX_LOG_ENTRIES: Final = 1_000
"""Log entries kept per run; the rest are counted and replaced by one visible marker."""
DEFAULT_COUNT_HOST_WAITS: Final = True
"""Whether time spent waiting on the host's tools counts against the run's clock."""
DEFAULT_MAX_TIMEOUT_MS: Final = 300_000
"""Operator ceiling: the longest timeout any request may name."""
DEFAULT_MAX_REQUEST_BYTES: Final = 8 * 1024 * 1024
"""Operator ceiling: code plus modules plus provider declarations, in UTF-8 bytes."""
MIN_MEMORY_LIMIT_MB: Final = 16


def _positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidRequest(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return value


@dataclass(frozen=True)
class PoolConfig:
    """How many children run isolates, and how many calls may wait for one."""

    max_workers: int = DEFAULT_MAX_WORKERS
    max_queue: int = DEFAULT_MAX_QUEUE
    pin_cpus: bool = True
    """Pin each child to one core, spread over the cores this process may use (see
    ``_placement.py``); turn off when something else places the processes."""
    standby: bool = True
    """Keep one more child started, its engine loaded, to take the place of a child that
    exits (a crash, a kill, a recycle): the slot serves again in milliseconds instead of
    the ~100 ms a new process needs. It costs ~27 MB of private memory and holds no
    isolate; turn off where that memory matters more than recovery time."""

    def __post_init__(self) -> None:
        _positive_int("pool.max_workers", self.max_workers)
        _positive_int("pool.max_queue", self.max_queue, minimum=0)
        for name in ("pin_cpus", "standby"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise InvalidRequest(f"pool.{name} must be True or False, got {value!r}.")


@dataclass(frozen=True)
class Ceilings:
    """Operator ceilings no request can exceed (a request over one is refused, never clamped)."""

    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        _positive_int("ceilings.max_timeout_ms", self.max_timeout_ms)
        _positive_int("ceilings.max_request_bytes", self.max_request_bytes)


@dataclass(frozen=True)
class ExecutorConfig:
    """Every bound an executor applies; requests may override ``timeout_ms`` only."""

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    count_host_waits: bool = DEFAULT_COUNT_HOST_WAITS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_log_entries: int = DEFAULT_MAX_LOG_ENTRIES
    pool: PoolConfig = field(default_factory=PoolConfig)
    ceilings: Ceilings = field(default_factory=Ceilings)

    def __post_init__(self) -> None:
        _positive_int("timeout", self.timeout_ms)
        _positive_int("memory_limit", self.memory_limit_mb, minimum=MIN_MEMORY_LIMIT_MB)
        _positive_int("max_message_bytes", self.max_message_bytes, minimum=1024)
        _positive_int("max_log_entries", self.max_log_entries)
        if self.timeout_ms > self.ceilings.max_timeout_ms:
            raise InvalidRequest(
                f"timeout {self.timeout_ms} ms is above the operator ceiling "
                f"max_timeout_ms={self.ceilings.max_timeout_ms}."
            )
