"""Speed and memory of the in-process executor, side by side with the reference design.

    python benchmarks/bench.py                  # ours only
    python benchmarks/bench.py --reference      # interleaved with benchmarks/reference (Node + isolated-vm),
                                                # each load scenario in --rounds alternating rounds (3)
    python benchmarks/bench.py --stdlib-cost    # a 6 * 7 run with and without the standard library
    python benchmarks/bench.py --cpu-per-run    # CPU a trivial run costs the host and each child
    python benchmarks/bench.py --tool-call-cost # CPU and thread switches one tool call costs
    python benchmarks/bench.py --output-cost --tree /tmp/base  # what 1-100 KB of output adds
    python benchmarks/bench.py --cpu-vs-reference --n 400  # CPU per run, ours / the reference's
    python benchmarks/bench.py --env-ab CODEMODE_CHILD_SNAPSHOT=on,off  # a child setting, A/B
    python benchmarks/bench.py --env-ab CODEMODE_LOOP=uvloop,asyncio --ab-program toolrt
    python benchmarks/bench.py --reference --host-loop uvloop   # the host (this process) on uvloop
    python benchmarks/bench.py --reference --busy 1   # both beside one busy neighbour process

The host's event loop is the application's, not codemode's: the default runs this harness on
asyncio's own loop, as an application that installs nothing else does; ``--host-loop uvloop``
runs it on uvloop (libuv, the loop the reference's Node parent runs on), as an application
served by uvicorn with its default extras does. Each child runs uvloop either way.

Every scenario runs the programs in ``benchmarks/programs.json`` (shared with the Node
harness). Latency is sequential (one caller); throughput is 2 x workers callers at once.
Results go to ``latest.json`` in the results directory (``outputs.py``); the table goes to stdout. The machine's CPU
affinity and load are recorded, because tool-call latency depends on both. ``--busy N`` runs
the comparison beside N neighbour processes that spin at the default priority, as on a
machine shared with other work (results in ``busy.json``): the production case a quiet
benchmark machine never shows, and the one that showed batch scheduling's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from neighbours import busy_neighbours
from outputs import RESULTS_DIR

from codemode import IsolateExecutor, tool_result

HERE = Path(__file__).resolve().parent
PROGRAMS_PATH = Path(os.environ.get("CODEMODE_BENCH_PROGRAMS", HERE / "programs.json"))
"""The programs both harnesses run; CODEMODE_BENCH_PROGRAMS names another file of the same
shape (a variant of a scenario's program, to split what its cost is made of)."""
PROGRAMS = json.loads(PROGRAMS_PATH.read_text())
WORKERS = 2
HOST_LOOP = "asyncio"
"""This process's event loop (``--host-loop``), recorded with every result."""
BUSY_NEIGHBOURS = 0
"""Processes spinning beside the measurement (``--busy``), recorded with every result."""
CPU_RUNS = 60
"""Runs of (c) per phase, each side: at ~45 ms a run, 30 made a throughput phase under a
second long, and one busy moment of the machine moved a round by 30%."""


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
    """Sequential latency (one caller) and throughput (2 x workers callers)."""
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

    busy_before, host_before = _machine_ticks(), time.process_time()
    t = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    wall = time.perf_counter() - t
    host_ms = (time.process_time() - host_before) / n * 1e3
    return {
        **summary(latencies),
        "throughput_per_s": n / wall,
        "n": n,
        "latencies_ms": latencies,
        "concurrent_host_cpu_ms_per_run": host_ms,
        "concurrent_machine_busy": _busy_since(busy_before),
    }


def _machine_ticks() -> tuple[int, int]:
    """The machine's idle and total CPU ticks so far (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields)


def _busy_since(before: tuple[int, int]) -> float:
    """The share of the machine's CPU time that was busy since ``before``: where a design's
    throughput falls short of its CPU per run, this says whether its cores sat idle."""
    idle, total = _machine_ticks()
    return 1 - (idle - before[0]) / max(1, total - before[1])


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
    return {
        "settle_ms_median": statistics.median(settles),
        "settle_ms_max": max(settles),
        "bound_ms": program["timeout"],
    }


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
    for k in range(5):
        # As the reference does (its pool.ready()): kill from a pool at rest, which here
        # includes its standby child loaded and waiting (see docs/performance.md).
        deadline = time.monotonic() + 10
        while ex.standby_pid is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        pids = set(ex.worker_pids)
        victim = sorted(pids)[k % WORKERS]
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


SCENARIOS = ["trivial", "tools10", "cpu", "toolrt", "timeout", "memory"]


async def run_scenario(ex: IsolateExecutor, name: str, n: int) -> dict[str, Any]:
    if name in ("trivial", "tools10", "cpu"):
        count = {"trivial": n, "tools10": max(100, n // 2), "cpu": CPU_RUNS}[name]
        return await latency_and_throughput(ex, name, count)
    if name == "toolrt":
        return await tool_round_trip(ex)
    if name == "timeout":
        return await timeout_accuracy(ex)
    return await resident_and_respawn(ex)


REFERENCE_ARGS = {
    "trivial": ("trivial", None),
    "tools10": ("tools10", None),
    "cpu": ("cpu", CPU_RUNS),
    "toolrt": ("toolrt", None),
    "timeout": ("timeout", None),
    "memory": ("rss", None),
}


LOAD_SCENARIOS = ("trivial", "tools10", "cpu")


def pooled(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's rounds of a latency-and-throughput scenario as one result: median and p99
    over every round's latencies (one percentile rule for both sides), throughput the
    median of the rounds' (each round's figure kept beside it)."""
    latencies = [x for r in rounds for x in r["latencies_ms"]]
    throughputs = [r["throughput_per_s"] for r in rounds]
    shares = {
        f"{key}_rounds": [r[key] for r in rounds if key in r]
        for key in ("concurrent_host_cpu_ms_per_run", "concurrent_machine_busy")
    }
    return {
        **rounds[-1],
        **summary(latencies),
        "latencies_ms": latencies,
        "n": len(latencies),
        "throughput_per_s": statistics.median(throughputs),
        "throughput_rounds": throughputs,
        **shares,
    }


async def run_all(n: int, with_reference: bool, rounds: int = 1) -> dict[str, Any]:
    """Each scenario runs on our executor, then (if asked) on the reference, in turn; the
    load scenarios (trivial, tools10, cpu) ``rounds`` times each way, alternating, so that
    a busy spell of this shared machine falls on both sides rather than on one."""
    ours: dict[str, Any] = {}
    ref: dict[str, Any] = {}
    async with IsolateExecutor(pool={"max_workers": WORKERS, "max_queue": 1000}) as ex:
        await ex.execute("() => 1")
        # A pool at rest, as the reference's pool.ready(): every child, and the standby.
        deadline = time.monotonic() + 30
        while (len(ex.worker_pids) < WORKERS or ex.standby_pid is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for name in SCENARIOS:
            ours_rounds, ref_rounds = [], []
            for _round in range(rounds if name in LOAD_SCENARIOS else 1):
                ours_rounds.append(await run_scenario(ex, name, n))
                if with_reference:
                    scenario, count = REFERENCE_ARGS[name]
                    if name in ("trivial", "tools10"):
                        count = n if name == "trivial" else max(100, n // 2)
                    ref_rounds.append(await asyncio.to_thread(reference, scenario, count))
            ours[name] = pooled(ours_rounds) if name in LOAD_SCENARIOS else ours_rounds[0]
            if with_reference:
                ref[name] = pooled(ref_rounds) if name in LOAD_SCENARIOS else ref_rounds[0]
                if name == "memory":
                    ref["respawn"] = await asyncio.to_thread(reference, "respawn", None)
    return {"ours": ours, "reference": ref}


async def stdlib_cost(n: int) -> dict[str, Any]:
    """A 6 * 7 run with the standard library installed (lazily) and with none at all."""
    out: dict[str, list[float]] = {"with": [], "without": []}
    for _round in range(3):
        for label, env in (("with", "on"), ("without", "off")):
            child_env = dict(os.environ, CODEMODE_CHILD_STDLIB=env)
            async with IsolateExecutor(pool={"max_workers": WORKERS}, child_env=child_env) as ex:
                await ex.execute("() => 1")
                while len(ex.worker_pids) < WORKERS:
                    await asyncio.sleep(0.05)
                result = await latency_and_throughput(ex, "trivial", n)
                out[label].append(result["median_ms"])
    with_ms, without_ms = statistics.median(out["with"]), statistics.median(out["without"])
    return {"median_ms_with": with_ms, "median_ms_without": without_ms, "ratio": with_ms / without_ms}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_per_run(n: int) -> dict[str, Any]:
    """CPU one trivial run costs: the host's and its child's, under 2 x workers callers.

    Throughput and back-to-back latency are CPU-bound on a 2-core machine (two children and
    the host share it), so this is the number every speed-up has to move."""
    code = PROGRAMS["trivial"]["code"]
    async with IsolateExecutor(pool={"max_workers": WORKERS, "max_queue": 1000}) as ex:
        for _ in range(50):
            await ex.execute(code)
        pids = ex.worker_pids
        before = {pid: _cpu_s(pid) for pid in pids}
        host_before = time.process_time()
        started = time.perf_counter()

        async def caller(k: int) -> None:
            for _ in range(k):
                await ex.execute(code)

        await asyncio.gather(*(caller(n // (2 * WORKERS)) for _ in range(2 * WORKERS)))
        wall = time.perf_counter() - started
        host_ms = (time.process_time() - host_before) / n * 1e3
        child_ms = sum(_cpu_s(pid) - before[pid] for pid in pids) / n * 1e3
    return {"n": n, "runs_per_s": n / wall, "host_cpu_ms_per_run": host_ms, "child_cpu_ms_per_run": child_ms}


def _switches(pid: int) -> int:
    """Context switches of a process's live threads (ended threads are not counted)."""
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:
            pass  # the thread ended meanwhile
    return total


async def tool_call_cost(runs: int) -> dict[str, Any]:
    """What one relayed tool call costs: wall time, the child's and the host's CPU, and the
    child's thread switches, over ``runs`` chains of 200 sequential calls on one child.
    Switch counts are steadier than times on a shared machine: compare variants with them
    first. A run's isolate thread ends with the run, so its own switches are not counted."""
    program = PROGRAMS["toolrt"]
    kwargs = {"providers": _providers(program), "dispatch": dispatch, "timeout": program["timeout"]}
    async with IsolateExecutor(pool={"max_workers": 1}) as ex:
        for _ in range(5):
            await ex.execute(program["code"], **kwargs)
        [pid] = ex.worker_pids
        cpu, switches, host, started = _cpu_s(pid), _switches(pid), time.process_time(), time.perf_counter()
        for _ in range(runs):
            outcome = await ex.execute(program["code"], **kwargs)
            assert outcome.error is None, outcome.error
        wall = time.perf_counter() - started
        n = runs * 200
        return {
            "calls": n,
            "wall_us_per_call": wall / n * 1e6,
            "child_cpu_us_per_call": (_cpu_s(pid) - cpu) / n * 1e6,
            "host_cpu_us_per_call": (time.process_time() - host) / n * 1e6,
            "child_switches_per_call": (_switches(pid) - switches) / n,
        }


def reference(scenario: str, n: int | None = None) -> dict[str, Any]:
    cmd = [
        "node",
        str(HERE / "reference" / "bench.js"),
        "--scenario",
        scenario,
        "--workers",
        str(WORKERS),
        "--programs",
        str(PROGRAMS_PATH),
    ]
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
        "host_loop": HOST_LOOP,
        "busy_neighbours": BUSY_NEIGHBOURS,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Latency distributions, ours beside the reference (needs matplotlib: the bench extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: pip install -e '.[bench]' for the plot)")
        return
    names = [s for s in ("trivial", "tools10", "cpu") if "latencies_ms" in report["ours"].get(s, {})]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4))
    for ax, name in zip(axes, names, strict=True):
        data = [report["ours"][name]["latencies_ms"]]
        labels = ["codemode"]
        ref = report.get("reference", {}).get(name)
        if ref and ref.get("latencies_ms"):
            data.append(ref["latencies_ms"])
            labels.append("reference")
        ax.boxplot(data, tick_labels=labels, showfliers=False)
        ax.set_title(f"{name}: latency (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


async def env_ab(variable: str, values: tuple[str, str], program_name: str, rounds: int) -> dict[str, Any]:
    """The child's CPU (and the wall time) per trivial run or per tool call with a child
    environment variable at each of two values (``CODEMODE_CHILD_SNAPSHOT=on,off``,
    ``CODEMODE_LOOP=uvloop,asyncio``): two executors of one child each, side by side, in
    alternating blocks, both orders in turn, so the machine's drift falls on both alike.
    Trivial blocks are 200 runs from 4 callers; toolrt blocks are 4 runs of 200 calls."""
    program = PROGRAMS[program_name]
    kwargs = {"providers": _providers(program), "dispatch": dispatch, "timeout": 60_000}
    per_block = 200 if program_name == "trivial" else 4 * program["tool_calls"]
    cpu: dict[str, list[float]] = {v: [] for v in values}
    wall: dict[str, list[float]] = {v: [] for v in values}
    async with contextlib.AsyncExitStack() as stack:
        executors = {}
        for value in values:
            env = dict(os.environ, **{variable: value})
            ex = await stack.enter_async_context(IsolateExecutor(pool={"max_workers": 1}, child_env=env))
            for _ in range(20):
                await ex.execute(program["code"], **kwargs)
            executors[value] = ex
        for r in range(rounds):
            for value in values if r % 2 == 0 else values[::-1]:
                ex = executors[value]
                [pid] = ex.worker_pids
                before, started = _cpu_s(pid), time.perf_counter()
                if program_name == "trivial":

                    async def caller(e: IsolateExecutor = ex) -> None:
                        for _ in range(per_block // 4):
                            await e.execute(program["code"], **kwargs)

                    await asyncio.gather(*(caller() for _ in range(4)))
                else:
                    for _ in range(4):
                        await ex.execute(program["code"], **kwargs)
                wall[value].append((time.perf_counter() - started) / per_block * 1e6)
                cpu[value].append((_cpu_s(pid) - before) / per_block * 1e6)
    return {
        "variable": variable,
        "program": program_name,
        "rounds": rounds,
        "per": "run" if program_name == "trivial" else "call",
        "child_cpu_us": cpu,
        "wall_us": wall,
        "median_child_cpu_us": {v: statistics.median(cpu[v]) for v in values},
        "median_wall_us": {v: statistics.median(wall[v]) for v in values},
    }


OUTPUTS = {
    "nothing": "async () => 1",
    "result 1 KB": "async () => 'x'.repeat(1000)",
    "result 10 KB": "async () => 'x'.repeat(10000)",
    "result 100 KB": "async () => 'x'.repeat(100000)",
    "log line 100 KB": "async () => { console.log('x'.repeat(100000)); return 1 }",
}


async def output_cost(trees: list[str], rounds: int) -> dict[str, Any]:
    """What a program's output adds to a run: the median wall time of runs that return or
    log 1-100 KB, less a run that returns 1, one caller, on an executor of one child per
    source tree ("this tree", and each of ``trees`` first on the child's PYTHONPATH), in
    alternating blocks of 20 runs."""
    sides = {"this tree": dict(os.environ), **{t: dict(os.environ, PYTHONPATH=t) for t in trees}}
    wall: dict[str, dict[str, list[float]]] = {side: {k: [] for k in OUTPUTS} for side in sides}
    async with contextlib.AsyncExitStack() as stack:
        executors = {
            side: await stack.enter_async_context(IsolateExecutor(pool={"max_workers": 1}, child_env=env))
            for side, env in sides.items()
        }
        for r in range(rounds):
            for side in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                for name, code in OUTPUTS.items():
                    for i in range(25):
                        t = time.perf_counter()
                        outcome = await executors[side].execute(code)
                        if i >= 5:  # the first few after a switch wait for spare isolates
                            wall[side][name].append((time.perf_counter() - t) * 1e3)
                        assert outcome.error is None, outcome.error
    medians = {side: {k: statistics.median(v) for k, v in runs.items()} for side, runs in wall.items()}
    return {
        "rounds": rounds,
        "median_ms": medians,
        "added_ms": {
            side: {k: m[k] - m["nothing"] for k in OUTPUTS if k != "nothing"} for side, m in medians.items()
        },
    }


ISOLATE_COST_SCRIPT = r"""
import asyncio, json, sys, time
from py_mini_racer import init_mini_racer
dll = init_mini_racer(flags=["--single-threaded", "--no-sparkplug", "--no-decommit-pooled-pages",
                             "--max-old-space-size=256"])
from codemode._child import miniracer_internals as engine, runtime, snapshot, threads
from codemode._child.main import Child
variant, n = sys.argv[1], int(sys.argv[2])
child = Child(1, 128, 1 << 20, 100, 0, 1)
child.load_stdlib()
source_with_config = runtime.with_config(child.config_json())
modules = runtime.SNAPSHOT_MODULES if variant == "runtime+console" else ()
preload = {m: child.stdlib_sources[m] for m in modules}
source = "0" if variant == "V8 alone" else f"{source_with_config}\n__codemode_preload({json.dumps(preload)});"
assert snapshot.install(dll, source) is None
engine._use_os_entropy(dll)
loop, thread, alive = asyncio.new_event_loop(), threads.CallbackThread(), []
for i in range(n + 20):
    if i == 20:
        started = time.process_time()
    ctx, free = engine.new_context(loop, lambda _id, _raw: False, thread)
    alive.append(free)
    if len(alive) > 2:  # (two stay alive, as a child's spares do: the read-only heap is shared)
        alive.pop(0)()
print(json.dumps({"us": (time.process_time() - started) / n * 1e6}))
"""
ISOLATE_VARIANTS = ("V8 alone", "runtime", "runtime+console")


def isolate_cost(n: int, rounds: int) -> dict[str, Any]:
    """CPU to create and free one bare context through mini-racer (its isolate, its thread,
    its context) from a snapshot of: V8 alone (an empty script), the runtime (with the tool
    path it exercises), and the runtime with the modules a child preloads (console): V8's own
    part of a run, and what the runtime and console add to every isolate. Each variant in a
    fresh process, ``n`` contexts, in alternating rounds."""
    cpu: dict[str, list[float]] = {v: [] for v in ISOLATE_VARIANTS}
    for r in range(rounds):
        for variant in ISOLATE_VARIANTS if r % 2 == 0 else ISOLATE_VARIANTS[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", ISOLATE_COST_SCRIPT, variant, str(n)],
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            )
            cpu[variant].append(json.loads(out.stdout.strip().splitlines()[-1])["us"])
    return {
        "n": n,
        "rounds": rounds,
        "cpu_us": cpu,
        "median_cpu_us": {v: statistics.median(c) for v, c in cpu.items()},
    }


async def one_scenario(name: str, n: int) -> None:
    """One load scenario on a fresh pool, as the reference's harness runs one (the body of
    a :func:`cpu_vs_reference` sample)."""
    async with IsolateExecutor(pool={"max_workers": WORKERS, "max_queue": 1000}) as ex:
        await latency_and_throughput(ex, name, n)


def _children_usage(cmd: list[str]) -> dict[str, float]:
    """CPU (user + system, s), minor page faults and context switches (voluntary,
    involuntary) that ``cmd`` and every process under it spent, once it exits: each harness
    waits for its pool's children, so theirs is counted in it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_ms": ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) * 1e3,
        "faults": after.ru_minflt - before.ru_minflt,
        "voluntary_switches": after.ru_nvcsw - before.ru_nvcsw,
        "involuntary_switches": after.ru_nivcsw - before.ru_nivcsw,
    }


def cpu_vs_reference(scenarios: list[str], small: int, large: int, rounds: int) -> dict[str, Any]:
    """The machine's CPU per run, ours beside the reference's, for each load scenario: the
    CPU every process of a harness spent (host, children, what they started) for ``large``
    runs each way (sequential, then concurrent) less what it spent for ``small``, over the
    difference in runs. Starting the pool, warming it up and shutting it down cancel out.
    At saturation throughput is this number's inverse times the cores, so a ratio here is
    the part of a throughput ratio that no phase of the machine moves much. Minor page
    faults and context switches per run are counted the same way: they are what a slow
    phase of this machine (a busy host under the VM) makes dearer."""
    harness = {
        "ours": lambda s, n: [
            sys.executable,
            str(Path(__file__).resolve()),
            "--one-scenario",
            s,
            "--n",
            str(n),
            "--host-loop",
            HOST_LOOP,
        ],
        "reference": lambda s, n: [
            "node",
            str(HERE / "reference" / "bench.js"),
            "--scenario",
            s,
            "--workers",
            str(WORKERS),
            "--n",
            str(n),
            "--programs",
            str(PROGRAMS_PATH),
        ],
    }
    out: dict[str, Any] = {}
    for scenario in scenarios:
        per_run: dict[str, dict[str, list[float]]] = {side: {} for side in harness}
        for r in range(rounds):
            for side in list(harness) if r % 2 == 0 else list(harness)[::-1]:
                command = harness[side]
                large_use = _children_usage(command(scenario, large))
                small_use = _children_usage(command(scenario, small))
                for key in large_use:
                    per_run[side].setdefault(key, []).append(
                        (large_use[key] - small_use[key]) / (2 * (large - small))
                    )
        medians = {side: {key: statistics.median(v) for key, v in m.items()} for side, m in per_run.items()}
        out[scenario] = {
            "per_run": per_run,
            "median_per_run": medians,
            "cpu_ratio": medians["ours"]["cpu_ms"] / medians["reference"]["cpu_ms"],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--reference", action="store_true", help="also run the Node reference")
    parser.add_argument("--stdlib-cost", action="store_true", help="trivial run with/without the stdlib")
    parser.add_argument("--cpu-per-run", action="store_true", help="CPU a trivial run costs")
    parser.add_argument(
        "--isolate-cost",
        action="store_true",
        help="CPU to create and free a bare isolate: V8 alone, + runtime, + console",
    )
    parser.add_argument("--tool-call-cost", action="store_true", help="CPU and switches per tool call")
    parser.add_argument(
        "--env-ab",
        metavar="VAR=A,B",
        help="child CPU with a child environment variable at two values, side by side",
    )
    parser.add_argument(
        "--ab-program",
        default="trivial",
        choices=("trivial", "toolrt"),
        help="what --env-ab runs: trivial runs or 200-call chains",
    )
    parser.add_argument(
        "--cpu-vs-reference",
        action="store_true",
        help="the machine's CPU per run, ours beside the reference's (trivial, tools10)",
    )
    parser.add_argument(
        "--output-cost",
        action="store_true",
        help="what returning or logging 1-100 KB adds to a run (--tree: beside another tree)",
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="another source tree for --output-cost (first on its child's PYTHONPATH)",
    )
    parser.add_argument("--one-scenario", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=500, help="runs per latency scenario")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each load scenario per side, alternating (pooled)"
    )
    parser.add_argument(
        "--host-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="this process's event loop (the host's; children run uvloop)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run beside N spinning neighbour processes (results in busy.json)",
    )
    args = parser.parse_args()
    global HOST_LOOP, BUSY_NEIGHBOURS
    HOST_LOOP = args.host_loop
    BUSY_NEIGHBOURS = args.busy
    if HOST_LOOP == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    if args.one_scenario:
        asyncio.run(one_scenario(args.one_scenario, args.n))
        return
    out_dir = RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.cpu_vs_reference:
        cpu_ref = cpu_vs_reference(["trivial", "tools10"], 100, 100 + args.n, args.rounds)
        report_cpu = {"machine": machine(), **cpu_ref}
        (out_dir / "cpu_vs_reference.json").write_text(json.dumps(report_cpu, indent=2))
        for scenario, row in cpu_ref.items():
            o, r = row["median_per_run"]["ours"], row["median_per_run"]["reference"]
            print(
                f"{scenario}: {o['cpu_ms']:.2f} ms of CPU per run, reference {r['cpu_ms']:.2f} ms: "
                f"{row['cpu_ratio']:.2f}x (median of {args.rounds} rounds); per run, ours / "
                f"reference: {o['faults']:.0f} / {r['faults']:.0f} page faults, "
                f"{o['voluntary_switches']:.1f} / {r['voluntary_switches']:.1f} voluntary and "
                f"{o['involuntary_switches']:.1f} / {r['involuntary_switches']:.1f} involuntary switches"
            )
        return
    if args.output_cost:
        cost = asyncio.run(output_cost(args.tree, args.rounds))
        (out_dir / "output_cost.json").write_text(json.dumps({"machine": machine(), **cost}, indent=2))
        for side, added in cost["added_ms"].items():
            print(
                f"{side}: "
                + ", ".join(f"{k} +{v:.2f} ms" for k, v in added.items())
                + f" (a run that returns 1: {cost['median_ms'][side]['nothing']:.2f} ms)"
            )
        return
    if args.tool_call_cost:
        cost = asyncio.run(tool_call_cost(40))
        (out_dir / "tool_call_cost.json").write_text(json.dumps({"machine": machine(), **cost}, indent=2))
        print(
            f"{cost['calls']} calls: wall {cost['wall_us_per_call']:.0f} us/call, child CPU "
            f"{cost['child_cpu_us_per_call']:.0f} us, host CPU {cost['host_cpu_us_per_call']:.0f} us, "
            f"child thread switches {cost['child_switches_per_call']:.1f}/call"
        )
        return
    if args.isolate_cost:
        cost = isolate_cost(args.n, max(args.rounds, 3))
        (out_dir / "isolate_cost.json").write_text(json.dumps({"machine": machine(), **cost}, indent=2))
        m = cost["median_cpu_us"]
        print(
            f"one isolate created and freed, from a snapshot of (median of {cost['rounds']} rounds of "
            f"{cost['n']}): " + ", ".join(f"{v} {m[v]:.0f} us" for v in ISOLATE_VARIANTS)
        )
        return
    if args.cpu_per_run:
        cpu = asyncio.run(cpu_per_run(max(args.n, 2000)))
        (out_dir / "cpu_per_run.json").write_text(json.dumps({"machine": machine(), **cpu}, indent=2))
        print(
            f"{cpu['n']} trivial runs, {cpu['runs_per_s']:.0f} per s: "
            f"{cpu['child_cpu_ms_per_run']:.2f} ms of child CPU and "
            f"{cpu['host_cpu_ms_per_run']:.2f} ms of host CPU per run"
        )
        return
    if args.env_ab:
        variable, _, pair = args.env_ab.partition("=")
        a, _, b = pair.partition(",")
        ab = asyncio.run(env_ab(variable, (a, b), args.ab_program, 10))
        (out_dir / "env_ab.json").write_text(json.dumps({"machine": machine(), **ab}, indent=2))
        for value in (a, b):
            print(
                f"{variable}={value}: child CPU {ab['median_child_cpu_us'][value]:.0f} us, wall "
                f"{ab['median_wall_us'][value]:.0f} us per {ab['per']} (median of {ab['rounds']} blocks)"
            )
        return
    if args.stdlib_cost:
        cost = asyncio.run(stdlib_cost(args.n))
        (out_dir / "stdlib_cost.json").write_text(json.dumps({"machine": machine(), **cost}, indent=2))
        print(
            f"6 * 7 median: {cost['median_ms_with']:.2f} ms with the standard library, "
            f"{cost['median_ms_without']:.2f} ms without ({cost['ratio']:.2f}x)"
        )
        return
    report: dict[str, Any] = {"machine": machine(), "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
    report["rounds"] = args.rounds
    with busy_neighbours(args.busy):
        report.update(asyncio.run(run_all(args.n, args.reference, args.rounds)))
    name = "busy" if args.busy else "latest"
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2))
    plot(report, out_dir / ("latency_busy.png" if args.busy else "latency.png"))
    o = report["ours"]
    print(f"machine: {report['machine']}")
    print(f"{'scenario':<10} {'median ms':>10} {'p99 ms':>10} {'runs/s':>10}")
    for s in ("trivial", "tools10", "cpu"):
        print(f"{s:<10} {o[s]['median_ms']:>10.2f} {o[s]['p99_ms']:>10.2f} {o[s]['throughput_per_s']:>10.0f}")
    print(f"tool call round trip: {o['toolrt']['per_call_e2e_us']:.0f} us (end to end / 200 calls)")
    t = o["timeout"]
    print(f"timeout 300 ms settles in {t['settle_ms_median']:.1f} ms (max {t['settle_ms_max']:.1f})")
    memory = o["memory"]
    print(f"rss per child {memory['rss_per_child_mb']:.1f} MB; respawn {memory['respawn_ms']:.0f} ms")
    if args.reference:
        r = report["reference"]
        print("\nratios ours / reference (latency: lower is better; throughput: higher is better):")
        rows = []
        for s in ("trivial", "tools10", "cpu"):
            rows.append((f"{s} median", o[s]["median_ms"] / r[s]["median_ms"]))
            rows.append((f"{s} p99", o[s]["p99_ms"] / r[s]["p99_ms"]))
            rows.append((f"{s} throughput", o[s]["throughput_per_s"] / r[s]["throughput_per_s"]))
        rows.append(("tool call round trip", o["toolrt"]["per_call_e2e_us"] / r["toolrt"]["per_call_e2e_us"]))
        rows.append(("timeout settle", o["timeout"]["settle_ms_median"] / r["timeout"]["median_ms"]))
        ref_rss = r["memory"]["rss_per_child_mb"]
        if isinstance(ref_rss, list):
            ref_rss = statistics.mean(ref_rss)
        rows.append(("rss per child", o["memory"]["rss_per_child_mb"] / ref_rss))
        rows.append(("respawn", o["memory"]["respawn_ms"] / r["respawn"]["median_ms"]))
        for label, ratio in rows:
            print(f"  {label:<24} {ratio:6.2f}x")
        print(
            "\nunder load (4 callers), median of the rounds: the host's CPU per run (the "
            "reference's parent process) and how busy the machine was:"
        )
        for s in ("trivial", "tools10"):
            ours_host = statistics.median(o[s]["concurrent_host_cpu_ms_per_run_rounds"])
            ours_busy = statistics.median(o[s]["concurrent_machine_busy_rounds"])
            ref_host = statistics.median(r[s]["concurrent_host_cpu_ms_per_run_rounds"])
            ref_busy = statistics.median(r[s]["concurrent_machine_busy_rounds"])
            print(
                f"  {s:<10} host {ours_host:.2f} ms, busy {ours_busy:.0%}; reference's parent "
                f"{ref_host:.2f} ms, busy {ref_busy:.0%}"
            )
        report["ratios"] = dict(rows)
        (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
