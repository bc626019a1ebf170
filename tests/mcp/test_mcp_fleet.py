"""MCP tools on the fleet: the host holds the MCP session, the program runs on a Celery
worker, and its calls come back over the job's reply channel in Redis."""

from __future__ import annotations

import os
from collections.abc import Iterator

import anyio
import pytest
from mcp_helpers import stdio_upstream

from codemode.fleet import FleetExecutor
from codemode.fleet.testing import SharedFleet, missing_redis_reason
from codemode.mcp import McpTools

pytestmark = pytest.mark.fleet


@pytest.fixture(scope="module")
def fleet() -> Iterator[SharedFleet]:
    reason = missing_redis_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the fleet tests must run in CI)")
        pytest.skip(reason)
    shared = SharedFleet.acquire()
    try:
        yield shared
    finally:
        SharedFleet.release()


def test_a_fleet_program_calls_an_mcp_server_held_by_the_host(fleet: SharedFleet) -> None:
    async def main() -> object:
        with anyio.fail_after(180):
            return await served()

    async def served() -> object:
        async with (
            McpTools([stdio_upstream()]) as tools,
            FleetExecutor(settings=fleet.settings, queue_timeout=30_000) as executor,
        ):
            outcome = await executor.execute(
                """async () => {
                    const [sum, forecast] = await Promise.all([
                        up.add({ a: 20, b: 22 }), up.get_forecast({ city: 'Lima' })])
                    let refused
                    try { await up.refuse({ reason: 'fleet says no' }) } catch (e) { refused = e.message }
                    return [sum.result, forecast, refused]
                }""",
                providers=tools.providers(),
                dispatch=tools.dispatch,
                timeout=60_000,
            )
        assert outcome.error is None, outcome.error
        return outcome.result

    result = anyio.run(main)
    assert isinstance(result, list)
    assert result[:2] == [42, "Lima: sunny for 1 day(s)"]
    assert "fleet says no" in result[2]
