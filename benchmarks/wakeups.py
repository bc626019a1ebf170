"""What one wake-up costs on this machine: a process that writes to a pipe another process
sleeps on, across two cores and on one.

Every tool call is a chain of such wake-ups (the isolate's thread wakes the host, the host
wakes the child's loop, the loop wakes the isolate's thread), and so is every fleet job
(host, Redis, worker, child and back). On a virtual machine a wake-up that crosses cores
is an inter-processor interrupt through the hypervisor, and costs more than the work it
wakes: this measures how much, so the per-call and per-job figures in ``README.md`` can be
read against it. Two processes bounce one byte over a pair of pipes, each sleeping in
``epoll`` between bounces (as the host's and the child's event loops do): free to run on
any core, both pinned to one, and each pinned to a core of its own (Linux only)::

    python benchmarks/wakeups.py [--bounces 5000]

Writes ``wakeups.json`` in the results directory (``outputs.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import sys
import time
from typing import Any

from outputs import RESULTS_DIR

RESULTS = RESULTS_DIR / "wakeups.json"


def _echo(inbound: int, outbound: int) -> None:
    """The other process: wait in epoll, answer each byte, stop at ``q``."""
    poller = select.epoll()
    poller.register(inbound, select.EPOLLIN)
    while True:
        poller.poll()
        data = os.read(inbound, 64)
        if data.endswith(b"q"):
            os._exit(0)
        os.write(outbound, b"x")


def bounce(bounces: int, mine: set[int] | None, theirs: set[int] | None) -> dict[str, float]:
    """Median microseconds of a round trip (two wake-ups) and of a write that wakes the
    other process, with this process on cores ``mine`` and the other on ``theirs`` (None:
    wherever the scheduler puts it)."""
    to_echo_r, to_echo_w = os.pipe()
    back_r, back_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if theirs is not None:
            os.sched_setaffinity(0, theirs)
        _echo(to_echo_r, back_w)
    before = os.sched_getaffinity(0)
    if mine is not None:
        os.sched_setaffinity(0, mine)
    try:
        poller = select.epoll()
        poller.register(back_r, select.EPOLLIN)
        writes, trips = [], []
        for i in range(bounces + 200):
            started = time.perf_counter_ns()
            os.write(to_echo_w, b"y")
            written = time.perf_counter_ns()
            poller.poll()
            os.read(back_r, 64)
            ended = time.perf_counter_ns()
            if i >= 200:  # the first ones warm up
                writes.append((written - started) / 1000)
                trips.append((ended - started) / 1000)
        os.write(to_echo_w, b"q")
        os.waitpid(pid, 0)
    finally:
        os.sched_setaffinity(0, before)
    return {
        "round_trip_us": round(statistics.median(trips), 1),
        "waking_write_us": round(statistics.median(writes), 1),
        "n": bounces,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bounces", type=int, default=5000)
    args = parser.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    results: dict[str, Any] = {"cpus": cores, "load_average_1min": os.getloadavg()[0]}
    results["any_core"] = bounce(args.bounces, None, None)
    results["one_core"] = bounce(args.bounces, {cores[0]}, {cores[0]})
    if len(cores) > 1:  # each on a core of its own: every wake-up crosses cores
        results["two_cores"] = bounce(args.bounces, {cores[0]}, {cores[1]})
    for name in ("any_core", "one_core", "two_cores"):
        if name in results:
            row = results[name]
            print(
                f"{name:<10} round trip {row['round_trip_us']:7.1f} us   "
                f"a write that wakes the other {row['waking_write_us']:6.1f} us"
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
