"""Small helpers shared by the fleet tests (imported as ``fleet_helpers``: tests/fleet is on sys.path)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
import redis

from codemode.fleet.redis.keys import JobKeys
from codemode.fleet.testing import missing_redis_reason

T = TypeVar("T")


def require_redis_server() -> None:
    """Skip without a redis-server to start; under CI=true, fail instead."""
    reason = missing_redis_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the fleet tests must run in CI)")
    pytest.skip(reason)


async def eventually(check: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll ``check`` until it returns something truthy (and return that), or fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def job_ids(client: redis.Redis, prefix: str, suffix: str = "claim") -> list[str]:
    """Job ids that have a key ``suffix`` under ``prefix``."""
    ids = []
    for key in client.scan_iter(match=f"{prefix}:job:*:{suffix}"):
        text = key.decode()
        ids.append(text[text.index("{") + 1 : text.index("}")])
    return ids


def keys_of(prefix: str, job_id: str) -> JobKeys:
    return JobKeys.of(prefix, job_id)
