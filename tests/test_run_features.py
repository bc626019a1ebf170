"""What an agent host hands a run and gets back beyond its result, in process: inputs,
error positions, live logs and approvals (the contract suite runs the same against the
fleet)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from codemode import InvalidRequest, IsolateExecutor, LogEntry, SyncIsolateExecutor, ToolRegistry
from codemode._positions import program_error, syntax_error_position
from codemode.tools import Approve, ToolCall


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


# ---- inputs ---------------------------------------------------------------------------


def test_inputs_are_the_entry_functions_one_argument(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        "async ({ orderId, lines }) => [orderId, lines.length]", inputs={"orderId": 7, "lines": [1, 2]}
    )
    assert outcome.result == [7, 2]
    assert executor.execute("async (n) => n * 2", inputs=21).result == 42
    # Left out (or None): the entry function is called with no argument at all.
    assert executor.execute("async (...a) => a.length").result == 0
    assert executor.execute("async (...a) => a.length", inputs=None).result == 0
    assert executor.execute("async (...a) => a.length", inputs=[]).result == 1


def test_inputs_that_are_not_json_or_too_large_are_refused(executor: SyncIsolateExecutor) -> None:
    with pytest.raises(InvalidRequest, match="inputs must be JSON data"):
        # Not JSON on purpose: the refusal is what is tested.
        executor.execute("async (x) => x", inputs={"when": object()})  # type: ignore[dict-item]
    with pytest.raises(InvalidRequest, match="lone surrogate"):
        executor.execute("async (x) => x", inputs="\ud800")
    small = SyncIsolateExecutor(ceilings={"max_request_bytes": 1024}, pool={"max_workers": 1})
    try:
        with pytest.raises(InvalidRequest, match=r"max_request_bytes=1024.*smaller inputs"):
            small.execute("async (x) => x.length", inputs="x" * 2000)
        assert small.execute("async (x) => x.length", inputs="x" * 100).result == 100
    finally:
        small.dispose()


def test_map_jobs_take_inputs(executor: SyncIsolateExecutor) -> None:
    from codemode import Job

    jobs = [Job(n, "async ({ n }) => n * n", inputs={"n": n}) for n in range(5)]
    results = dict(executor.map(jobs))
    assert {key: outcome.result for key, outcome in results.items()} == {n: n * n for n in range(5)}  # type: ignore[union-attr]  # each job's result is an Outcome here


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_cli_run_takes_inputs_as_json_or_a_file(tmp_path: Path) -> None:
    done = _cli("run", "-e", "async ({ a }) => a + 1", "--inputs", '{"a": 41}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == 42
    (tmp_path / "in.json").write_text("[1, 2, 3]")
    done = _cli("run", "-e", "async (xs) => xs.length", "--inputs-file", "in.json", cwd=tmp_path)
    assert json.loads(done.stdout)["result"] == 3
    done = _cli("run", "-e", "async (x) => x", "--inputs", "{nope", cwd=tmp_path)
    assert done.returncode == 2 and "--inputs is not JSON" in done.stderr and not done.stdout


# ---- positions ------------------------------------------------------------------------


def test_a_thrown_error_carries_its_line_column_and_the_programs_own_frames(
    executor: SyncIsolateExecutor,
) -> None:
    code = "async () => {\n  const total = (o) => {\n    return o.lines.length;\n  };\n  return total({});\n}"
    outcome = executor.execute(code)
    assert outcome.error == "Cannot read properties of undefined (reading 'length')"  # the seed's string
    detail = outcome.error_detail
    assert detail is not None
    assert (detail.name, detail.line, detail.column) == ("TypeError", 3, 20)
    assert detail.stack == ("at total (program:3:20)", "at program:5:10")
    assert detail.message == outcome.error


def test_positions_on_the_first_line_are_in_the_code_as_given(executor: SyncIsolateExecutor) -> None:
    # The runtime puts "(" before the code: a column on line 1 must not count it.
    detail = executor.execute("async () => { await null; null.x }").error_detail
    assert detail is not None and (detail.line, detail.column) == (1, 32)
    assert "async () => { await null; null.x }"[31] == "x"


def test_no_runtime_or_standard_library_frames(executor: SyncIsolateExecutor) -> None:
    code = "async () => {\n  new URL('not a url');\n}"
    detail = executor.execute(code).error_detail
    assert detail is not None and detail.name == "TypeError"
    assert (detail.line, detail.column) == (2, 3)
    assert all("program:" in frame for frame in detail.stack)


def test_a_syntax_error_gets_the_position_of_the_token_the_engine_names(
    executor: SyncIsolateExecutor,
) -> None:
    outcome = executor.execute("async () => {\n  let x = ;\n}")
    assert outcome.error == "Unexpected token ';'"
    detail = outcome.error_detail
    assert detail is not None and (detail.name, detail.line, detail.column) == ("SyntaxError", 2, 11)


def test_a_value_that_is_not_an_error_has_no_position_and_bounds_have_no_detail(
    executor: SyncIsolateExecutor,
) -> None:
    detail = executor.execute("async () => { throw 'plain' }").error_detail
    assert detail is not None and (detail.name, detail.line, detail.stack) == ("", None, ())
    timed_out = executor.execute("async () => { for (;;) {} }", timeout=300)
    assert timed_out.error is not None and timed_out.error_detail is None
    assert executor.execute("async () => 1").error_detail is None


def test_a_program_that_breaks_its_errors_stack_still_fails_with_its_message(
    executor: SyncIsolateExecutor,
) -> None:
    code = """async () => {
      const e = new Error('boom');
      Object.defineProperty(e, 'stack', { get() { throw new Error('no') } });
      Object.defineProperty(e, 'name', { get() { throw new Error('no') } });
      throw e;
    }"""
    outcome = executor.execute(code)
    assert outcome.error == "boom"
    assert outcome.error_detail is not None and outcome.error_detail.line is None


def test_stack_parsing_keeps_module_frames_and_drops_everything_else() -> None:
    stack = (
        "TypeError: bad\n"
        "    at parse (codemode:module/lib/util:4:2)\n"
        "    at Object.get (codemode:runtime:10:1)\n"
        "    at async load (codemode:program:1:30)\n"
        "    at eval (codemode:program:7:3)\n"
        "    at <anonymous>:1:1"
    )
    detail = program_error("TypeError", "bad", stack, "", compiling=False)
    assert (detail.line, detail.column) == (1, 29)
    assert detail.stack == ("at parse (lib/util:4:2)", "at async load (program:1:29)", "at program:7:3")
    assert syntax_error_position("async () => {\n  foo(\n", "Unexpected end of input") == (2, 7)


# ---- live logs ------------------------------------------------------------------------

STREAMING = """async () => {
  console.log('first');
  await release.wait();
  console.warn('second');
  return 1;
}"""


@pytest.mark.anyio
async def test_on_log_sees_each_entry_while_the_program_still_runs() -> None:
    seen: list[LogEntry] = []
    first_seen = asyncio.Event()

    def on_log(entry: LogEntry) -> None:
        seen.append(entry)
        first_seen.set()

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        # The program is parked in this call: its first line must have arrived already.
        await asyncio.wait_for(first_seen.wait(), 30)
        return '{"result": null}'

    async with IsolateExecutor(pool={"max_workers": 1}, timeout=30_000) as executor:
        outcome = await executor.execute(
            STREAMING, providers=[{"name": "release", "tools": ["wait"]}], dispatch=dispatch, on_log=on_log
        )
    assert outcome.result == 1
    assert seen == outcome.logs == [LogEntry("log", "first"), LogEntry("warn", "second")]


@pytest.mark.anyio
async def test_an_async_on_log_is_awaited_in_order_before_execute_returns() -> None:
    seen: list[str] = []

    async def on_log(entry: LogEntry) -> None:
        await asyncio.sleep(0.01 if entry.text == "0" else 0)
        seen.append(entry.text)

    async with IsolateExecutor(pool={"max_workers": 1}) as executor:
        outcome = await executor.execute(
            "async () => { for (let i = 0; i < 5; i++) console.log(String(i)) }", on_log=on_log
        )
    assert seen == ["0", "1", "2", "3", "4"] == [e.text for e in outcome.logs]


@pytest.mark.anyio
async def test_on_log_keeps_the_bounds_of_logs() -> None:
    seen: list[LogEntry] = []
    async with IsolateExecutor(pool={"max_workers": 1}, max_log_entries=3) as executor:
        outcome = await executor.execute(
            "async () => { for (let i = 0; i < 10; i++) console.log(i) }", on_log=seen.append
        )
    assert seen == outcome.logs and len(seen) == 4  # 3 kept, then the one warning of the rest
    assert "7 more log entries were dropped" in seen[-1].text


@pytest.mark.anyio
async def test_a_raising_on_log_never_fails_the_run(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def on_log(entry: LogEntry) -> None:
        calls.append(entry.text)
        raise RuntimeError("the host's display broke")

    async with IsolateExecutor(pool={"max_workers": 1}) as executor:
        with caplog.at_level(logging.WARNING, logger="codemode.logs"):
            outcome = await executor.execute(
                "async () => { console.log('a'); console.log('b'); return 2 }", on_log=on_log
            )
    assert outcome.result == 2 and [e.text for e in outcome.logs] == ["a", "b"]
    assert calls == ["a"]  # not called again for that run
    assert "on_log raised" in caplog.text


def test_on_log_through_the_sync_executor(executor: SyncIsolateExecutor) -> None:
    seen: list[LogEntry] = []
    executor.execute("async () => console.info('hi')", on_log=seen.append)
    assert seen == [LogEntry("info", "hi")]


# ---- approvals ------------------------------------------------------------------------


def _registry(approve: Approve) -> tuple[ToolRegistry, list[str]]:
    ran: list[str] = []
    tools = ToolRegistry(approve=approve)

    @tools.tool("shop", "refund", approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        ran.append(order)
        return f"refunded {amount} on {order}"

    @tools.tool("shop", "lookup")
    def lookup(order: str) -> int:
        """An order's total."""
        return 40

    return tools, ran


