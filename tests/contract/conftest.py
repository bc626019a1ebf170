"""The ``executor`` fixture of the contract suite: the same tests, once per arrangement.

* ``inprocess``: :class:`codemode.IsolateExecutor`, a pool of isolate children here.
* ``fleet``: :class:`codemode.fleet.FleetExecutor` against a private redis-server and two
  real worker processes (shared with ``tests/fleet`` for the whole session).

Only the constructor differs; every call in the suite is the same. The fixture is typed as
:class:`codemode.Executor`, so mypy holds both executors to the contract's signatures.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from codemode import Executor, IsolateExecutor
from codemode.fleet import FleetExecutor
from codemode.fleet.testing import SharedFleet, missing_redis_reason

CONTRACT_TIMEOUT_MS = 10_000


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def fleet_settings(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Started only when a fleet-parametrized test asks for it."""
    reason = missing_redis_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the fleet contract tests must run in CI)")
        pytest.skip(reason)
    shared = SharedFleet.acquire()
    try:
        yield shared.settings
    finally:
        SharedFleet.release()


@pytest.fixture(params=["inprocess", pytest.param("fleet", marks=pytest.mark.fleet)])
async def executor(request: pytest.FixtureRequest) -> AsyncIterator[Executor]:
    ex: IsolateExecutor | FleetExecutor
    if request.param == "inprocess":
        ex = IsolateExecutor(timeout=CONTRACT_TIMEOUT_MS, pool={"max_workers": 2, "max_queue": 20})
    else:
        settings = request.getfixturevalue("fleet_settings")
        ex = FleetExecutor(settings=settings, timeout=CONTRACT_TIMEOUT_MS, queue_timeout=30_000)
    async with ex:
        checked: Executor = ex
        yield checked
