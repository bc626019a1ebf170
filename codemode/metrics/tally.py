"""The executor's counts, kept as plain Python numbers where the events already happen.

No dependency and no lock: each count is bumped by one thread (the executor's event loop),
and a scrape (``collector.py``, on prometheus_client's server thread) reads them as they
are. A scrape may see a job counted before its latency, never a count that goes back.

:class:`Tally` is off until a registry asks for it (``codemode.metrics.registry_for``): an
executor that nobody scrapes keeps no counts.
"""

from __future__ import annotations

import signal
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple

from .._texts import ENTRY_FORM

if TYPE_CHECKING:
    from .._outcome import Outcome

__all__ = [
    "JOB_SECONDS_BUCKETS",
    "QUEUE_WAIT_BUCKETS",
    "TOOL_SECONDS_BUCKETS",
    "Buckets",
    "PoolCensus",
    "Tally",
    "error_code",
    "exit_cause",
]

JOB_SECONDS_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip
"""Upper bounds (s) of the job latency histogram."""
QUEUE_WAIT_BUCKETS: Final = (
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0,
)  # fmt: skip
"""Upper bounds (s) of the queue-wait histograms."""
TOOL_SECONDS_BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
)  # fmt: skip
"""Upper bounds (s) of the tool-call latency histogram."""

_ERROR_PREFIXES: Final = (
    ("Execution timed out at its", "TIMEOUT"),
    ("Execution ran out of memory at its", "MEMORY"),
    (ENTRY_FORM, "ENTRY_FORM"),
)
_ERROR_ENVELOPE: Final = '{"error"'


def error_code(outcome: Outcome) -> str:
    """A program error's kind, for the ``code`` label: TIMEOUT, MEMORY, MESSAGE_CEILING,
    ENTRY_FORM, THROWN (the program threw: ``error_detail`` says where), or OTHER. The sentences themselves are
    ``codemode/_texts.py``'s."""
    error = outcome.error or ""
    if outcome.error_detail is not None:
        return "THROWN"
    for prefix, code in _ERROR_PREFIXES:
        if error.startswith(prefix):
            return code
    if "ceiling on a single message" in error:
        return "MESSAGE_CEILING"
    return "OTHER"


def exit_cause(*, planned: bool, ready: bool, out_of_memory: bool, returncode: int | None) -> str:
    """Why a pool child exited, for the ``cause`` label: ``recycled`` (planned), ``start``
    (it died before it was ready), ``memory`` (V8 said it ran out), the signal that ended
    it (``SIGKILL``, ``SIGSEGV``, ...), ``exit`` (a status of its own) or ``unknown``."""
    if planned:
        return "recycled"
    if not ready:
        return "start"
    if out_of_memory:
        return "memory"
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return "signal"
    return "exit"


class Buckets:
    """A histogram as counts per bucket and a sum (Prometheus's shape, not yet cumulative)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        """Observations per bucket: ``counts[i]`` are at most ``bounds[i]``; the last, above all."""
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` pairs, the last ``+Inf``, as a scrape shows them."""
        counts = list(self.counts)
        out, running = [], 0
        for bound, count in zip((*(repr(float(b)) for b in self.bounds), "+Inf"), counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class PoolCensus(NamedTuple):
    """The pool right now, read at scrape time (``Pool.census``)."""

    busy: int
    """Children serving a run (or holding a retained handle)."""
    idle: int
    starting: int
    """Slots whose child is starting (or replacing one that exited)."""
    waiting: int
    """Callers in line for a child."""
    admission_limit: int
    """Runs in flight plus callers in line the pool admits (``pool.max_workers`` +
    ``pool.max_queue``); past it, QUEUE_FULL."""


class Tally:
    """One executor's counts: jobs by outcome and code, job latency, time waiting for a
    child, tool calls by outcome and their latency, child exits by cause; and ``census``,
    which reads the pool at scrape time (``None`` before the pool starts)."""

    __slots__ = ("census", "child_exits", "job_seconds", "jobs", "queue_wait", "tool_calls", "tool_seconds")

    def __init__(self, census: Callable[[], PoolCensus | None]) -> None:
        self.census = census
        self.jobs: dict[tuple[str, str], int] = {}
        """``(outcome, code)``: ``("ok", "")``, ``("error", "TIMEOUT")``, ``("fault", "QUEUE_FULL")``."""
        self.job_seconds = Buckets(JOB_SECONDS_BUCKETS)
        self.queue_wait = Buckets(QUEUE_WAIT_BUCKETS)
        self.tool_calls: dict[str, int] = {}
        """By outcome: ``ok``, or ``error`` (the envelope rejects the call)."""
        self.tool_seconds = Buckets(TOOL_SECONDS_BUCKETS)
        self.child_exits: dict[str, int] = {}

    def job_done(self, outcome: Outcome, started: float) -> None:
        """A run ended with ``outcome`` (``started``: ``time.monotonic()`` at its call)."""
        self.job_seconds.observe(time.monotonic() - started)
        key = ("ok", "") if outcome.error is None else ("error", error_code(outcome))
        self.jobs[key] = self.jobs.get(key, 0) + 1

    def job_fault(self, code: str, started: float) -> None:
        """A run ended with an ExecutorError of ``code``."""
        self.job_seconds.observe(time.monotonic() - started)
        key = ("fault", code)
        self.jobs[key] = self.jobs.get(key, 0) + 1

    def tool_done(self, envelope: str, started: float) -> None:
        """A tool call was answered with ``envelope``."""
        self.tool_seconds.observe(time.monotonic() - started)
        outcome = "error" if envelope.startswith(_ERROR_ENVELOPE) else "ok"
        self.tool_calls[outcome] = self.tool_calls.get(outcome, 0) + 1

    def child_exited(self, cause: str) -> None:
        self.child_exits[cause] = self.child_exits.get(cause, 0) + 1
