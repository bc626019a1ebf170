"""Instructions per run, counted by callgrind: an A/B that holds still while the machine does not.

Wall and CPU time on the shared 2-core benchmark machine move by 2-3x between phases, and
an ordinary A/B of a change worth 5% needs long interleaved runs to see it at all. An
instruction count does not move with the machine: run the same workload under valgrind's
callgrind, count the instructions one process executes per run, and compare two source
trees (or two values of an environment variable) one after the other.

It counts one process at a time, the one a change is in:

* ``child``: an isolate child of an in-process executor (one child, no standby), per
  trivial run, per run with ten tool calls, and per run of the side-by-side benchmark's
  (b) (ten calls, JSON work on their answers, a 1 KB result). Its count includes the preparation of the
  next run's isolate, which happens between runs.
* ``worker``: a fleet worker process (``python -m workers``, concurrency 1) per trivial job
  and per job with ten tool calls, on a private Redis; its isolate children are not counted.
* ``host``: the process that runs an in-process executor (the host), per relayed tool call
  (the benchmark's 200-call chain and its dispatch, one child, which runs natively): the
  host runs under callgrind from its start, once with 3 chains and once with 13, and the
  difference is divided by the 2,000 calls between them. ``--host-loop uvloop`` runs it on
  uvloop instead of asyncio's own loop.

The process runs under callgrind from its start; its counters are zeroed after a warm-up
(``callgrind_control -z``) and dumped after the measured runs (``-d``). Instructions are
not time: a system call, a cache miss or a wait for the other thread's turn at the
interpreter counts as little or nothing, so confirm a win here with ``bench.py`` or
``fleet_bench.py`` as well. Needs ``valgrind``; about a minute per side.

::

    python benchmarks/instructions.py                          # this tree
    python benchmarks/instructions.py --tree /tmp/base         # and another, side by side
    python benchmarks/instructions.py --env-ab CODEMODE_LOOP=uvloop,asyncio --what child
    python benchmarks/instructions.py --what host --tree /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from outputs import RESULTS_DIR

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = RESULTS_DIR / "instructions.json"

TRIVIAL = "() => 0"
TEN_CALLS = "async () => { let s = 0; for (let i = 0; i < 10; i++) s += await t.x(i); return s }"
BENCH_B = json.loads((HERE / "programs.json").read_text())["tools10"]["code"]
"""The side-by-side benchmark's (b): ten calls, JSON work on what they return, a 1 KB result."""
TOOLS = [{"name": "t", "tools": ["x"]}, {"name": "store", "tools": ["get"]}]
WARM_UP = 20
SETTLE_S = 3.0
"""Wait before zeroing and before dumping: the spare isolate the child prepares between
runs is ready (at ~50x slower under callgrind, a preparation takes ~0.2 s)."""


async def dispatch(provider: str, tool: str, args_json: str) -> str:
    from codemode import tool_result

    if provider == "store":  # as the benchmark's dispatch answers (b)'s calls
        return tool_result({"i": json.loads(args_json)[0]["i"], "name": "item"})
    return tool_result(1)


