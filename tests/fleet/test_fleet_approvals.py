"""Approvals through a fleet: a person's wait in the host outlasts the job's lease and the
host's heartbeat TTL many times over, and the run still ends with the tool's answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from codemode import LogEntry, ToolRegistry
from codemode.fleet import FleetExecutor
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import WorkerProcess
from codemode.tools import ToolCall

pytestmark = [pytest.mark.anyio, pytest.mark.fleet]

SHORT_TTL_MS = 1_000
"""The lease and heartbeat TTLs of this test's fleet: the approval waits several of them."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_an_approval_wait_outlasts_leases_and_heartbeats(
    private_queue: BrokerSettings, start_worker: Callable[..., WorkerProcess]
) -> None:
    settings = replace(private_queue, lease_ttl_ms=SHORT_TTL_MS, host_ttl_ms=SHORT_TTL_MS)
    start_worker(settings, name="approvals")
    wait_s = 5 * SHORT_TTL_MS / 1000

    async def approve(call: ToolCall) -> bool:
        await asyncio.sleep(wait_s)  # a person deciding, far past every TTL
        return True

    tools = ToolRegistry(approve=approve)

    @tools.tool("bank", "pay", approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    seen: list[LogEntry] = []
    async with FleetExecutor(settings=settings, queue_timeout=60_000) as executor:
        began = time.monotonic()
        outcome = await executor.execute(
            "async ({ amount }) => { console.log('asking'); return await bank.pay(amount) }",
            inputs={"amount": 12},
            providers=tools.providers(),
            dispatch=tools.dispatch,
            timeout=1_000,
            count_host_waits=False,
            on_log=seen.append,
        )
        waited = time.monotonic() - began
    assert outcome.error is None, outcome.error
    assert outcome.result == "paid 12"
    assert waited >= wait_s  # the approval was waited for, not cut short
    assert seen == [LogEntry("log", "asking")]
