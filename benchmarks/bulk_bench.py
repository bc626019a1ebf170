"""Bulk execution: ``map`` against the pool's own throughput, and the batch command.

    python benchmarks/bulk_bench.py              # 10,000 trivial programs, 2 rounds; batch 1k and 10k
    python benchmarks/bulk_bench.py --n 2000 --rounds 1 --batch-lines 200,2000   # a short run
    python benchmarks/bulk_bench.py --fleet      # (c) only: map on the fleet

(a) In process: each round measures the pool's throughput with ``bench.py``'s trivial
scenario (2 x workers callers, each awaiting ``execute`` in a loop) and then ``map`` over
the same number of trivial programs on the same executor; the rounds alternate so that a
busy moment of the machine falls on both. The target: map at least 90% of the pool.

(b) The batch command: ``codemode batch`` in its own process over a file of trivial
programs, at two sizes: lines per second (wall time of the whole command, start-up
included) and the command's peak RSS (its own ``ru_maxrss``; the children are not
counted). The target: the peak RSS at the larger size within 10% of the smaller's.

(c) ``--fleet``: a private redis-server and one worker (concurrency 2, as ``fleet_bench.py``
has it); each round measures ``fleet_bench.py``'s throughput of trivial jobs at 16 in
flight, then ``map`` over ``--n`` trivial jobs at its default window (16). The target: map
at least 90% of the fleet's throughput.

Results go to ``bulk.json`` (``bulk_fleet.json`` for ``--fleet``) in the results directory (``outputs.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import PROGRAMS, WORKERS, latency_and_throughput
from outputs import RESULTS_DIR

from codemode import IsolateExecutor

ROOT = Path(__file__).resolve().parent.parent
TRIVIAL = PROGRAMS["trivial"]["code"]

_BATCH_DRIVER = """
import resource, sys
from codemode.cli import main
status = main(sys.argv[1:])
print("PEAK_RSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(status)
"""


async def map_throughput(ex: IsolateExecutor, n: int) -> float:
    t = time.perf_counter()
    done = 0
    async for _key, outcome in ex.map(TRIVIAL for _ in range(n)):
        assert not isinstance(outcome, Exception) and outcome.result == 42, outcome
        done += 1
    assert done == n
    return n / (time.perf_counter() - t)


async def in_process(n: int, rounds: int) -> dict[str, Any]:
    pool: list[float] = []
    mapped: list[float] = []
    async with IsolateExecutor(pool={"max_workers": WORKERS, "max_queue": 1000}) as ex:
        for _ in range(rounds):
            pool.append((await latency_and_throughput(ex, "trivial", n))["throughput_per_s"])
            mapped.append(await map_throughput(ex, n))
    ratio = statistics.median(mapped) / statistics.median(pool)
    return {"n": n, "pool_per_s": pool, "map_per_s": mapped, "map_over_pool": ratio, "target": 0.9}


def batch_run(lines: int, workdir: Path) -> dict[str, Any]:
    source = workdir / f"in-{lines}.jsonl"
    out = workdir / f"out-{lines}.jsonl"
    with source.open("w") as f:
        for i in range(lines):
            f.write(json.dumps({"id": i, "code": TRIVIAL}) + "\n")
    out.unlink(missing_ok=True)
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH_DRIVER, "batch", str(source), "-o", str(out), "--progress", "none"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    wall = time.perf_counter() - t
    assert proc.returncode == 0, proc.stderr
    peak = next(int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB"))
    assert sum(1 for _ in out.open()) == lines
    return {"lines": lines, "wall_s": wall, "lines_per_s": lines / wall, "peak_rss_mb": peak / 1024}


async def on_fleet(url: str, n: int, rounds: int) -> dict[str, Any]:
    from fleet_bench import throughput

    from codemode.fleet import FleetExecutor
    from codemode.fleet.settings import BrokerSettings

    fleet: list[float] = []
    mapped: list[float] = []
    async with FleetExecutor(settings=BrokerSettings(redis_url=url)) as ex:
        await throughput(ex, seconds=1.0)  # warm: connections, children
        for _ in range(rounds):
            fleet.append(await throughput(ex, seconds=n / max(1.0, fleet[-1] if fleet else 500.0)))
            t = time.perf_counter()
            async for _key, outcome in ex.map("() => 0" for _ in range(n)):
                assert not isinstance(outcome, Exception) and outcome.error is None, outcome
            mapped.append(n / (time.perf_counter() - t))
    ratio = statistics.median(mapped) / statistics.median(fleet)
    return {"n": n, "fleet_16_per_s": fleet, "map_per_s": mapped, "map_over_fleet": ratio, "target": 0.9}


def fleet_main(n: int, rounds: int) -> None:
    from codemode.fleet.settings import BrokerSettings, WorkerSettings
    from codemode.fleet.testing import RedisServer, WorkerProcess

    with RedisServer() as server:
        worker = WorkerProcess(
            BrokerSettings(redis_url=server.url), WorkerSettings(concurrency=2), name="bulk"
        )
        with worker:
            report = asyncio.run(on_fleet(server.url, n, rounds))
    print(
        f"(c) {n} trivial jobs on the fleet: 16 in flight {statistics.median(report['fleet_16_per_s']):.0f}/s, "
        f"map {statistics.median(report['map_per_s']):.0f}/s: map/fleet {report['map_over_fleet']:.1%} "
        "(target >= 90%)"
    )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "bulk_fleet.json").write_text(json.dumps(report, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000, help="trivial programs per phase of (a)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of (a)")
    parser.add_argument("--batch-lines", default="1000,10000", help="the two file sizes of (b)")
    parser.add_argument("--fleet", action="store_true", help="(c) only: map on a private fleet")
    args = parser.parse_args()
    if args.fleet:
        fleet_main(args.n, args.rounds)
        return
    report: dict[str, Any] = {"workers": WORKERS, "cpus": os.cpu_count()}
    report["in_process"] = ip = asyncio.run(in_process(args.n, args.rounds))
    print(
        f"(a) {args.n} trivial programs: pool {statistics.median(ip['pool_per_s']):.0f}/s, "
        f"map {statistics.median(ip['map_per_s']):.0f}/s: map/pool {ip['map_over_pool']:.1%} (target >= 90%)"
    )
    sizes = [int(x) for x in args.batch_lines.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [batch_run(size, Path(tmp)) for size in sizes]
    report["batch"] = runs
    for run in runs:
        print(
            f"(b) batch of {run['lines']} lines: {run['lines_per_s']:.0f} lines/s "
            f"({run['wall_s']:.1f} s), peak RSS {run['peak_rss_mb']:.1f} MB"
        )
    growth = runs[-1]["peak_rss_mb"] / runs[0]["peak_rss_mb"] - 1
    report["batch_rss_growth"] = growth
    print(f"(b) peak RSS at {sizes[-1]} lines vs {sizes[0]}: {growth:+.1%} (target within 10%)")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "bulk.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
