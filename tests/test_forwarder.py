"""A Forwarder dispatch (``codemode/_dispatch.py``): each call handed on, its answer given
back through a callback, later or at once, with no coroutine per call. The fleet's worker
serves its jobs' calls this way; here the executor serves one in process, so the contract
is checked on its own: answers reach the right calls in any order, whatever a forwarder
answers is checked as a dispatch's reply is, a forwarder that raises fails only its call,
and an answer that comes after its run ended is dropped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from codemode import SyncIsolateExecutor, tool_result
from codemode._dispatch import CallMessage, Forwarder

TOOLS = [{"name": "t", "tools": ["echo", "now", "boom", "garbage", "never", "late"]}]


class Relay(Forwarder):
    """Answers ``echo`` a moment later (the last call first), ``now`` at once, and the
    others as their names say; ``never`` is held until the next call comes."""

    def __init__(self) -> None:
        self.held: list[Callable[[str], object]] = []

    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None:
        loop = asyncio.get_running_loop()
        held, self.held = self.held, []
        for stale in held:  # (answers are given on the loop's thread, as the contract says)
            stale(tool_result("stale"))
        [value] = json.loads(call.args_json)
        if call.tool == "now":
            answer(tool_result(value))
        elif call.tool == "echo":
            loop.call_later(0.05 - value / 10_000, answer, tool_result(value))
        elif call.tool == "boom":
            raise RuntimeError("a bug in the forwarder")
        elif call.tool == "garbage":
            answer("not an envelope")
        elif call.tool == "late":
            loop.call_later(0.3, answer, tool_result("too late"))
        else:
            self.held.append(answer)


def test_answers_reach_their_calls_in_any_order() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        outcome = ex.execute(
            """async () => {
                const later = await Promise.all([...Array(50).keys()].map(i => t.echo(i)));
                const now = [];
                for (let i = 0; i < 20; i++) now.push(await t.now(i));
                return [later, now];
            }""",
            providers=TOOLS,
            dispatch=Relay(),
        )
    assert outcome.error is None, outcome.error
    assert outcome.result == [list(range(50)), list(range(20))]


def test_what_a_forwarder_answers_or_raises_fails_only_that_call() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        outcome = ex.execute(
            """async () => {
                const texts = [];
                for (const name of ['boom', 'garbage']) {
                    try { await t[name](0); texts.push('answered'); } catch (e) { texts.push(e.message); }
                }
                return [texts, await t.now(7)];
            }""",
            providers=TOOLS,
            dispatch=Relay(),
        )
    assert outcome.error is None, outcome.error
    [boom, garbage], seven = outcome.result
    assert boom.startswith("The tool t.boom failed in the host (RuntimeError)"), boom
    assert "not a JSON envelope" in garbage, garbage
    assert seven == 7


def test_an_answer_after_its_run_ended_is_dropped_and_the_child_serves_on() -> None:
    relay = Relay()
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        timed_out = ex.execute(
            "async () => await t.late(0)", providers=TOOLS, dispatch=relay, timeout=100, count_host_waits=True
        )
        assert timed_out.error is not None and "timed out" in timed_out.error
        never = ex.execute(
            "async () => await t.never(0)",
            providers=TOOLS,
            dispatch=relay,
            timeout=100,
            count_host_waits=True,
        )
        assert never.error is not None and "timed out" in never.error
        # The late answer came meanwhile; the held one comes with the next run's first
        # call. Neither reaches that run, which the same child serves.
        assert len(relay.held) == 1
        outcome = ex.execute("async () => [await t.now(1), await t.echo(2)]", providers=TOOLS, dispatch=relay)
    assert outcome.error is None, outcome.error
    assert outcome.result == [1, 2]


def test_a_forwarder_awaited_as_a_dispatch_answers_as_one() -> None:
    async def main() -> list[str]:
        relay = Relay()
        return [await relay("t", "now", "[3]"), await relay("t", "echo", "[4]")]

    assert [json.loads(r) for r in asyncio.run(main())] == [{"result": 3}, {"result": 4}]
