"""Outcome metadata, filled by every ``execute`` of both executors: the host's wall time,
the tool calls the run made (counted by the host as each arrives), and the child that ran
it (on a fleet, behind the worker's name)."""

from __future__ import annotations

import re

import pytest

from codemode import Executor, IsolateExecutor, tool_error, tool_result

pytestmark = pytest.mark.anyio

STORE = [{"name": "store", "tools": ["get"]}]
CHILD = r"child \d+ \(pid (\d+)\)"


def _dispatch(provider: str, tool: str, args_json: str) -> str:
    if tool == "get":
        return tool_result(1)
    return tool_error(f"{provider}.{tool} is not a tool.")


async def test_a_run_reports_its_duration_its_tool_calls_and_its_child(executor: Executor) -> None:
    code = """async () => {
        const first = await store.get('a')
        const [b, c] = await Promise.all([store.get('b'), store.get('c')])
        return first + b + c
    }"""
    outcome = await executor.execute(code, providers=STORE, dispatch=_dispatch)
    assert outcome.error is None and outcome.result == 3
    assert outcome.tool_calls == 3
    assert outcome.duration_ms is not None and outcome.duration_ms > 0
    assert outcome.ran_on is not None
    if isinstance(executor, IsolateExecutor):
        match = re.fullmatch(CHILD, outcome.ran_on)
        assert match is not None, outcome.ran_on
        assert int(match.group(1)) in executor.worker_pids
    else:
        # "<worker host>:<worker pid>/child <slot> (pid <child pid>)"
        assert re.fullmatch(r".+:\d+/" + CHILD, outcome.ran_on), outcome.ran_on
    data = outcome.to_dict()
    assert data["tool_calls"] == 3
    assert data["ran_on"] == outcome.ran_on
    assert data["duration_ms"] == outcome.duration_ms


async def test_calls_that_fail_and_a_run_that_throws_still_count(executor: Executor) -> None:
    code = """async () => {
        await store.get('a')
        try { await store.missing() } catch (e) {}
        throw new Error('stopped after two calls')
    }"""
    outcome = await executor.execute(code, providers=STORE, dispatch=_dispatch)
    assert outcome.error is not None and "stopped after two calls" in outcome.error
    assert outcome.tool_calls == 2
    assert outcome.ran_on is not None and re.search(CHILD + "$", outcome.ran_on)
    assert outcome.duration_ms is not None and outcome.duration_ms > 0


async def test_a_run_without_tool_calls_reports_zero(executor: Executor) -> None:
    outcome = await executor.execute("async () => 1")
    assert outcome.tool_calls == 0 and outcome.to_dict()["tool_calls"] == 0
    assert outcome.ran_on is not None
    assert outcome.duration_ms is not None and outcome.duration_ms > 0
