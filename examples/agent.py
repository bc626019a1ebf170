"""An agent loop in code mode: the model is told about the tools as TypeScript, answers with a
program, the host runs it, and every failure goes back to the model as a sentence to act on.

The model here is a stand-in that replays canned replies (no network): its first answer is
TypeScript with a wrong argument, its second uses an enum (which cannot run as JavaScript),
its third is right. Swap ``ScriptedModel`` for a real client to make it an agent.

    python examples/agent.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Literal

from codemode import IsolateExecutor, ToolRegistry, normalize_code


@dataclasses.dataclass
class Order:
    """An order as the store keeps it."""

    id: str
    user: str
    total: int
    status: Literal["open", "shipped"]


ORDERS = [
    Order("o1", "ada", 42, "shipped"),
    Order("o2", "ada", 7, "open"),
    Order("o3", "grace", 100, "open"),
]

tools = ToolRegistry()


@tools.tool("store", "listOrders")
def list_orders(user: str, status: Literal["open", "shipped"] | None = None) -> list[Order]:
    """A user's orders.

    Args:
        user: The user's id, e.g. "ada".
        status: Only orders in this state; every order when left out.
    """
    return [o for o in ORDERS if o.user == user and (status is None or o.status == status)]


FENCE = "```"
REPLIES = [
    # 1. TypeScript, with a call whose argument does not match: the tool is not called.
    f"""Let me add up Ada's open orders.
{FENCE}ts
const rows: Order[] = await store.listOrders({{ user: "ada" }}, "open")
return rows.reduce((sum: number, o) => sum + o.total, 0)
{FENCE}""",
    # 2. An enum: refused before anything runs, with its line.
    f"""{FENCE}ts
enum Status {{ Open = "open" }}
const rows = await store.listOrders("ada", Status.Open)
return rows.reduce((sum, o) => sum + o.total, 0)
{FENCE}""",
    # 3. Right.
    f"""{FENCE}ts
const [open, all] = await Promise.all([store.listOrders("ada", "open"), store.listOrders("ada")])
console.log(`${{open.length}} of ${{all.length}} orders are open`)
return open.reduce((sum: number, o: Order) => sum + o.total, 0)
{FENCE}""",
]


class ScriptedModel:
    """Answers each turn with the next canned reply, and keeps the conversation it saw."""

    def __init__(self, replies: Sequence[str]) -> None:
        self._replies = list(replies)
        self.seen: list[list[dict[str, str]]] = []

    async def reply(self, messages: list[dict[str, str]]) -> str:
        self.seen.append(list(messages))
        return self._replies.pop(0)


async def run_turn(executor: IsolateExecutor, text: str) -> tuple[bool, str]:
    """One model answer, run: (whether it succeeded, the message that goes back)."""
    try:
        code = normalize_code(text)
    except ValueError as exc:  # no program, or TypeScript that cannot be stripped
        return False, f"Your program could not run: {exc}"
    outcome = await executor.execute(
        code, providers=tools.providers(), dispatch=tools.dispatch, timeout=2_000, outbound=None
    )
    logs = "".join(f"\n[{entry.level}] {entry.text}" for entry in outcome.logs)
    if outcome.error is not None:
        return False, f"Your program failed: {outcome.error}{logs}"
    return True, f"Result: {json.dumps(outcome.result)}{logs}"


async def agent(model: ScriptedModel, task: str, *, max_turns: int = 5) -> str:
    messages = [{"role": "system", "content": tools.prompt()}, {"role": "user", "content": task}]
    async with IsolateExecutor(pool={"max_workers": 1}) as executor:
        for _ in range(max_turns):
            answer = await model.reply(messages)
            messages.append({"role": "assistant", "content": answer})
            done, feedback = await run_turn(executor, answer)
            messages.append({"role": "user", "content": feedback})
            print(feedback, end="\n\n")
            if done:
                return feedback
    return "No answer within the turns allowed."


def main() -> None:
    model = ScriptedModel(REPLIES)
    print(asyncio.run(agent(model, "How much do Ada's open orders come to?")))


if __name__ == "__main__":
    main()