REFUND = "async () => [await shop.lookup('o-1'), await shop.refund('o-1', 5)]"


def test_an_approved_call_runs_and_a_refused_one_is_a_tool_error(executor: SyncIsolateExecutor) -> None:
    asked: list[ToolCall] = []

    def approve(call: ToolCall) -> bool:
        asked.append(call)
        amount: int = call.arguments[1]
        return amount < 10

    tools, ran = _registry(approve)
    outcome = executor.execute(REFUND, providers=tools.providers(), dispatch=tools.dispatch)
    assert outcome.result == [40, "refunded 5 on o-1"]
    assert [(c.provider, c.tool, c.arguments) for c in asked] == [("shop", "refund", ["o-1", 5])]
    refused = executor.execute(
        "async () => shop.refund('o-1', 500)", providers=tools.providers(), dispatch=tools.dispatch
    )
    assert refused.error is not None and refused.error.startswith(
        "The host did not approve this call to shop.refund, so the tool did not run."
    )
    assert ran == ["o-1"]
    assert tools.needs_approval() == {("shop", "refund")}


def test_arguments_are_checked_before_anyone_is_asked(executor: SyncIsolateExecutor) -> None:
    asked: list[ToolCall] = []

    def approve(call: ToolCall) -> bool:
        asked.append(call)
        return True

    tools, ran = _registry(approve)
    outcome = executor.execute(
        "async () => shop.refund('o-1', 'lots')", providers=tools.providers(), dispatch=tools.dispatch
    )
    assert outcome.error is not None and "wrong arguments" in outcome.error
    assert asked == [] and ran == []


