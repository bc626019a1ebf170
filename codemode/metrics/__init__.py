"""Prometheus metrics of an executor, for a host to mount (docs/observability.md).

``IsolateExecutor.metrics_registry`` (and ``SyncIsolateExecutor``'s) is a
``prometheus_client.CollectorRegistry`` holding that executor's metrics; counting starts
when it is first read, so read it when the executor is made. Serve it however the host
serves HTTP::

    from prometheus_client import make_asgi_app, start_http_server

    app.mount("/metrics", make_asgi_app(registry=executor.metrics_registry))  # an ASGI host
    start_http_server(9100, registry=executor.metrics_registry)                # or a port

A fleet worker serves the same metrics of its own isolate pool, and the fleet's, on
``--metrics-port`` (``codemode/fleet/worker/metrics.py``).

::

    tally.py      the counts, bumped where the events happen (no dependency, no lock)
    collector.py  the counts as metric families, built at scrape time (prometheus_client)

The executor runs without ``prometheus_client``; only reading the registry needs it
(``pip install 'codemode[metrics]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .tally import PoolCensus, Tally

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["INSTALL_HINT", "PoolCensus", "Tally", "registry_of"]

INSTALL_HINT: Final = (
    "An executor's metrics need prometheus_client: pip install 'codemode[metrics]' "
    "(the executor itself runs without it)."
)


def registry_of(tally: Tally) -> CollectorRegistry:
    """A registry holding the metrics of ``tally``'s executor. Raises ``ModuleNotFoundError``
    with :data:`INSTALL_HINT` when prometheus_client is missing."""
    try:
        from prometheus_client import CollectorRegistry

        from .collector import ExecutorCollector
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "prometheus_client":
            raise
        raise ModuleNotFoundError(INSTALL_HINT, name=exc.name) from None
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ExecutorCollector(tally))
    return registry
