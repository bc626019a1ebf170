"""The Redis ACL docs/fleet.md gives ("Securing a fleet") works: a fleet whose workers and host
log in as a user without the dangerous commands serves jobs, and the default user is off."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
import redis

from codemode.fleet import FleetExecutor
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import RedisServer, WorkerProcess

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

PASSWORD = "a-long-random-password-" + "p" * 20
ACL_USER = ["ACL", "SETUSER", "codemode", "on", f">{PASSWORD}", "~*", "&*", "+@all", "-@dangerous"]
"""docs/fleet.md's ``ACL SETUSER`` line, word for word."""


async def test_a_fleet_runs_as_an_acl_user_without_dangerous_commands(
    private_redis: RedisServer, start_worker: Callable[..., WorkerProcess]
) -> None:
    admin = redis.Redis.from_url(private_redis.url)
    admin.execute_command(*ACL_USER)  # type: ignore[no-untyped-call]
    admin.execute_command("ACL", "SETUSER", "default", "off")  # type: ignore[no-untyped-call]
    admin.close()
    url = private_redis.url.replace("redis://", f"redis://codemode:{PASSWORD}@", 1)
    with pytest.raises(redis.exceptions.RedisError):
        redis.Redis.from_url(private_redis.url).ping()  # no one else gets in
    settings = replace(BrokerSettings(), redis_url=url)
    start_worker(settings)
    async with FleetExecutor(settings=settings, queue_timeout=60_000) as host:
        assert (await host.execute("async () => 6 * 7")).result == 42
