"""Retained handles in the fleet, the host's side: the table of the fleet handles one
FleetExecutor holds.

A job sent with ``retain_handles=True`` runs on a worker's own ``IsolateExecutor`` with
``retain_handles=True``; when its outcome carries a handle, the worker keeps it (its
executor holds the isolate, in one of its children) and the host gets a *fleet handle*,
``"<worker id>:<local handle>:<token>"`` (``worker/handles.py`` says how it is made).

::

    host                                         worker W (consumes codemode + codemode.worker.W)
    execute(retain_handles=True) ─ job ─▶ codemode ─▶ IsolateExecutor.execute(retain_handles=True)
        ◀── Finished(Outcome(handle="W:7:ab12…")) ── keeps WorkerHandle(local "7", host, route)
    invoke_handle(h, request) ─ job kind=invoke ─▶ codemode.worker.W ─▶ invoke_handle("7", ...)
        tool calls / fetches ◀── the invocation's own reply channel (route.job = this job)
    release_handle(h) ─ job kind=release ─▶ codemode.worker.W ─▶ release_handle("7")

The dispatch and outbound policy stay in the host, in its :class:`HostHandles` table.

Liveness: the worker refreshes ``<prefix>:worker:<W>`` every third of the lease TTL, under
its own prefix and every prefix it holds handles for. A host that finds the key missing
raises HANDLE_LOST at once; an invocation queued for a worker whose key lapses meanwhile
is marked ``worker-gone`` (it never starts) and raises HANDLE_LOST. The worker releases the
handles of a host whose heartbeat key is gone (the host died or closed its executor).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..._faults import HandleExpired, HandleLost
from ..._handles import find_handle
from ..._request import ResolvedRequest
from ..wire import Network

__all__ = ["HostHandle", "HostHandles", "worker_gone_text"]


@dataclass
class HostHandle:
    """One fleet handle this host holds: where it lives and what serves its calls here."""

    id: str
    worker: str
    prefix: str
    request: ResolvedRequest
    """The creating request: its dispatch, outbound policy, timeout and count_host_waits
    serve every invocation."""
    network: Network
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Invocations of one handle go out one at a time, in the order they were made."""
    state: str = "live"  # live, released, expired, lost
    reason: str = ""


class HostHandles:
    """The handles one FleetExecutor holds."""

    def __init__(self) -> None:
        self._records: dict[str, HostHandle] = {}

    def add(
        self, handle: str, *, worker: str, prefix: str, request: ResolvedRequest, network: Network
    ) -> HostHandle:
        record = HostHandle(handle, worker, prefix, request, network)
        self._records[handle] = record
        return record

    def get(self, handle: object) -> HostHandle:
        record = find_handle(self._records, handle)
        if record.state == "expired":
            raise HandleExpired(
                f"Handle {handle} expired after its idle time-to-live on worker "
                f"{record.worker} and was released; run the program again to get a new one."
            )
        if record.state == "released":
            raise HandleLost(f"Handle {handle} was released.")
        if record.state == "lost":
            raise HandleLost(record.reason or f"Handle {handle} is lost; run the program again.")
        return record

    def mark(self, record: HostHandle, state: str, reason: str = "") -> None:
        """Record what became of a handle; the first end wins (lost after released stays
        released)."""
        if record.state == "live":
            record.state = state
            record.reason = reason

    def live(self) -> list[HostHandle]:
        return [r for r in self._records.values() if r.state == "live"]

    def close(self) -> None:
        for record in self._records.values():
            self.mark(record, "released")


def worker_gone_text(handle: str | None, worker: str) -> str:
    return (
        f"Handle {handle} is lost: worker {worker}, which held its isolate, is gone (its "
        "liveness key lapsed: it stopped, was killed or lost Redis). Nothing ran; run the "
        "program again to get a new handle."
    )
