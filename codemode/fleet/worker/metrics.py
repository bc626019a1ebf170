"""A worker's Prometheus metrics, served on ``--metrics-port`` (``CODEMODE_METRICS_PORT``).

The endpoint (``http://<worker>:<port>/metrics``) holds the worker's isolate pool's metrics
(the same as ``IsolateExecutor.metrics_registry``: jobs, latencies, tool calls, children,
restarts) and the fleet's view from this worker::

    codemode_fleet_claims_total{state}        jobs this worker claimed: started, taken (a
                                              redelivery), expired, host-gone, unreachable
    codemode_fleet_jobs_refused_total{reason} messages refused before any claim (unsigned,
                                              bad-signature)
    codemode_fleet_queue_wait_seconds         from the host's enqueue to this worker's intake
    codemode_fleet_admission_slots_in_use     the fleet's admitted jobs (read from Redis at
    codemode_fleet_admission_slots            scrape time) and its bound, fleet_max_jobs

:class:`FleetTally` is bumped where the events happen (plain numbers, each by one thread);
the collector builds the families at scrape time, and reads Redis then, not per job. Queue
wait compares the producer's :data:`~codemode.fleet.wire.ENQUEUED_HEADER` (Redis time, as the
host estimated it) with Redis time as this worker estimates it (``redis/clock.py``'s
offset, read once when the server starts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from ...metrics.tally import QUEUE_WAIT_BUCKETS, Buckets
from ..redis.client import sync_client
from ..redis.keys import admission_key
from ..settings import ENV_WORKER_METRICS_PORT, BrokerSettings

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from ..._executor import IsolateExecutor

__all__ = ["FleetTally", "WorkerMetrics"]

log = logging.getLogger("codemode.fleet.worker")


class FleetTally:
    """The fleet's counts on one worker: claims by state (the loop thread), refusals and
    queue waits (the consumer's thread)."""

    __slots__ = ("claims", "offset_ms", "queue_wait", "refused")

    def __init__(self) -> None:
        self.claims: dict[str, int] = {}
        self.refused: dict[str, int] = {}
        self.queue_wait = Buckets(QUEUE_WAIT_BUCKETS)
        self.offset_ms: float | None = None
        """Redis time minus this worker's wall clock (ms); ``None``: queue waits not measured."""

    def claimed(self, state: str) -> None:
        self.claims[state] = self.claims.get(state, 0) + 1

    def refuse(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def taken(self, enqueued_ms: object) -> None:
        """A message enqueued at ``enqueued_ms`` (its header, whatever it holds) reached
        this worker now."""
        offset = self.offset_ms
        if offset is None or isinstance(enqueued_ms, bool) or not isinstance(enqueued_ms, (int, float)):
            return
        waited_ms = time.time() * 1000 + offset - enqueued_ms
        self.queue_wait.observe(max(0.0, waited_ms) / 1000)


class _FleetCollector:
    """The fleet families, built at scrape time (a prometheus_client custom collector)."""

    def __init__(self, tally: FleetTally, settings: BrokerSettings, client: redis.Redis) -> None:
        self.tally = tally
        self.settings = settings
        self.client = client

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from ...metrics.collector import histogram

        tally = self.tally
        claims = CounterMetricFamily(
            "codemode_fleet_claims", "Jobs this worker claimed, by what the claim found.", labels=("state",)
        )
        for state, count in list(tally.claims.items()):
            claims.add_metric((state,), count)
        yield claims
        refused = CounterMetricFamily(
            "codemode_fleet_jobs_refused",
            "Job messages this worker refused before any claim, by reason.",
            labels=("reason",),
        )
        for reason, count in list(tally.refused.items()):
            refused.add_metric((reason,), count)
        yield refused
        yield histogram(
            "codemode_fleet_queue_wait_seconds",
            "Time from a host's enqueue to this worker taking the job off the queue.",
            tally.queue_wait,
        )
        limit = GaugeMetricFamily(
            "codemode_fleet_admission_slots", "The fleet's admission bound (fleet_max_jobs)."
        )
        limit.add_metric((), self.settings.fleet_max_jobs)
        yield limit
        in_use = GaugeMetricFamily(
            "codemode_fleet_admission_slots_in_use",
            "Jobs queued or running fleet-wide (admitted, not lapsed).",
        )
        try:
            now_ms = int(time.time() * 1000 + (tally.offset_ms or 0.0))
            in_use.add_metric((), self.client.zcount(admission_key(self.settings.key_prefix), now_ms, "+inf"))
        except (redis.exceptions.RedisError, OSError) as exc:  # the scrape goes on without it
            log.warning("metrics: could not read the admission set (%s)", exc)
        yield in_use


class WorkerMetrics:
    """The worker's metrics server: :meth:`serve` starts it, :meth:`close` stops it."""

    def __init__(self, server: Any, thread: Any, port: int) -> None:
        self._server = server
        self._thread = thread
        self.port = port

    @classmethod
    def serve(
        cls, port: int, executor: IsolateExecutor, tally: FleetTally, settings: BrokerSettings
    ) -> WorkerMetrics:
        """Serve ``executor``'s metrics and the fleet's on ``port`` (all interfaces). Raises
        ``SystemExit`` with a sentence when the port cannot be bound or prometheus_client is
        missing: a worker asked for metrics does not start without them."""
        try:
            from prometheus_client import start_http_server
        except ModuleNotFoundError:
            raise SystemExit(
                f"{ENV_WORKER_METRICS_PORT} is set, but prometheus_client is not installed: "
                "pip install 'codemode[fleet]'."
            ) from None
        client = sync_client(settings)
        try:
            seconds, micros = client.time()
            tally.offset_ms = seconds * 1000 + micros / 1000 - time.time() * 1000
        except (redis.exceptions.RedisError, OSError) as exc:
            log.warning("metrics: could not read Redis time (%s); queue waits are not measured", exc)
        registry = executor.metrics_registry
        registry.register(_FleetCollector(tally, settings, client))
        try:
            server, thread = start_http_server(port, registry=registry)
        except OSError as exc:
            raise SystemExit(
                f"The metrics server could not listen on port {port} ({exc.strerror or exc}); "
                f"choose a free port with --metrics-port or {ENV_WORKER_METRICS_PORT}."
            ) from None
        log.info("codemode worker: metrics on http://0.0.0.0:%d/metrics", port)
        return cls(server, thread, port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
