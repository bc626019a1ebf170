"""Busy neighbours: processes that spin beside a measurement, as on a shared machine.

A benchmark machine is quiet; one that runs agents in production is not. ``bench.py
--busy N`` and ``fleet_bench.py --busy N`` run beside N of these, unpinned and at the
default priority, so that what a wake-up costs when its core is taken shows up in the
numbers (it was how the children's batch scheduling policy was found out: see
``benchmarks/README.md``).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

__all__ = ["busy_neighbours"]


@contextlib.contextmanager
def busy_neighbours(count: int) -> Iterator[None]:
    """``count`` processes that spin until the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
