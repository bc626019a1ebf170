"""The seed's first real job: a program that calls a host tool and sums the rows. Prints 49."""

import asyncio
import json

from codemode import IsolateExecutor

ORDERS = [
    {"id": "o1", "user": "ada", "total": 42},
    {"id": "o2", "user": "ada", "total": 7},
    {"id": "o3", "user": "grace", "total": 100},
]


async def dispatch(provider: str, tool: str, args_json: str) -> str:
    [user] = json.loads(args_json)
    return json.dumps({"result": [o for o in ORDERS if o["user"] == user]})


async def main() -> None:
    async with IsolateExecutor() as executor:
        outcome = await executor.execute(
            code="""async () => {
                const rows = await store.listOrders('ada')
                return rows.reduce((sum, order) => sum + order.total, 0)
            }""",
            providers=[{"name": "store", "tools": ["listOrders"]}],
            dispatch=dispatch,
        )
        print(outcome.result)  # 49


if __name__ == "__main__":
    asyncio.run(main())
