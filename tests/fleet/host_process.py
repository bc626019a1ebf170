"""A host process for the host-death test: it starts one job whose tool call never
answers, prints ``entered`` when the program is waiting on it, and waits to be killed."""

from __future__ import annotations

import asyncio

from codemode.fleet import FleetExecutor
from codemode.fleet.settings import BrokerSettings

PROGRAM = "async () => { try { await t.slow(); return 'answered' } catch (e) { return e.message } }"


async def main() -> None:
    async with FleetExecutor(settings=BrokerSettings.from_env()) as executor:

        async def dispatch(provider: str, tool: str, args: str) -> str:
            print("entered", flush=True)
            await asyncio.sleep(3600)
            return "{}"

        await executor.execute(
            PROGRAM,
            providers=[{"name": "t", "tools": ["slow"]}],
            dispatch=dispatch,
            count_host_waits=False,
            timeout=120_000,
        )


if __name__ == "__main__":
    asyncio.run(main())
