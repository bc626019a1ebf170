"""Bounds as small validated config objects; every default is a named constant.

``UNSET`` marks "use the executor's own setting" and is distinct from ``None`` (for
``outbound``, ``None`` means *no network at all*).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Final, TypeVar

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
    "MAX_HANDLE_IDLE_TTL_S",
    "MAX_LOG_ENTRIES_BOUND",
    "MAX_MEMORY_LIMIT_MB",
    "MAX_MESSAGE_BYTES_BOUND",
    "MAX_POOL_WORKERS",
    "MAX_REQUEST_BYTES_CEILING",
    "MAX_TIMEOUT_CEILING_MS",
    "MIN_MEMORY_LIMIT_MB",
    "UNSET",
    "Ceilings",
    "ExecutorConfig",
    "PoolConfig",
    "Unset",
    "check_bool",
    "check_child_env",
    "check_handle_idle_ttl",
    "check_int",
    "check_memory_limit",
    "config_object",
    "physical_memory_mb",
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
"""The smallest ``memory_limit`` accepted."""
MAX_MEMORY_LIMIT_MB: Final = 4096
"""The largest ``memory_limit``: V8's heap cannot grow past 4 GB (its pointer-compression
cage), whatever it is told. A limit above the machine's physical memory is refused too."""
MAX_POOL_WORKERS: Final = 128
"""The largest ``pool.max_workers``. Each worker is a child process with an engine of its
own (tens of MB before its first run), and a child runs on one core at a time: more
children than cores only wait for the CPU."""
MAX_MESSAGE_BYTES_BOUND: Final = 64 * 1024 * 1024
"""The largest ``max_message_bytes``: a message crosses the child's pipe in one frame
(``_protocol.MAX_FRAME_BYTES``, 256 MB) with room for its encoding."""
MAX_LOG_ENTRIES_BOUND: Final = 100_000
"""The largest ``max_log_entries``: every entry kept travels back with the outcome."""
MAX_TIMEOUT_CEILING_MS: Final = 3_600_000
"""The largest ``ceilings.max_timeout_ms`` (an hour): a run holds a child for its whole clock."""
MAX_REQUEST_BYTES_CEILING: Final = 64 * 1024 * 1024
"""The largest ``ceilings.max_request_bytes``: a request crosses to its child in one frame."""
MAX_HANDLE_IDLE_TTL_S: Final = 86_400.0
"""The largest ``handle_idle_ttl`` (a day): a retained isolate holds a child until then."""


def check_int(
    name: str, value: object, *, minimum: int = 1, maximum: int | None = None, unit: str = ""
) -> int:
    """``value`` as an integer in ``[minimum, maximum]``, or InvalidRequest naming the option,
    the value and the accepted range."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        accepted = (
            f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}"
        )
        raise InvalidRequest(f"{name} must be {accepted}{unit}, got {value!r}.")
    return value


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} must be True or False, got {value!r}.")
    return value


def physical_memory_mb() -> int | None:
    """The machine's physical memory in MB (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return None


def check_memory_limit(value: object) -> int:
    """``memory_limit`` in MB: from MIN_MEMORY_LIMIT_MB to MAX_MEMORY_LIMIT_MB, and no more
    than the machine has."""
    mb = check_int(
        "memory_limit", value, minimum=MIN_MEMORY_LIMIT_MB, maximum=MAX_MEMORY_LIMIT_MB, unit=" (MB)"
    )
    physical = physical_memory_mb()
    if physical is not None and mb > physical:
        raise InvalidRequest(
            f"memory_limit must be at most this machine's physical memory ({physical} MB), got {mb}."
        )
    return mb


