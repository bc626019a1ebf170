"""Which CPU each child runs on: one core per child, spread evenly over the cores allowed,
counted over every process of this user on the host.

A child's event loop and its isolate's engine thread hand work to each other several times
per run and per tool call, and V8's own helper threads join in. When those hand-offs cross
cores, each wake-up costs an inter-processor interrupt (on a virtual machine, a trip through
the hypervisor): pinning every child to one core, the threads it starts inheriting the mask,
raised a 2-core machine's throughput and cut a tool call's round trip (docs/performance.md).
The host is never pinned.

The count is host-wide. Counted per process, every process put its first child on the
first core: four fleet workers on one host put all their isolates on cores 0 and 1. So a
child's core is a *slot*: a file ``cpu<core>.<n>`` in :func:`slots_dir` held under an
exclusive ``flock`` while the child lives. A new child takes the free slot of the lowest
``n``, lowest core first, which is the core with the fewest children of any process. The
kernel drops a process's locks when it exits, however it exits, so nothing is left counted
behind a crashed process. A child's slot is given back when it exits, so its replacement
usually lands where it was. Where the directory cannot be used, the count falls back to
this process alone (as it was). With one allowed core, or ``pool.pin_cpus=False``, nothing
is pinned.

::

    process A: child 1 ─ flock cpu0.0      process B: child 1 ─ flock cpu1.0
               child 2 ─ flock cpu1.1                 child 2 ─ flock cpu0.1
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import tempfile
import threading
from collections import Counter

__all__ = ["SLOTS_DIR_ENV", "give_back_cpu", "slots_dir", "take_cpu"]

log = logging.getLogger("codemode.pool")

SLOTS_DIR_ENV = "CODEMODE_CPU_SLOTS_DIR"
"""Where the slot files live. Processes that share this directory share one count: on one
host, by default, every process of the same user. Containers on one host share it only
through a mounted directory."""

_lock = threading.Lock()
_held: dict[int, list[int]] = {}
"""Per core, the descriptors of the slot files this process holds (each one a child)."""
_local: Counter[int] = Counter()
"""Per core, children counted in this process alone (where the slot files cannot be used)."""


def slots_dir() -> str:
    """The directory of slot files: ``$CODEMODE_CPU_SLOTS_DIR``, else one per user in the
    system's temporary directory."""
    return os.environ.get(SLOTS_DIR_ENV) or os.path.join(
        tempfile.gettempdir(), f"codemode-cpus-{os.getuid()}"
    )


def take_cpu() -> int | None:
    """The allowed core with the fewest children on it host-wide (lowest first), counted as
    taken until :func:`give_back_cpu`; ``None`` when there is only one core to run on."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    with _lock:
        try:
            return _take_slot(slots_dir(), allowed)
        except OSError as exc:
            log.debug("CPU slots unusable (%s): counting this process's children only", exc)
            cpu = min(allowed, key=lambda c: (_local[c], c))
            _local[cpu] += 1
            return cpu


def _take_slot(directory: str, allowed: list[int]) -> int:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for level in itertools.count():
        for cpu in allowed:
            fd = os.open(
                os.path.join(directory, f"cpu{cpu}.{level}"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live child of some process holds it
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            _held.setdefault(cpu, []).append(fd)
            return cpu
    raise AssertionError("unreachable: itertools.count() never ends")


def give_back_cpu(cpu: int | None) -> None:
    """The child on ``cpu`` has exited: its slot is free for the next one."""
    if cpu is None:
        return
    with _lock:
        fds = _held.get(cpu)
        if fds:
            os.close(fds.pop())  # (closing the file drops its lock)
            return
        _local[cpu] -= 1
        if _local[cpu] <= 0:
            del _local[cpu]
