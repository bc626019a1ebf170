"""Retained handles in the fleet, the worker's side: the handles one worker process
retains, and the route that serves a retained isolate's calls.

A job that retains its isolate runs with a :class:`HandleRoute` as its dispatch and
outbound policy: the isolate keeps them for its whole life, and the route points at
whichever job serves it now (the creating run, then each invocation). A handle the
worker keeps is named ``"<worker id>:<local handle>:<token>"``: the worker that holds it,
the handle its executor named, and a random token, so that a worker restarted under the
same id (same host name and pid, as in a container) never serves someone else's isolate
under an old name. The host's side is ``host/handles.py``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..._dispatch import CallMessage, Forwarder, tool_error
from ..._faults import HandleLost
from ..._outbound import OutboundRequest, OutboundResponse
from ..errors import RelayRefused

__all__ = ["NO_INVOCATION_TEXT", "HandleRoute", "Relay", "WorkerHandle", "WorkerHandles"]

NO_INVOCATION_TEXT = (
    "No request is being handled right now, so this tool call cannot reach the host. "
    "Make tool calls while handling a request."
)
"""A call a retained isolate makes between invocations (nothing can carry it to the host)."""


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
