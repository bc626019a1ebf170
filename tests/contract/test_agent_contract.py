"""The agent builder's part of the contract, in both arrangements: inputs, a thrown error's
position, live logs and approvals. Typed against :class:`codemode.Executor`, so mypy holds
both executors to the same signatures."""

from __future__ import annotations

import asyncio

import pytest

from codemode import Executor, InvalidRequest, LogEntry, ToolRegistry, normalize_code
from codemode.tools import ToolCall

pytestmark = pytest.mark.anyio


async def test_inputs_reach_the_entry_function(executor: Executor) -> None:
    outcome = await executor.execute(
        "async ({ orderId, lines }) => `${orderId}:${lines.length}`",
        inputs={"orderId": "o-7", "lines": [1, 2]},
    )
    assert outcome.result == "o-7:2"
    assert (await executor.execute("async (...a) => a.length")).result == 0


async def test_inputs_that_are_not_json_are_refused_before_anything_runs(executor: Executor) -> None:
    with pytest.raises(InvalidRequest, match="inputs must be JSON data"):
        await executor.execute("async (x) => x", inputs={"when": object()})  # type: ignore[dict-item]  # wrong on purpose: its refusal is tested


async def test_map_jobs_carry_inputs(executor: Executor) -> None:
    from codemode import Job, Outcome

    results = {
        key: result
        async for key, result in executor.map(Job(n, "async (n) => n + 1", inputs=n) for n in range(4))
    }
    assert {k: r.result for k, r in results.items() if isinstance(r, Outcome)} == {0: 1, 1: 2, 2: 3, 3: 4}


async def test_a_thrown_error_carries_its_position(executor: Executor) -> None:
    code = "async () => {\n  const f = (o) => o.a.b;\n  return f({});\n}"
    outcome = await executor.execute(code)
    assert outcome.error == "Cannot read properties of undefined (reading 'b')"
    detail = outcome.error_detail
    assert detail is not None
    assert (detail.name, detail.line, detail.column) == ("TypeError", 2, 24)
    assert detail.stack == ("at f (program:2:24)", "at program:3:10")


async def test_positions_of_normalized_code_are_in_the_text_the_model_wrote(executor: Executor) -> None:
    """A fenced answer with prose: the throw on the block's 2nd code line is reported on
    its line of the raw text (the prose and the fence line counted)."""
    raw = (
        "Here is the program:\n"
        "\n"
        "```js\n"
        "const order = { lines: [] };\n"
        "  throw new RangeError(`no lines in ${order.lines.length}`);\n"
        "```\n"
        "It fails on purpose."
    )
    code = normalize_code(raw)
    assert code.startswith("async () => {\nconst order")  # wrapped: one line more than the block
    outcome = await executor.execute(code)
    assert outcome.error == "no lines in 0"
    detail = outcome.error_detail
    assert detail is not None
    assert (detail.name, detail.line, detail.column) == (
        "RangeError",
        5,
        9,
    )  # at `new`, where the error was made
    assert detail.stack == ("at program:5:9",)
    one_line = normalize_code("```js\nconst o = null; o.size\n```")  # `return (` added before `o.size`
    detail = (await executor.execute(one_line)).error_detail
    assert detail is not None and (detail.line, detail.column) == (2, 19)
    plain = await executor.execute(str(code))  # a plain str: positions in the code as given
    assert plain.error_detail is not None and (plain.error_detail.line, plain.error_detail.column) == (3, 9)


async def test_on_log_gets_each_entry_as_written(executor: Executor) -> None:
    seen: list[LogEntry] = []
    first = asyncio.Event()

    def on_log(entry: LogEntry) -> None:
        seen.append(entry)
        first.set()

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        await asyncio.wait_for(first.wait(), 30)  # the line before this call arrived already
        return '{"result": 1}'

    outcome = await executor.execute(
        "async () => { console.log('before'); await gate.open(); console.error('after'); return 3 }",
        providers=[{"name": "gate", "tools": ["open"]}],
        dispatch=dispatch,
        on_log=on_log,
    )
    assert outcome.result == 3
    assert seen == outcome.logs == [LogEntry("log", "before"), LogEntry("error", "after")]


async def test_approvals_run_or_refuse_a_call(executor: Executor) -> None:
    asked: list[ToolCall] = []

    async def approve(call: ToolCall) -> bool:
        asked.append(call)
        await asyncio.sleep(0.1)  # a decision that takes a while
        return bool(call.arguments[0] <= 10)

    tools = ToolRegistry(approve=approve)

    @tools.tool("bank", "pay", approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    providers = tools.providers()
    ok = await executor.execute(
        "async () => bank.pay(5)", providers=providers, dispatch=tools.dispatch, count_host_waits=False
    )
    no = await executor.execute(
        "async () => bank.pay(50)", providers=providers, dispatch=tools.dispatch, count_host_waits=False
    )
    assert ok.result == "paid 5"
    assert no.error is not None and no.error.startswith("The host did not approve this call to bank.pay")
    assert [c.arguments for c in asked] == [[5], [50]]
