"""A tool call to an MCP server through a program, beside the same call made directly with
the SDK's client, in one run.

Both sides talk to the same kind of server (tests/mcp/upstream_server.py over stdio, a
process of its own each) and call its ``add`` tool. Rounds alternate between the sides, so
that a busy neighbour weighs on both alike. Reported, as medians over the rounds:

- ``direct``: one ``client.call_tool`` with the SDK's client;
- ``program_0`` / ``program_1`` / ``program_10``: a whole execute (fresh isolate, result
  back) of a program making 0, 1 or 10 sequential calls through :class:`codemode.mcp.McpTools`;
- ``per_call``: ``(program_10 - program_0) / 10``, what one call costs inside a program;

and the ratios ``per_call / direct`` (the program's part of a call) and
``program_1 / direct`` (a one-call program, end to end, against the bare call).

``--parts`` splits a call the host serves, as medians of 300 each (alternating blocks of
30): the check of its arguments against the tool's schema, the hop into the tool set's
thread (its anyio portal) with nothing to do there, that hop with the call, the tool set's
whole ``dispatch``, and the direct call beside them (the portal and the connection are the
tool set's own attributes, read here only to time them)::

    python benchmarks/mcp_bench.py --rounds 20 --per-round 10
    python benchmarks/mcp_bench.py --parts
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters
from outputs import RESULTS_DIR

from codemode import IsolateExecutor
from codemode.mcp import McpTools, StdioServer

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = [str(ROOT / "tests" / "mcp" / "upstream_server.py"), "stdio"]


def _program(calls: int) -> str:
    body = "".join("s += (await up.add({ a: i, b: 1 })).result; " for _ in range(calls))
    return f"async () => {{ let s = 0, i = 1; {body}return s }}"


async def _timed(fn: object, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def main(rounds: int, per_round: int) -> dict[str, object]:
    params = StdioServerParameters(command=sys.executable, args=UPSTREAM)
    samples: dict[str, list[float]] = {"direct": [], "program_0": [], "program_1": [], "program_10": []}
    async with (
        Client(params) as client,
        McpTools([StdioServer("up", sys.executable, UPSTREAM)]) as tools,
        IsolateExecutor(pool={"max_workers": 1}) as executor,
    ):
        providers = tools.providers()

        async def direct() -> None:
            await client.call_tool("add", {"a": 1, "b": 1})

        def program(calls: int) -> object:
            code = _program(calls)

            async def run() -> None:
                outcome = await executor.execute(code, providers=providers, dispatch=tools.dispatch)
                assert outcome.error is None, outcome.error

            return run

        sides = {
            "direct": direct,
            "program_0": program(0),
            "program_1": program(1),
            "program_10": program(10),
        }
        for side in sides.values():  # warm: the isolate pool, both sessions
            await _timed(side, 3)
        for _ in range(rounds):
            for name, side in sides.items():
                samples[name] += await _timed(side, per_round)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    per_call = (medians["program_10"] - medians["program_0"]) / 10
    return {
        "median_ms": {**medians, "per_call": per_call},
        "ratio_per_call_to_direct": per_call / medians["direct"],
        "ratio_program_1_to_direct": medians["program_1"] / medians["direct"],
        "samples_ms": samples,
    }


async def parts(n: int = 300) -> dict[str, float]:
    """Medians (us) of the parts of one call the host serves (``--parts``)."""
    from codemode.mcp._toolset import _arguments

    args = {"a": 1, "b": 1}
    args_json = json.dumps([args])
    async with (
        Client(StdioServerParameters(command=sys.executable, args=UPSTREAM)) as client,
        McpTools([StdioServer("up", sys.executable, UPSTREAM)]) as tools,
    ):
        connection = tools._connections["up"]
        portal = tools._portal
        assert portal is not None
        tool = connection.tools["add"]

        async def nothing() -> None:
            return None

        async def checked() -> None:
            _arguments(tool, args_json)

        async def hop() -> None:
            await asyncio.wrap_future(portal.start_task_soon(nothing))

        async def hop_and_call() -> None:
            await asyncio.wrap_future(portal.start_task_soon(connection.call, "add", args))

        async def dispatch() -> None:
            await tools.dispatch("up", "add", args_json)

        async def direct() -> None:
            await client.call_tool("add", args)

        sides = {
            "arguments checked": checked,
            "hop into the tool set's thread": hop,
            "hop and call": hop_and_call,
            "the tool set's dispatch": dispatch,
            "direct call": direct,
        }
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(n // 30):  # alternating blocks of 30
            for name, side in sides.items():
                samples[name] += await _timed(side, 30)
        return {name: statistics.median(values) * 1000 for name, values in samples.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--parts", action="store_true", help="split one call the host serves")
    args = parser.parse_args()
    if args.parts:
        for name, us in asyncio.run(parts()).items():
            print(f"{name:<32} {us:8.1f} us")
        sys.exit(0)
    report = asyncio.run(main(args.rounds, args.per_round))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "mcp.json").write_text(json.dumps(report, indent=1))
    summary = {k: v for k, v in report.items() if k != "samples_ms"}
    print(json.dumps(summary, indent=1))
