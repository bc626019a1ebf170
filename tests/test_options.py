"""Every option of both executors is checked when the executor is made, and every request
field at ``execute``: a bad value raises INVALID_REQUEST naming the option, the value and
what is accepted, before anything starts. A configuration mistake is never a retryable
fault (a child that fails to start, a crash) later.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from codemode import Ceilings, InvalidRequest, IsolateExecutor, PoolConfig, SyncIsolateExecutor
from codemode._config import (
    MAX_HANDLE_IDLE_TTL_S,
    MAX_LOG_ENTRIES_BOUND,
    MAX_MEMORY_LIMIT_MB,
    MAX_MESSAGE_BYTES_BOUND,
    MAX_POOL_WORKERS,
    MAX_REQUEST_BYTES_CEILING,
    MAX_TIMEOUT_CEILING_MS,
    MIN_MEMORY_LIMIT_MB,
    physical_memory_mb,
)
from codemode.fleet import FleetExecutor
from codemode.fleet.host.client import MAX_FLEET_JOBS, MAX_QUEUE_TIMEOUT_MS
from codemode.fleet.settings import BrokerSettings

MB = 1024 * 1024

# (keyword arguments, what the message must name, the value as the message shows it)
SHARED_BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"timeout": 0}, "timeout", "0"),
    ({"timeout": -5}, "timeout", "-5"),
    ({"timeout": 1.5}, "timeout", "1.5"),
    ({"timeout": "10"}, "timeout", "'10'"),
    ({"timeout": True}, "timeout", "True"),
    ({"timeout": None}, "timeout", "None"),
    ({"timeout": 400_000}, "max_timeout_ms=300000", "400000"),
    ({"count_host_waits": "yes"}, "count_host_waits", "'yes'"),
    ({"count_host_waits": 1}, "count_host_waits", "1"),
    ({"count_host_waits": None}, "count_host_waits", "None"),
    ({"outbound": 5}, "outbound", "got 5"),
    ({"outbound": "none"}, "outbound", "'none'"),
    ({"modules": "x"}, "modules", "str"),
    ({"modules": ["a"]}, "modules", "list"),
    ({"modules": {"a": 5}}, "modules['a']", "int"),
    ({"modules": {"": "x"}}, "modules", "''"),
    ({"modules": {"a": {"type": "wasm", "source": ""}}}, "modules['a']['type']", "'wasm'"),
    ({"max_message_bytes": 1023}, "max_message_bytes", "1023"),
    (
        {"max_message_bytes": MAX_MESSAGE_BYTES_BOUND + 1},
        "max_message_bytes",
        str(MAX_MESSAGE_BYTES_BOUND + 1),
    ),
    ({"max_message_bytes": "1M"}, "max_message_bytes", "'1M'"),
    ({"ceilings": 5}, "ceilings", "5"),
    ({"ceilings": {"max_timeout": 1}}, "ceilings takes max_timeout_ms and max_request_bytes", "max_timeout"),
    ({"ceilings": {"max_timeout_ms": 0}}, "ceilings.max_timeout_ms", "0"),
    (
        {"ceilings": {"max_timeout_ms": MAX_TIMEOUT_CEILING_MS + 1}},
        "ceilings.max_timeout_ms",
        str(MAX_TIMEOUT_CEILING_MS + 1),
    ),
    ({"ceilings": Ceilings(max_timeout_ms=1_000)}, "max_timeout_ms=1000", "10000"),  # below the timeout
    ({"ceilings": {"max_request_bytes": 0}}, "ceilings.max_request_bytes", "0"),
    (
        {"ceilings": {"max_request_bytes": MAX_REQUEST_BYTES_CEILING + 1}},
        "ceilings.max_request_bytes",
        str(MAX_REQUEST_BYTES_CEILING + 1),
    ),
]

IN_PROCESS_BAD: list[tuple[dict[str, Any], str, str]] = [
    *SHARED_BAD,
    ({"memory_limit": MIN_MEMORY_LIMIT_MB - 1}, "memory_limit", str(MIN_MEMORY_LIMIT_MB - 1)),
    ({"memory_limit": MAX_MEMORY_LIMIT_MB + 1}, "memory_limit", str(MAX_MEMORY_LIMIT_MB + 1)),
    ({"memory_limit": 10**9}, "memory_limit", str(10**9)),
    ({"memory_limit": 128.0}, "memory_limit", "128.0"),
    ({"memory_limit": "128"}, "memory_limit", "'128'"),
    ({"pool": 5}, "pool", "5"),
    ({"pool": "big"}, "pool", "'big'"),
    ({"pool": {"workers": 2}}, "pool takes max_workers, max_queue, pin_cpus and standby", "workers"),
    ({"pool": {"max_workers": 0}}, "pool.max_workers", "0"),
    ({"pool": {"max_workers": MAX_POOL_WORKERS + 1}}, "pool.max_workers", str(MAX_POOL_WORKERS + 1)),
    ({"pool": {"max_workers": 1000}}, "pool.max_workers", "1000"),
    ({"pool": {"max_workers": "2"}}, "pool.max_workers", "'2'"),
    ({"pool": {"max_queue": -1}}, "pool.max_queue", "-1"),
    ({"pool": {"max_queue": 1.5}}, "pool.max_queue", "1.5"),
    ({"pool": {"pin_cpus": "yes"}}, "pool.pin_cpus", "'yes'"),
    ({"pool": {"standby": 1}}, "pool.standby", "1"),
    ({"max_log_entries": 0}, "max_log_entries", "0"),
    ({"max_log_entries": MAX_LOG_ENTRIES_BOUND + 1}, "max_log_entries", str(MAX_LOG_ENTRIES_BOUND + 1)),
    ({"child_env": "PATH=/bin"}, "child_env", "'PATH=/bin'"),
    ({"child_env": ["PATH"]}, "child_env", "['PATH']"),
    ({"child_env": {"A": 1}}, "child_env['A']", "1"),
    ({"child_env": {"": "x"}}, "child_env", "''"),
    ({"child_env": {"A=B": "x"}}, "child_env", "'A=B'"),
    ({"child_env": {"A": "x\0y"}}, "child_env['A']", "'x\\x00y'"),
    ({"child_env": {1: "x"}}, "child_env", "1"),
    ({"max_handles": -1}, "max_handles", "-1"),
    ({"max_handles": 3, "pool": {"max_workers": 2}}, "max_handles", "3"),
    ({"max_handles": "1"}, "max_handles", "'1'"),
    ({"max_handles": True}, "max_handles", "True"),
    ({"handle_idle_ttl": 0}, "handle_idle_ttl", "0"),
    ({"handle_idle_ttl": -1}, "handle_idle_ttl", "-1"),
    ({"handle_idle_ttl": math.nan}, "handle_idle_ttl", "nan"),
    ({"handle_idle_ttl": math.inf}, "handle_idle_ttl", "inf"),
    ({"handle_idle_ttl": True}, "handle_idle_ttl", "True"),
    ({"handle_idle_ttl": "300"}, "handle_idle_ttl", "'300'"),
    ({"handle_idle_ttl": MAX_HANDLE_IDLE_TTL_S + 1}, "handle_idle_ttl", str(MAX_HANDLE_IDLE_TTL_S + 1)),
]

FLEET_BAD: list[tuple[dict[str, Any], str, str]] = [
    *SHARED_BAD,
    ({"redis_url": 5}, "redis_url", "5"),
    ({"redis_url": "localhost:6379"}, "redis_url", "'localhost:6379'"),
    ({"queue_timeout": 0}, "queue_timeout", "0"),
    ({"queue_timeout": MAX_QUEUE_TIMEOUT_MS + 1}, "queue_timeout", str(MAX_QUEUE_TIMEOUT_MS + 1)),
    ({"queue_timeout": "30s"}, "queue_timeout", "'30s'"),
    ({"max_jobs": 0}, "max_jobs", "0"),
    ({"max_jobs": MAX_FLEET_JOBS + 1}, "max_jobs", str(MAX_FLEET_JOBS + 1)),
    ({"max_jobs": 2.5}, "max_jobs", "2.5"),
    ({"queue": ""}, "queue", "''"),
    ({"queue": 5}, "queue", "5"),
    ({"queue": "two words"}, "queue", "'two words'"),
    ({"queue": "codemode.worker.abc"}, "queue", "'codemode.worker.abc'"),
    ({"settings": {"redis_url": "redis://x"}}, "settings", "dict"),
    ({"modules": {"a": {"type": "json", "value": {1, 2}}}}, "modules['a']['value']", "set"),
]


def _ids(rows: list[tuple[dict[str, Any], str, str]]) -> list[str]:
    return [f"{','.join(kwargs)}={next(iter(kwargs.values()))!r}"[:60] for kwargs, _, _ in rows]


def _assert_names(fault: InvalidRequest, name: str, shown: str) -> None:
    text = str(fault)
    assert fault.code == "INVALID_REQUEST" and not fault.retryable and not fault.started
    assert name in text, text
    assert shown in text, text


@pytest.mark.parametrize("cls", [IsolateExecutor, SyncIsolateExecutor])
@pytest.mark.parametrize(("kwargs", "name", "shown"), IN_PROCESS_BAD, ids=_ids(IN_PROCESS_BAD))
def test_a_bad_option_is_refused_when_the_executor_is_made(
    cls: type[Any], kwargs: dict[str, Any], name: str, shown: str
) -> None:
    with pytest.raises(InvalidRequest) as info:
        cls(**kwargs)
    _assert_names(info.value, name, shown)


@pytest.mark.parametrize(("kwargs", "name", "shown"), FLEET_BAD, ids=_ids(FLEET_BAD))
def test_a_bad_fleet_option_is_refused_when_the_executor_is_made(
    kwargs: dict[str, Any], name: str, shown: str
) -> None:
    base: dict[str, Any] = {"settings": BrokerSettings()}
    with pytest.raises(InvalidRequest) as info:
        FleetExecutor(**{**base, **kwargs})
    _assert_names(info.value, name, shown)


def _good_edges() -> list[dict[str, Any]]:
    physical = physical_memory_mb() or MAX_MEMORY_LIMIT_MB
    return [
        {"timeout": 1},
        {"timeout": 300_000},
        {"timeout": MAX_TIMEOUT_CEILING_MS, "ceilings": {"max_timeout_ms": MAX_TIMEOUT_CEILING_MS}},
        {"memory_limit": MIN_MEMORY_LIMIT_MB},
        {"memory_limit": min(MAX_MEMORY_LIMIT_MB, physical)},
        {"count_host_waits": False},
        {"pool": None},
        {"pool": PoolConfig(max_workers=1, max_queue=0)},
        {"pool": {"max_workers": MAX_POOL_WORKERS, "max_queue": 0, "pin_cpus": False, "standby": False}},
        {"outbound": None},
        {"outbound": lambda request: None},
        {"modules": None},
        {"modules": {}},
        {"modules": {"a": "export const x = 1", "b": {"type": "json", "value": [1]}}},
        {"max_message_bytes": 1024},
        {"max_message_bytes": MAX_MESSAGE_BYTES_BOUND},
        {"max_log_entries": 1},
        {"max_log_entries": MAX_LOG_ENTRIES_BOUND},
        {"ceilings": None},
        {"ceilings": {"max_request_bytes": 1}},
        {"ceilings": Ceilings(max_request_bytes=MAX_REQUEST_BYTES_CEILING)},
        {"child_env": {}},
        {"child_env": {"PATH": "/usr/bin", "EMPTY": ""}},
        {"max_handles": 0},
        {"max_handles": 2, "pool": {"max_workers": 2}},
        {"handle_idle_ttl": 0.001},
        {"handle_idle_ttl": MAX_HANDLE_IDLE_TTL_S},
    ]


@pytest.mark.parametrize("kwargs", _good_edges(), ids=[",".join(k) for k in _good_edges()])
def test_the_edge_values_are_accepted_and_start_nothing(kwargs: dict[str, Any]) -> None:
    executor = IsolateExecutor(**kwargs)
    assert executor.worker_pids == []
    asyncio.run(executor.aclose())


def test_the_fleet_edge_values_are_accepted() -> None:
    settings = BrokerSettings()
    edge_values: list[dict[str, Any]] = [
        {"queue_timeout": 1},
        {"queue_timeout": MAX_QUEUE_TIMEOUT_MS},
        {"max_jobs": 1},
        {"max_jobs": MAX_FLEET_JOBS},
        {"queue": "codemode-jobs.eu"},
        {"redis_url": "unix:///tmp/redis.sock"},
        {"ceilings": {"max_timeout_ms": 1_000}, "timeout": 1_000},
        {"modules": {"a": {"type": "json", "value": {"k": [1, None]}}}},
    ]
    for kwargs in edge_values:
        executor = FleetExecutor(settings=settings, **kwargs)
        asyncio.run(executor.aclose())


def test_the_smallest_settings_serve_a_run() -> None:
    """The lower edges together still run a program (and memory_limit's upper edge too)."""
    with SyncIsolateExecutor(
        memory_limit=MIN_MEMORY_LIMIT_MB,
        pool={"max_workers": 1, "max_queue": 0, "standby": False},
        max_message_bytes=1024,
        max_log_entries=1,
        max_handles=0,
        child_env={},
    ) as executor:
        outcome = executor.execute("async () => { console.log('a'); console.log('b'); return 6 * 7 }")
        assert outcome.result == 42 and outcome.error is None
        assert outcome.logs[0].text == "a"
    largest = min(MAX_MEMORY_LIMIT_MB, physical_memory_mb() or MAX_MEMORY_LIMIT_MB)
    with SyncIsolateExecutor(memory_limit=largest, pool={"max_workers": 1, "standby": False}) as executor:
        assert executor.execute("() => 42").result == 42


REQUEST_BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"code": 42}, "code", "int"),
    ({"timeout": math.nan}, "timeout", "nan"),
    ({"timeout": math.inf}, "timeout", "inf"),
    ({"timeout": True}, "timeout", "True"),
    ({"timeout": 0}, "timeout", "0"),
    ({"timeout": "5"}, "timeout", "'5'"),
    ({"timeout": 400_000}, "max_timeout_ms=300000", "400000"),
    ({"count_host_waits": "yes"}, "count_host_waits", "'yes'"),
    ({"retain_handles": "yes"}, "retain_handles", "'yes'"),
    ({"modules": "x"}, "modules", "str"),
    ({"modules": {"a": 5}}, "modules['a']", "int"),
    ({"outbound": 5}, "outbound", "got 5"),
    ({"dispatch": 5}, "dispatch", "got 5"),
    ({"providers": "store"}, "providers", "got str"),
    ({"providers": [{"name": "s", "tools": "get"}], "dispatch": print}, "providers[0].tools", "'get'"),
]


@pytest.mark.parametrize(("kwargs", "name", "shown"), REQUEST_BAD, ids=_ids(REQUEST_BAD))
def test_a_bad_request_field_is_refused_by_both_executors_before_anything_starts(
    kwargs: dict[str, Any], name: str, shown: str
) -> None:
    async def main() -> None:
        request = {"code": "() => 1", **kwargs}
        in_process = IsolateExecutor(pool={"max_workers": 1})
        # Nothing listens there: a request refused before it connects never finds out.
        fleet = FleetExecutor(settings=BrokerSettings(redis_url="redis://127.0.0.1:9/0"))
        try:
            for executor in (in_process, fleet):
                with pytest.raises(InvalidRequest) as info:
                    await executor.execute(**request)
                _assert_names(info.value, name, shown)
            assert in_process.worker_pids == []
        finally:
            await in_process.aclose()
            await fleet.aclose()

    asyncio.run(main())
