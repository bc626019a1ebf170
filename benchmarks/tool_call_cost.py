"""What one relayed tool call costs, in-process: wall time, the child's CPU, the host's CPU,
and the context switches of the child's threads, over chains of 200 sequential calls.

    python benchmarks/tool_call_cost.py [--runs 40]

Switch counts are steadier than times on a shared machine: compare variants with them first.
Threads that ended during the measurement (a run's isolate thread) are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from codemode import IsolateExecutor  # noqa: E402

PROGRAM = json.loads((HERE / "programs.json").read_text())["toolrt"]
CALLS = 200


async def dispatch(provider: str, tool: str, args_json: str) -> str:
    [arg] = json.loads(args_json)
    return json.dumps({"result": {"i": arg["i"], "name": "item"}})


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> int:
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            for line in Path(status).read_text().splitlines():
                if "ctxt_switches" in line:
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass  # the thread ended meanwhile
    return total


async def main(runs: int) -> None:
    kwargs = {"providers": [{"name": "store", "tools": ["get"]}], "dispatch": dispatch, "timeout": 10_000}
    async with IsolateExecutor(pool={"max_workers": 1}) as ex:
        for _ in range(5):
            await ex.execute(PROGRAM["code"], **kwargs)
        [pid] = ex.worker_pids
        cpu0, sw0, host0, t0 = cpu_s(pid), switches(pid), os.times(), time.perf_counter()
        for _ in range(runs):
            outcome = await ex.execute(PROGRAM["code"], **kwargs)
            assert outcome.error is None, outcome.error
        wall, host1 = time.perf_counter() - t0, os.times()
        n = runs * CALLS
        host = (host1.user + host1.system) - (host0.user + host0.system)
        child = cpu_s(pid) - cpu0
        print(f"{n} calls: wall {wall / n * 1e6:.0f} us/call, child CPU {child / n * 1e6:.0f} us, "
              f"host CPU {host / n * 1e6:.0f} us, child thread switches {(switches(pid) - sw0) / n:.1f}/call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    asyncio.run(main(parser.parse_args().runs))