def check_child_env(value: object) -> dict[str, str] | None:
    """``child_env``: None (the host's PATH, locale and ``CODEMODE_*`` variables) or a mapping
    of names to values, both strings that an environment can hold."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"child_env must be a mapping of variable names to string values, or None; got {value!r}."
        )
    for key, text in value.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise InvalidRequest(
                f"child_env: {key!r} is not a variable name (a non-empty string without '=' or NUL)."
            )
        if not isinstance(text, str) or "\0" in text:
            raise InvalidRequest(f"child_env[{key!r}] must be a string without NUL, got {text!r}.")
    return dict(value)


def check_handle_idle_ttl(value: object) -> float:
    """``handle_idle_ttl`` in seconds: a positive finite number up to MAX_HANDLE_IDLE_TTL_S."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value <= MAX_HANDLE_IDLE_TTL_S
    ):
        raise InvalidRequest(
            f"handle_idle_ttl must be a number of seconds above 0 and at most "
            f"{MAX_HANDLE_IDLE_TTL_S:.0f}, got {value!r}."
        )
    return float(value)


@dataclass(frozen=True)
class PoolConfig:
    """How many children run isolates, and how many calls may wait for one."""

    max_workers: int = DEFAULT_MAX_WORKERS
    max_queue: int = DEFAULT_MAX_QUEUE
    """Calls that may wait while every child is busy; 0 means no line: a call is served
    only when a child is free (or starting for it)."""
    pin_cpus: bool = True
    """Pin each child to one core, spread over the cores this process may use (see
    ``_host/placement.py``); turn off when something else places the processes."""
    standby: bool = True
    """Keep one more child started, its engine loaded, to take the place of a child that
    exits (a crash, a kill, a recycle): the slot serves again in milliseconds instead of
    the ~100 ms a new process needs. It costs ~27 MB of private memory and holds no
    isolate; turn off where that memory matters more than recovery time."""

    def __post_init__(self) -> None:
        check_int("pool.max_workers", self.max_workers, maximum=MAX_POOL_WORKERS)
        check_int("pool.max_queue", self.max_queue, minimum=0)
        check_bool("pool.pin_cpus", self.pin_cpus)
        check_bool("pool.standby", self.standby)


@dataclass(frozen=True)
class Ceilings:
    """Operator ceilings no request can exceed (a request over one is refused, never clamped)."""

    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        check_int("ceilings.max_timeout_ms", self.max_timeout_ms, maximum=MAX_TIMEOUT_CEILING_MS)
        check_int("ceilings.max_request_bytes", self.max_request_bytes, maximum=MAX_REQUEST_BYTES_CEILING)


C = TypeVar("C", PoolConfig, Ceilings)


def config_object(name: str, cls: type[C], value: object) -> C:
    """An option given as its config object, a mapping of its fields, or None (the defaults)."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    keys = [f.name for f in fields(cls)]
    accepted = f"{', '.join(keys[:-1])} and {keys[-1]}"
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in keys)
        if unknown:
            raise InvalidRequest(f"{name} takes {accepted}, not {unknown}.")
        return cls(**value)
    raise InvalidRequest(
        f"{name} must be a {cls.__name__}, a mapping with {accepted}, or None; got {value!r}."
    )


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
        if not isinstance(self.pool, PoolConfig):
            raise InvalidRequest(f"pool must be a PoolConfig, got {self.pool!r}.")
        if not isinstance(self.ceilings, Ceilings):
            raise InvalidRequest(f"ceilings must be a Ceilings, got {self.ceilings!r}.")
        check_int("timeout", self.timeout_ms, unit=" (ms)")
        check_memory_limit(self.memory_limit_mb)
        check_bool("count_host_waits", self.count_host_waits)
        check_int("max_message_bytes", self.max_message_bytes, minimum=1024, maximum=MAX_MESSAGE_BYTES_BOUND)
        check_int("max_log_entries", self.max_log_entries, maximum=MAX_LOG_ENTRIES_BOUND)
        if self.timeout_ms > self.ceilings.max_timeout_ms:
            raise InvalidRequest(
                f"timeout {self.timeout_ms} ms is above the operator ceiling "
                f"max_timeout_ms={self.ceilings.max_timeout_ms}."
            )
