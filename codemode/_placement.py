"""Which CPU each child runs on: one core per child, spread evenly over the cores allowed.

A child's event loop and its isolate's engine thread hand work to each other several times
per run and per tool call, and V8's own helper threads join in. When those hand-offs cross
cores, each wake-up costs an inter-processor interrupt (on a virtual machine, a trip through
the hypervisor): pinning every child to one core, the threads it starts inheriting the mask,
took a trivial run from 3.9 to 2.6 ms, raised throughput by ~40% and cut a tool call's
round trip by ~25% on a 2-core machine (docs/performance.md). The host is never pinned.

Every pool in this process shares one count, so two executors do not both put their first
child on the first core; a child's core is given back when it exits, so its replacement
usually lands where it was. With one allowed core, or ``pool.pin_cpus=False``, nothing is
pinned.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

__all__ = ["give_back_cpu", "take_cpu"]

_lock = threading.Lock()
_children_on: Counter[int] = Counter()


def take_cpu() -> int | None:
    """The allowed core with the fewest of this process's children on it (lowest first),
    counted as taken; ``None`` when there is only one core to run on."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    with _lock:
        cpu = min(allowed, key=lambda c: (_children_on[c], c))
        _children_on[cpu] += 1
    return cpu


def give_back_cpu(cpu: int | None) -> None:
    if cpu is None:
        return
    with _lock:
        _children_on[cpu] -= 1
        if _children_on[cpu] <= 0:
            del _children_on[cpu]
