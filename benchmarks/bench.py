"""Speed and memory of the in-process executor, side by side with the reference design.

    python benchmarks/bench.py                  # ours only
    python benchmarks/bench.py --reference      # interleaved with benchmarks/reference (Node + isolated-vm)

Every scenario runs the programs in ``benchmarks/programs.json`` (shared with the Node
harness). Latency is sequential (one caller); throughput is 2 x workers callers at once.
Results go to ``benchmarks/results/latest.json``; the table goes to stdout. The machine's CPU
affinity and load are recorded, because tool-call latency depends on both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codemode import IsolateExecutor, tool_result

HERE = Path(__file__).resolve().parent
PROGRAMS = json.loads((HERE / "programs.json").read_text())
WORKERS = 2


async def dispatch(provider: str, tool: str, args_json: str) -> str:
    if provider == "store" and tool == "get":
        [arg] = json.loads(args_json)
        return tool_result({"i": arg["i"], "name": "item"})
    return json.dumps({"error": f"unknown tool {provider}.{tool}"})


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(latencies_ms: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(latencies_ms), "p99_ms": pct(latencies_ms, 0.99)}


def _providers(program: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": p, "tools": ["get"]} for p in program.get("providers", [])]


async def latency_and_throughput(ex: IsolateExecutor, name: str, n: int) -> dict[str, Any]:
    program = PROGRAMS[name]
    kwargs = {"providers": _providers(program), "dispatch": dispatch, "timeout": program["timeout"]}
    for _ in range(20):
        await ex.execute(program["code"], **kwargs)
    latencies = []
    for _ in range(n):
        t = time.perf_counter()
        outcome = await ex.execute(program["code"], **kwargs)
        latencies.append((time.perf_counter() - t) * 1e3)
        assert outcome.error is None, outcome.error
    concurrency = 2 * WORKERS
    done = 0

    async def caller() -> None:
        nonlocal done
        while done < n:
            done += 1
            await ex.execute(program["code"], **kwargs)

    t = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    wall = time.perf_counter() - t
    return {**summary(latencies), "throughput_per_s": n / wall, "n": n}


async def tool_round_trip(ex: IsolateExecutor) -> dict[str, Any]:
    program = PROGRAMS["toolrt"]
    kwargs = {"providers": _providers(program), "dispatch": dispatch, "timeout": program["timeout"]}
    await ex.execute(program["code"], **kwargs)
    per_call = []
    for _ in range(10):
        t = time.perf_counter()
        outcome = await ex.execute(program["code"], **kwargs)
        per_call.append((time.perf_counter() - t) * 1e6 / program["tool_calls"])
        assert outcome.error is None
    return {"per_call_e2e_us": statistics.median(per_call)}


async def timeout_accuracy(ex: IsolateExecutor) -> dict[str, Any]:
    program = PROGRAMS["timeout"]
    settles = []
    for _ in range(5):
        t = time.perf_counter()
        outcome = await ex.execute(program["code"], timeout=program["timeout"])
        settles.append((time.perf_counter() - t) * 1e3)
        assert outcome.error == program["expect_error"]
        await asyncio.sleep(0.5)  # let the wedged child be replaced
    return {"settle_ms_median": statistics.median(settles), "settle_ms_max": max(settles),
            "bound_ms": program["timeout"]}


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def resident_and_respawn(ex: IsolateExecutor) -> dict[str, Any]:
    for _ in range(50):
        await ex.execute(PROGRAMS["trivial"]["code"])
    rss = [rss_mb(p) for p in ex.worker_pids]
    respawns = []
    for _ in range(3):
        pids = set(ex.worker_pids)
        victim = sorted(pids)[0]
        t = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        while True:
            current = set(ex.worker_pids)
            if len(current) == WORKERS and victim not in current:
                break
            await asyncio.sleep(0.001)
        await ex.execute(PROGRAMS["trivial"]["code"])
        respawns.append((time.perf_counter() - t) * 1e3)
    return {"rss_per_child_mb": statistics.mean(rss), "respawn_ms": statistics.median(respawns)}


async def ours(n_trivial: int, n_tools: int, n_cpu: int) -> dict[str, Any]:
    async with IsolateExecutor(pool={"max_workers": WORKERS, "max_queue": 1000}) as ex:
        await ex.execute("() => 1")
        while len(ex.worker_pids) < WORKERS:
            await asyncio.sleep(0.05)
        return {
            "trivial": await latency_and_throughput(ex, "trivial", n_trivial),
            "tools10": await latency_and_throughput(ex, "tools10", n_tools),
            "cpu": await latency_and_throughput(ex, "cpu", n_cpu),
            "toolrt": await tool_round_trip(ex),
            "timeout": await timeout_accuracy(ex),
            "memory": await resident_and_respawn(ex),
        }


def reference(scenario: str, n: int | None = None) -> dict[str, Any]:
    cmd = ["node", str(HERE / "reference" / "bench.js"), "--scenario", scenario, "--workers", str(WORKERS)]
    if n is not None:
        cmd += ["--n", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def machine() -> dict[str, Any]:
    return {
        "affinity": sorted(os.sched_getaffinity(0)),
        "loadavg": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", action="store_true", help="also run the Node reference")
    parser.add_argument("--n", type=int, default=500, help="runs per latency scenario")
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": machine(), "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
    report["ours"] = asyncio.run(ours(args.n, max(100, args.n // 2), 30))
    if args.reference:
        report["reference"] = {
            s: reference(s, n) for s, n in
            [("trivial", args.n), ("tools10", max(100, args.n // 2)), ("cpu", 30),
             ("toolrt", None), ("timeout", None), ("rss", None), ("respawn", None)]
        }
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "latest.json").write_text(json.dumps(report, indent=2))
    o = report["ours"]
    print(f"machine: {report['machine']}")
    print(f"{'scenario':<10} {'median ms':>10} {'p99 ms':>10} {'runs/s':>10}")
    for s in ("trivial", "tools10", "cpu"):
        print(f"{s:<10} {o[s]['median_ms']:>10.2f} {o[s]['p99_ms']:>10.2f} {o[s]['throughput_per_s']:>10.0f}")
    print(f"tool call round trip: {o['toolrt']['per_call_e2e_us']:.0f} us (end to end / 200 calls)")
    print(f"timeout 300 ms settles in {o['timeout']['settle_ms_median']:.1f} ms (max {o['timeout']['settle_ms_max']:.1f})")
    print(f"rss per child {o['memory']['rss_per_child_mb']:.1f} MB; respawn {o['memory']['respawn_ms']:.0f} ms")
    if args.reference:
        r = report["reference"]
        print("\nratios ours / reference (lower is better for latency, higher for throughput):")
        for s in ("trivial", "tools10", "cpu"):
            rs = r[s]
            print(f"{s:<10} median {o[s]['median_ms'] / rs['median_ms']:.2f}x  p99 {o[s]['p99_ms'] / rs['p99_ms']:.2f}x"
                  f"  throughput {o[s]['throughput_per_s'] / rs['throughput_per_s']:.2f}x")


if __name__ == "__main__":
    main()
