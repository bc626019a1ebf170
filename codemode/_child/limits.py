"""The child's memory bounds beyond the isolate's heap: the process's data limit
(``RLIMIT_DATA``), its resident memory while a run lasts, and what a finished run may leave
behind.

V8 checks its heap bound only after a collection, and a program's ArrayBuffers, wasm memory
and strings live outside that heap, so the child also watches its own size in
``/proc/self/statm``: while a run lasts (:data:`MEMORY_POLL_S`, and on every bell through
:meth:`MemoryWatch.near_data_limit`) and between runs (:meth:`MemoryWatch.residue_high`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys

__all__ = [
    "DATA_HEADROOM",
    "MB",
    "MEMORY_POLL_S",
    "MemoryWatch",
    "data_limit_bytes",
    "limit_data",
    "malloc_trim",
    "rss_and_data_bytes",
    "rss_bytes",
]

MB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")
MEMORY_POLL_S = 0.01
"""How often a running isolate's heap flag and the process RSS are checked."""

_STATM: int | None = None
_RSS_FIELD, _DATA_FIELD = 1, 5
"""Where ``/proc/self/statm`` keeps the resident pages and the data segment's pages."""


def _statm() -> list[bytes]:
    """The fields of ``/proc/self/statm``, in pages. Read a few times per run and at every
    poll while one is running, so the file stays open (a ``pread`` instead of open, read,
    close)."""
    global _STATM
    if _STATM is None:
        _STATM = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    return os.pread(_STATM, 128, 0).split()


def rss_and_data_bytes() -> tuple[int, int]:
    """The child's resident memory and its data segment (the writable private memory
    ``RLIMIT_DATA`` counts, touched or not: untouched ArrayBuffers are there, not in the
    resident memory), from one read."""
    fields = _statm()
    return int(fields[_RSS_FIELD]) * _PAGE, int(fields[_DATA_FIELD]) * _PAGE


def rss_bytes() -> int:
    """The child's resident memory."""
    return rss_and_data_bytes()[0]


def data_limit_bytes(memory_limit_mb: int) -> int:
    """The child's ``RLIMIT_DATA``. V8 needs about 1 GB of data segment to start (a child
    with its spare isolates needs about half of that); the heap bound comes on top, twice
    over for ArrayBuffers."""
    return (1024 + 2 * memory_limit_mb) * MB


def limit_data(memory_limit_mb: int) -> None:
    """The process backstop, set before V8 loads: oversized ArrayBuffers fail inside V8
    (a catchable ``RangeError``) instead of taking the machine."""
    data_limit = data_limit_bytes(memory_limit_mb)
    resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))


DATA_HEADROOM = 96 * MB
"""A run whose process comes this close to its data limit ends with the memory text.
Right at the limit every allocation fails, and some of the engine's (an allocator's
bookkeeping, a garbage collection's copy) abort the whole process, often with nothing on
stderr: the host could only report a crash. A program gets there by holding untouched
ArrayBuffers until allocation fails (the limit then lies less than one buffer away), so
the headroom is larger than the buffers such a loop takes in one step."""


def malloc_trim() -> None:
    """Hand freed heap pages back to the system (glibc keeps them otherwise), so the
    resident-memory bound measures what the next run uses, not what the last one freed."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)


class MemoryWatch:
    """The process-level bounds of one child: its data alarm (fixed at start), its resident
    limit and the residue a finished run may leave (both set once the child has built its
    baseline: :meth:`set_baseline`)."""

    __slots__ = ("baseline_rss", "data_alarm", "memory_limit_mb", "residue_limit", "rss_limit")

    def __init__(self, memory_limit_mb: int) -> None:
        self.memory_limit_mb = memory_limit_mb
        self.data_alarm = data_limit_bytes(memory_limit_mb) - DATA_HEADROOM
        self.baseline_rss = 0
        self.rss_limit = 0
        self.residue_limit = 0

    def set_baseline(self) -> None:
        """Everything the child holds now is its resident baseline; a run may add its heap
        bound on top, and a finished run may leave this much behind before the child
        recycles instead of letting its residue count against the next run's bound."""
        mb = self.memory_limit_mb * MB
        self.baseline_rss = rss_bytes()
        self.rss_limit = self.baseline_rss + mb * 5 // 4 + 64 * MB
        self.residue_limit = self.baseline_rss + max(64 * MB, mb // 2)

    def near_data_limit(self, data_bytes: int | None = None) -> bool:
        """Whether this process is within DATA_HEADROOM of its data limit (``data_bytes``: its
        data segment as just read, else read now: the memory guard asks at every bell)."""
        if data_bytes is None:
            data_bytes = int(_statm()[_DATA_FIELD]) * _PAGE  # (one read, no helper: every bell)
        return data_bytes > self.data_alarm

    def over(self) -> bool:
        """Whether a running isolate has taken the process past a bound (the poll's check)."""
        rss, data = rss_and_data_bytes()
        return rss > self.rss_limit or self.near_data_limit(data)

    def residue_high(self) -> bool:
        """Whether the resident memory stays above what a finished run may leave, once the
        allocator has given back what it kept (read again only when it was high)."""
        if rss_bytes() <= self.residue_limit:
            return False
        malloc_trim()
        return rss_bytes() > self.residue_limit
