"""An example producer: one host, tools that stay here, programs that run on the fleet.

CODEMODE_REDIS_URL=redis://localhost:6379/0 python docker/producer.py
"""

from __future__ import annotations

import asyncio

from codemode import ExecutorError, ToolRegistry
from codemode.fleet import FleetExecutor

ORDERS = [
    {"id": "o-1", "user": "ada", "total": 12.5},
    {"id": "o-2", "user": "ada", "total": 30.0},
    {"id": "o-3", "user": "bob", "total": 7.25},
]

tools = ToolRegistry()


@tools.tool("store", "listOrders")
def list_orders(user: str) -> list[dict[str, object]]:
    return [order for order in ORDERS if order["user"] == user]


PROGRAM = """async () => {
  const orders = await store.listOrders('ada');
  const totals = await Promise.all(orders.map(async (o) => o.total));
  console.log(`found ${orders.length} orders`);
  return totals.reduce((a, b) => a + b, 0);
}"""


async def main() -> None:
    async with FleetExecutor(timeout=5_000) as executor:
        for attempt in range(30):
            try:
                outcome = await executor.execute(
                    PROGRAM, providers=tools.providers(), dispatch=tools.dispatch
                )
            except ExecutorError as exc:
                if not exc.retryable or exc.started:
                    raise
                print(f"attempt {attempt + 1}: {exc.code}, retrying")
                await asyncio.sleep(1)
                continue
            print(
                "result:",
                outcome.result,
                "error:",
                outcome.error,
                "logs:",
                [entry.text for entry in outcome.logs],
            )
            return


if __name__ == "__main__":
    asyncio.run(main())
