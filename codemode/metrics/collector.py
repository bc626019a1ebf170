"""The executor's counts as Prometheus metrics, built at scrape time (a custom collector).

Nothing here runs on a run's path: :class:`ExecutorCollector` reads the executor's
:class:`~.tally.Tally` and its pool's census when a scrape asks, and builds the metric
families from them. Needs ``prometheus_client`` (``pip install 'codemode[metrics]'``).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .tally import Buckets, Tally

__all__ = ["ExecutorCollector", "histogram"]


def histogram(name: str, documentation: str, buckets: Buckets) -> HistogramMetricFamily:
    """``buckets`` as a Prometheus histogram family (no labels)."""
    family = HistogramMetricFamily(name, documentation, labels=())
    family.add_metric([], buckets.cumulative(), sum_value=buckets.total)
    return family


class ExecutorCollector(Collector):
    """One executor's metrics (docs/observability.md lists each)."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def collect(self) -> Iterator[Metric]:
        tally = self.tally
        jobs = CounterMetricFamily(
            "codemode_jobs",
            "Runs that ended, by outcome (ok, error: the program failed, fault: the executor "
            "could not serve it) and code (the error's kind or the fault's code).",
            labels=("outcome", "code"),
        )
        for (outcome, code), count in list(tally.jobs.items()):
            jobs.add_metric((outcome, code), count)
        yield jobs
        yield histogram(
            "codemode_job_duration_seconds",
            "Time from execute() to its outcome or fault, waiting for a child included.",
            tally.job_seconds,
        )
        yield histogram(
            "codemode_queue_wait_seconds",
            "Time a run waited for a child of the pool before it started.",
            tally.queue_wait,
        )
        calls = CounterMetricFamily(
            "codemode_tool_calls",
            "Tool calls answered, by outcome (ok, or error: the envelope rejects the call).",
            labels=("outcome",),
        )
        for outcome, count in list(tally.tool_calls.items()):
            calls.add_metric((outcome,), count)
        yield calls
        yield histogram(
            "codemode_tool_call_duration_seconds",
            "Time from a program's tool call to its answer, as the host's side sees it.",
            tally.tool_seconds,
        )
        restarts = CounterMetricFamily(
            "codemode_child_restarts",
            "Pool children that exited and were replaced, by cause (recycled, start, memory, "
            "a signal such as SIGKILL, exit).",
            labels=("cause",),
        )
        for cause, count in list(tally.child_exits.items()):
            restarts.add_metric((cause,), count)
        yield restarts
        yield from self._census()

    def _census(self) -> Iterator[Metric]:
        census = self.tally.census()
        children = GaugeMetricFamily(
            "codemode_pool_children",
            "The pool's children by state (busy, idle, starting).",
            labels=("state",),
        )
        waiting = GaugeMetricFamily("codemode_pool_waiting", "Callers in line for a child.")
        in_use = GaugeMetricFamily(
            "codemode_admission_slots_in_use", "Runs in flight plus callers in line (admitted calls)."
        )
        limit = GaugeMetricFamily(
            "codemode_admission_slots",
            "Admitted calls the pool takes at once (pool.max_workers + pool.max_queue); past it, QUEUE_FULL.",
        )
        if census is not None:
            for state in ("busy", "idle", "starting"):
                children.add_metric((state,), getattr(census, state))
            waiting.add_metric((), census.waiting)
            in_use.add_metric((), census.busy + census.waiting)
            limit.add_metric((), census.admission_limit)
        yield from (children, waiting, in_use, limit)
