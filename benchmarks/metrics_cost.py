"""What metrics cost a run: bench.py's trivial and tools10 scenarios with an executor's
metrics on (``executor.metrics_registry`` read, and scraped between rounds) and off, rounds
alternating, pooled as bench.py pools them.

::

    python benchmarks/metrics_cost.py [--n 1000] [--rounds 5]

Prints JSON: for each scenario and side, the median and p99 sequential latency (ms), the
median throughput (runs/s at 2 x workers callers), and on/off ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench import WORKERS, latency_and_throughput, pooled
from prometheus_client import generate_latest

from codemode import IsolateExecutor

SCENARIOS = ("trivial", "tools10")


async def warm(metrics: bool) -> IsolateExecutor:
    ex = IsolateExecutor(pool={"max_workers": WORKERS, "max_queue": 1000})
    if metrics:
        ex.metrics_registry  # noqa: B018 (reading it turns counting on)
    await ex.execute("() => 1")
    deadline = time.monotonic() + 30
    while (len(ex.worker_pids) < WORKERS or ex.standby_pid is None) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return ex


async def main(n: int, rounds: int) -> dict[str, Any]:
    sides = {"on": await warm(True), "off": await warm(False)}
    results: dict[str, dict[str, list[dict[str, Any]]]] = {s: {"on": [], "off": []} for s in SCENARIOS}
    try:
        for _round in range(rounds):
            for scenario in SCENARIOS:
                for label, ex in sides.items():
                    results[scenario][label].append(await latency_and_throughput(ex, scenario, n))
                    if label == "on":
                        generate_latest(ex.metrics_registry)  # a scrape, as Prometheus would
    finally:
        for ex in sides.values():
            await ex.aclose()
    out: dict[str, Any] = {"n": n, "rounds": rounds}
    for scenario, by_side in results.items():
        on, off = pooled(by_side["on"]), pooled(by_side["off"])
        out[scenario] = {
            label: {k: side[k] for k in ("median_ms", "p99_ms", "throughput_per_s", "throughput_rounds")}
            for label, side in (("on", on), ("off", off))
        }
        out[scenario]["median_ratio_on_off"] = on["median_ms"] / off["median_ms"]
        out[scenario]["throughput_ratio_on_off"] = on["throughput_per_s"] / off["throughput_per_s"]
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.n, args.rounds)), indent=2))
