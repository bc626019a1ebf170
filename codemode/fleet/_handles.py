"""Retained handles in the fleet: the host's table of them, and the worker's.

A job sent with ``retain_handles=True`` runs on a worker's own ``IsolateExecutor`` with
``retain_handles=True``; when its outcome carries a handle, the worker keeps it (its
executor holds the isolate, in one of its children) and the host gets a *fleet handle*,
``"<worker id>:<local handle>:<token>"``: the worker that holds it, the handle its executor
named, and a random token, so that a worker restarted under the same id (same host name and
pid, as in a container) never serves someone else's isolate under an old name.

::

    host                                         worker W (consumes codemode + codemode.worker.W)
    execute(retain_handles=True) ─ job ─▶ codemode ─▶ IsolateExecutor.execute(retain_handles=True)
        ◀── Finished(Outcome(handle="W:7:ab12…")) ── keeps WorkerHandle(local "7", host, route)
    invoke_handle(h, request) ─ job kind=invoke ─▶ codemode.worker.W ─▶ invoke_handle("7", ...)
        tool calls / fetches ◀── the invocation's own reply channel (route.job = this job)
    release_handle(h) ─ job kind=release ─▶ codemode.worker.W ─▶ release_handle("7")

The dispatch and outbound policy stay in the host, in its :class:`HostHandles` table; on the
worker a :class:`HandleRoute` is the isolate's dispatch and outbound policy for its whole
life, and points at whichever job serves it now (the creating run, then each invocation).

Liveness: the worker refreshes ``<prefix>:worker:<W>`` every third of the lease TTL, under
its own prefix and every prefix it holds handles for. A host that finds the key missing
raises HANDLE_LOST at once; an invocation queued for a worker whose key lapses meanwhile
is marked ``worker-gone`` (it never starts) and raises HANDLE_LOST. The worker releases the
handles of a host whose heartbeat key is gone (the host died or closed its executor).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .._dispatch import CallMessage, Forwarder, tool_error
from .._faults import HandleExpired, HandleLost
from .._handles import find_handle
from .._outbound import OutboundRequest, OutboundResponse
from .._request import ResolvedRequest
from ._errors import RelayRefused
from ._wire import Network

__all__ = [
    "NO_INVOCATION_TEXT",
    "HandleRoute",
    "HostHandle",
    "HostHandles",
    "Relay",
    "WorkerHandle",
    "WorkerHandles",
]

NO_INVOCATION_TEXT = (
    "No request is being handled right now, so this tool call cannot reach the host. "
    "Make tool calls while handling a request."
)
"""A call a retained isolate makes between invocations (nothing can carry it to the host)."""


# ---- the host's side ---------------------------------------------------------------------


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


# ---- the worker's side -------------------------------------------------------------------


class Relay(Protocol):
    """What serves a running job's tool calls and fetches: the job's reply channel."""

    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None: ...

    async def relay_fetch(self, request: OutboundRequest) -> OutboundResponse: ...


class HandleRoute(Forwarder):
    """A retained isolate's dispatch and outbound policy, for its whole life: each call goes
    to the reply channel of the job serving the isolate right now."""

    def __init__(self, job: Relay | None = None) -> None:
        self.job = job

    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None:
        job = self.job
        if job is None:
            answer(tool_error(NO_INVOCATION_TEXT))
        else:
            job.forward(call, answer)

    async def relay_fetch(self, request: OutboundRequest) -> OutboundResponse:
        job = self.job
        if job is None:
            raise RelayRefused(NO_INVOCATION_TEXT)
        return await job.relay_fetch(request)


@dataclass
class WorkerHandle:
    """One handle this worker retains for a host."""

    id: str
    local: str
    """The handle the worker's IsolateExecutor named."""
    host_id: str
    prefix: str
    route: HandleRoute
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while an invocation or the release runs: one at a time, and the route points
    at exactly one job."""


class WorkerHandles:
    """The handles one worker process retains, by fleet handle."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self._by_id: dict[str, WorkerHandle] = {}

    def add(self, local: str, *, host_id: str, prefix: str, route: HandleRoute) -> WorkerHandle:
        fleet_id = f"{self.worker_id}:{local}:{secrets.token_hex(8)}"
        entry = WorkerHandle(fleet_id, local, host_id, prefix, route)
        self._by_id[fleet_id] = entry
        return entry

    def lookup(self, handle: str | None, host_id: str) -> WorkerHandle:
        """The entry for ``handle``, if this worker holds it for ``host_id``; else HANDLE_LOST
        (a handle of another host is not named: it does not exist for this caller)."""
        entry = self._by_id.get(handle or "")
        if entry is None or entry.host_id != host_id:
            raise HandleLost(
                f"Worker {self.worker_id} holds no handle {handle!r} for this host: it was "
                "released, expired, or the worker restarted. Run the program again."
            )
        return entry

    def drop(self, entry: WorkerHandle) -> None:
        if self._by_id.get(entry.id) is entry:
            del self._by_id[entry.id]

    def entries(self) -> list[WorkerHandle]:
        return list(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)