def test_an_approve_that_raises_rejects_the_call(executor: SyncIsolateExecutor) -> None:
    def approve(call: ToolCall) -> bool:
        raise ConnectionError("the review queue is down")

    tools, ran = _registry(approve)
    outcome = executor.execute(
        "async () => shop.refund('o-1', 1)", providers=tools.providers(), dispatch=tools.dispatch
    )
    assert outcome.error is not None and "asking for it failed in the host" in outcome.error and ran == []


def test_a_tool_that_needs_approval_needs_an_approve_callback() -> None:
    with pytest.raises(ValueError, match=r"needs approval.*ToolRegistry\(approve=\.\.\.\)"):
        ToolRegistry().tool("shop", "refund", approval=True)(lambda order: None)


@pytest.mark.anyio
async def test_a_human_wait_does_not_use_the_programs_time_when_host_waits_are_not_counted() -> None:
    decided = threading.Event()

    async def approve(call: ToolCall) -> bool:
        await asyncio.sleep(2.0)  # a person reading the request: well past the run's 500 ms
        decided.set()
        return True

    tools, ran = _registry(approve)
    async with IsolateExecutor(pool={"max_workers": 1}) as executor:
        outcome = await executor.execute(
            "async () => shop.refund('o-1', 1)",
            providers=tools.providers(),
            dispatch=tools.dispatch,
            timeout=500,
            count_host_waits=False,
        )
        assert outcome.result == "refunded 1 on o-1" and decided.is_set()
        # Counted, the same wait ends the run at its bound (and the tool never runs).
        decided.clear()
        counted = await executor.execute(
            "async () => shop.refund('o-2', 1)",
            providers=tools.providers(),
            dispatch=tools.dispatch,
            timeout=500,
            count_host_waits=True,
        )
    assert counted.error is not None and counted.error.startswith("Execution timed out at its 500 ms bound.")
    assert ran == ["o-1"]
