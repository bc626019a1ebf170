"""What the child process sets up for itself before it serves: the backstops that hold
whatever a program does (death with the host, no core files, its data limit), its core,
its protocol descriptors, and the engine's flags.

Everything here runs once, in :func:`codemode._child.main.main`, most of it before V8 loads.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
import signal
import sys

__all__ = [
    "freeze_startup_objects",
    "ignore_interrupts",
    "init_engine",
    "no_core_dumps",
    "pin_to",
    "private_descriptors",
    "set_parent_death_signal",
]


def set_parent_death_signal() -> None:
    """Die with the host even if it is SIGKILLed (Linux prctl PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the host died before prctl took effect
            os._exit(0)


def ignore_interrupts() -> None:
    """Ctrl+C in a terminal reaches the host's whole process group: the host decides when
    its children end (a fleet process's warm shutdown lets running jobs finish on them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def no_core_dumps() -> None:
    """Never write a core file, whatever limits the host runs under.

    A program can end its child with a signal (V8 aborts at its memory bounds), and the
    child's address space is V8's reservations: terabytes virtual, hundreds of MB
    resident. Where the host's core limit allows a dump, the kernel wrote one into the
    host's working directory for seconds, holding the child's pipes open all the while,
    so its exit (and its replacement) waited on the disk. The limit stops a dump to a
    file; not being dumpable stops one piped to a crash collector too (which the limit
    does not), and keeps other processes of the same user from attaching to a process
    that runs untrusted code."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def freeze_startup_objects() -> None:
    """Keep the collector's oldest generation off what the child built to start.

    The imports, V8's bindings and the standard library's sources leave tens of thousands
    of objects that live as long as the child does; every collection of the oldest
    generation walked them all again, inside whichever run set it off. Frozen, they are
    never walked; the younger generations, which collect what runs leave behind, are
    unchanged."""
    gc.collect()
    gc.freeze()


def pin_to(cpu: str) -> None:
    """Run on one core (the host's choice, see codemode/_host/placement.py), before any isolate
    starts its thread: every thread started later inherits the mask. Threads that already
    exist (a standby child has loaded V8 before it learns its core) are pinned one by one.

    The threads keep the host's scheduling policy. SCHED_BATCH halved a trivial run's
    thread switches on a quiet machine, but a batch thread never preempts what runs on its
    core: beside one busy neighbour process, every wake-up of a tool call waited out the
    neighbour's slice, and tool calls became several times slower (benchmarks/README.md)."""
    if cpu == "any":
        return
    with contextlib.suppress(ValueError, OSError):  # not allowed any more: run anywhere
        for tid in os.listdir("/proc/self/task") if sys.platform.startswith("linux") else ["0"]:
            os.sched_setaffinity(int(tid), {int(cpu)})


def private_descriptors() -> tuple[int, int]:
    """Keep the protocol on private descriptors (returned: in, out); anything printed by
    accident (or by V8) goes to stderr, never into a frame."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    return proto_in, proto_out


def init_engine(memory_limit_mb: int) -> None:
    """Load V8 with the child's flags (and any in ``CODEMODE_CHILD_V8_FLAGS``).

    No Sparkplug: an isolate lives for one run, and its baseline compiler spent more on
    compiling the runtime's hot functions again in every isolate than they gained (tool
    call chains ran faster without it, hot loops still reach the optimizing tiers).
    Pooled pages discarded rather than decommitted: each isolate takes its heap's pages
    from the pool the last one gave back, and a decommitted page costs an mprotect (and a
    fault) to take again; resident memory is the same, a trivial run's CPU lower."""
    from py_mini_racer import init_mini_racer

    flags = [
        "--single-threaded",
        "--no-sparkplug",
        "--no-decommit-pooled-pages",
        f"--max-old-space-size={max(2 * memory_limit_mb, 64)}",
    ]
    extra = os.environ.get("CODEMODE_CHILD_V8_FLAGS", "").split()
    init_mini_racer(flags=flags + extra)