@contextmanager
def callgrind_wrapper() -> Iterator[tuple[Path, Path]]:
    """A script that runs this Python under callgrind, and the directory its dumps go to."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind (with callgrind_control) is needed: apt-get install valgrind")
    with tempfile.TemporaryDirectory(prefix="codemode-cg-") as tmp:
        out = Path(tmp)
        wrapper = out / "python"
        wrapper.write_text(
            "#!/bin/sh\n"
            f"exec valgrind --tool=callgrind --smc-check=all-non-file --dump-instr=no "
            f'--callgrind-out-file={out}/cg.%p {sys.executable} "$@"\n'
        )
        wrapper.chmod(0o755)
        yield wrapper, out


def zero(pid: int) -> None:
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)


def dump_total_of(path: Path) -> int | None:
    """The instruction total a callgrind dump file states, or None (not written out yet)."""
    match = re.search(r"^(?:summary|totals): (\d+)", path.read_text(errors="replace"), re.MULTILINE)
    return None if match is None else int(match.group(1))


def dump_total(pid: int, out: Path) -> int:
    """Dump ``pid``'s counters and return the instructions since they were zeroed."""
    before = set(out.glob(f"cg.{pid}*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in set(out.glob(f"cg.{pid}*")) - before:
            total = dump_total_of(path)
            if total is not None:
                return total
        time.sleep(0.2)
    raise RuntimeError(f"callgrind wrote no dump for {pid}")


async def count_runs(
    run: Callable[[str], Awaitable[Any]], pid: Callable[[], int], out: Path, runs: int
) -> dict[str, float]:
    """Per workload: warm up, let the spare settle, zero ``pid``'s counters, run ``runs``
    times, settle again, and divide the dumped total by ``runs``."""
    counts: dict[str, float] = {}
    for name, code in (("trivial", TRIVIAL), ("tools10", TEN_CALLS), ("bench_b", BENCH_B)):
        for _ in range(WARM_UP):
            outcome = await run(code)
            assert outcome.error is None, outcome.error
        counted = pid()
        await asyncio.sleep(SETTLE_S)
        zero(counted)
        for _ in range(runs):
            await run(code)
        await asyncio.sleep(SETTLE_S)
        counts[name] = dump_total(counted, out) / runs
    return counts


def only_child() -> int:
    children = my_children()
    assert len(children) == 1, f"expected one child, found {children}"
    return children[0]


def my_children() -> list[int]:
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return pids


async def count_child(env: dict[str, str], runs: int) -> dict[str, float]:
    """Instructions an isolate child executes per run (and per next isolate prepared)."""
    import codemode._host.spawn as spawn_module
    from codemode import IsolateExecutor

    with callgrind_wrapper() as (wrapper, out):
        real, sys.executable = sys.executable, str(wrapper)
        spawn_module.READY_TIMEOUT_S = 900.0
        try:
            async with IsolateExecutor(
                pool={"max_workers": 1, "standby": False}, child_env={**os.environ, **env}
            ) as executor:
                return await count_runs(
                    lambda code: executor.execute(code, providers=TOOLS, dispatch=dispatch),
                    only_child,
                    out,
                    runs,
                )
        finally:
            sys.executable = real


def count_worker(env: dict[str, str], runs: int) -> dict[str, float]:
    """Instructions a fleet worker process executes per job."""
    from codemode.fleet import FleetExecutor
    from codemode.fleet.settings import BrokerSettings, WorkerSettings
    from codemode.fleet.testing import RedisServer, WorkerProcess

    with callgrind_wrapper() as (wrapper, out):

        class Measured(WorkerProcess):
            def command(self) -> list[str]:
                return [str(wrapper), *super().command()[1:]]

        async def jobs(url: str, worker: WorkerProcess) -> dict[str, float]:
            async with FleetExecutor(settings=BrokerSettings(redis_url=url)) as fleet:
                return await count_runs(
                    lambda code: fleet.execute(code, providers=TOOLS, dispatch=dispatch),
                    lambda: worker.pid,
                    out,
                    runs,
                )

        with RedisServer() as server:
            worker = Measured(
                BrokerSettings(redis_url=server.url), WorkerSettings(concurrency=1), env=env, name="counted"
            )
            worker.start(timeout_s=600)
            try:
                return asyncio.run(jobs(server.url, worker))
            finally:
                worker.stop()


HOST_CHAINS = (3, 13)
"""The 200-call chains the host runs under callgrind, once each (see count_host)."""


async def host_workload(chains: int) -> None:
    """What ``--what host`` counts: five chains to warm up, then ``chains`` more, on one child."""
    from codemode import IsolateExecutor

    program = json.loads((HERE / "programs.json").read_text())["toolrt"]
    providers = [{"name": p, "tools": ["get"]} for p in program["providers"]]
    async with IsolateExecutor(pool={"max_workers": 1, "standby": False}) as executor:
        for _ in range(5 + chains):
            outcome = await executor.execute(
                program["code"], providers=providers, dispatch=dispatch, timeout=program["timeout"]
            )
            assert outcome.error is None, outcome.error


def count_host(env: dict[str, str], host_loop: str) -> dict[str, float]:
    """Instructions the host spends per relayed call: its whole run under callgrind (its
    children run natively) with HOST_CHAINS[1] chains less with HOST_CHAINS[0], over the
    calls between them; the start, the warm-up and the shutdown cancel out."""
    totals = []
    with callgrind_wrapper() as (wrapper, out):
        for chains in HOST_CHAINS:
            subprocess.run(
                [
                    str(wrapper),
                    str(Path(__file__).resolve()),
                    "--host-workload",
                    str(chains),
                    "--host-loop",
                    host_loop,
                ],
                env={**os.environ, **env},
                check=True,
                capture_output=True,
                timeout=900,
            )
            dumps = sorted(out.glob("cg.*"), key=os.path.getmtime)
            total = dump_total_of(dumps[-1])
            assert total is not None, "callgrind wrote no total"
            totals.append(total)
            for dump in dumps:
                dump.unlink()
    calls = (HOST_CHAINS[1] - HOST_CHAINS[0]) * 200
    return {"relayed_call": (totals[1] - totals[0]) / calls}


def measure(what: str, env: dict[str, str], runs: int, host_loop: str = "asyncio") -> dict[str, float]:
    if what == "child":
        return asyncio.run(count_child(env, runs))
    if what == "host":
        return count_host(env, host_loop)
    return count_worker(env, runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--what", choices=("child", "worker", "host", "both"), default="both", help="both: child and worker"
    )
    parser.add_argument("--runs", type=int, default=50, help="measured runs per workload")
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="another source tree to count (its codemode, workers and "
        "broker_config come first on PYTHONPATH); repeatable",
    )
    parser.add_argument(
        "--env-ab", metavar="VAR=A,B", help="count this tree with an environment variable at two values"
    )
    parser.add_argument(
        "--host-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the host's event loop for --what host",
    )
    parser.add_argument("--host-workload", type=int, metavar="CHAINS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.host_workload is not None:
        if args.host_loop == "uvloop":
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        asyncio.run(host_workload(args.host_workload))
        return 0
    sides: dict[str, dict[str, str]] = {"this tree": {}}
    for tree in args.tree:
        sides[tree] = {"PYTHONPATH": str(Path(tree).resolve())}
    if args.env_ab:
        var, _, values = args.env_ab.partition("=")
        sides = {f"{var}={v}": {var: v} for v in values.split(",")}
    # A source tree on PYTHONPATH must not lose to the current directory (``-m`` puts it
    # first on sys.path).
    os.chdir(tempfile.gettempdir())
    whats = ("child", "worker") if args.what == "both" else (args.what,)
    results: dict[str, Any] = {"runs": args.runs, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    for what in whats:
        results[what] = {side: measure(what, env, args.runs, args.host_loop) for side, env in sides.items()}
    print(f"instructions per run (millions), {args.runs} runs each; the host's per relayed call (thousands)")
    for what in whats:
        base: dict[str, float] | None = None
        for side, counts in results[what].items():
            cells = []
            for name, value in counts.items():
                ratio = f" ({value / base[name]:.3f}x)" if base else ""
                shown = f"{value / 1e3:8.1f}" if what == "host" else f"{value / 1e6:8.3f}"
                cells.append(f"{name} {shown}{ratio}")
            print(f"{what:6s} {side:40s} " + "  ".join(cells))
            base = base or counts
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
