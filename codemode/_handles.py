"""Retained handles: a run that returned a request handler keeps its isolate serving.

With ``retain_handles=True`` a program that returns a function taking a ``Request`` (or an
object with a ``fetch`` method) keeps its isolate alive in its child, and the outcome
carries ``handle``. ``invoke_handle`` passes requests into that isolate; each invocation is
a run of its own (its own timeout, logs, the same memory bound, the same tools and outbound
policy as the run that created it), and state the program keeps between invocations
survives. A retained isolate occupies its child; the pool serves other runs on the rest.

Bounds: ``max_handles`` retained at once per executor, and ``handle_idle_ttl_s`` after the
last invocation, past which the handle is released and later calls raise HANDLE_EXPIRED.
A handle whose child died, or that was released, raises HANDLE_LOST.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from ._faults import HandleExpired, HandleLost, InvalidRequest
from ._host.child import ChildProcess
from ._request import ResolvedRequest

__all__ = [
    "DEFAULT_HANDLE_IDLE_TTL_S",
    "HandleRecord",
    "HandleTable",
    "find_handle",
    "plain_request",
    "response_outcome_result",
]

FORGET_AFTER_S = 3600.0
"""A released or expired handle is remembered this long (to answer with the right fault)."""
DEFAULT_HANDLE_IDLE_TTL_S = 300.0
"""A retained handle not invoked for this long is released (HANDLE_EXPIRED afterwards)."""

_Record = TypeVar("_Record")


def find_handle(records: Mapping[str, _Record], handle: object) -> _Record:
    """The record behind ``handle``, before any state of it is looked at: the first checks
    of both executors' handle tables (in-process here, the fleet's in fleet/host/handles.py and fleet/worker/handles.py)."""
    if not isinstance(handle, str):
        raise InvalidRequest(f"handle must be the string an outcome carried, got {handle!r}.")
    record = records.get(handle)
    if record is None:
        raise HandleLost(f"No handle {handle!r} is held by this executor.")
    return record


@dataclass
class HandleRecord:
    """One retained isolate, as the host sees it."""

    id: str
    child: ChildProcess
    request: ResolvedRequest
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    state: str = "live"  # live, released, expired
    expiry: asyncio.TimerHandle | None = None
    last_used: float = field(default_factory=time.monotonic)


class HandleTable:
    """The handles one executor retains, with their idle expiry."""

    def __init__(self, max_handles: int, idle_ttl_s: float) -> None:
        self.max_handles = max_handles
        self.idle_ttl_s = idle_ttl_s
        self._records: dict[str, HandleRecord] = {}

    def live_count(self) -> int:
        return sum(1 for r in self._records.values() if r.state == "live" and r.child.alive)

    def add(self, handle: str, child: ChildProcess, request: ResolvedRequest) -> HandleRecord:
        # Forget handles that ended long ago (their callers have had time to hear why).
        cutoff = time.monotonic() - FORGET_AFTER_S
        for key in [k for k, r in self._records.items() if r.state != "live" and r.last_used < cutoff]:
            del self._records[key]
        record = HandleRecord(handle, child, request)
        self._records[handle] = record
        self.touch(record)
        return record

    def touch(self, record: HandleRecord) -> None:
        record.last_used = time.monotonic()
        if record.expiry is not None:
            record.expiry.cancel()
        loop = asyncio.get_running_loop()
        record.expiry = loop.call_later(self.idle_ttl_s, self._expire, record)

    def _expire(self, record: HandleRecord) -> None:
        if record.state == "live" and not record.lock.locked():
            record.state = "expired"
            record.child.release()

    def get(self, handle: object) -> HandleRecord:
        record = find_handle(self._records, handle)
        if record.state == "expired":
            raise HandleExpired(
                f"Handle {handle} expired after {self.idle_ttl_s:g} s without an invocation "
                "and was released; run the program again to get a new one."
            )
        if record.state == "released":
            raise HandleLost(f"Handle {handle} was released.")
        if not record.child.alive or record.child.retained is None:
            raise HandleLost(
                f"Handle {handle} is lost: the child process that held its isolate is gone "
                "(or an invocation hit a bound); run the program again."
            )
        return record

    def release(self, handle: object) -> None:
        record = self.get(handle)
        record.state = "released"
        if record.expiry is not None:
            record.expiry.cancel()
        record.child.release()

    def close(self) -> None:
        for record in self._records.values():
            if record.expiry is not None:
                record.expiry.cancel()
            if record.state == "live":
                record.state = "released"


def plain_request(request: object) -> str:
    """Validate a request for ``invoke_handle`` and encode it as the child expects."""
    if not isinstance(request, Mapping):
        raise InvalidRequest(
            "request must be a mapping like {'method': 'GET', 'url': 'https://x/', "
            "'headers': {...}, 'body': b'...'}."
        )
    method = request.get("method", "GET")
    url = request.get("url")
    if not isinstance(method, str) or not method:
        raise InvalidRequest("request['method'] must be a non-empty string.")
    if not isinstance(url, str) or not url:
        raise InvalidRequest("request['url'] must be an absolute URL string.")
    headers = request.get("headers") or []
    if isinstance(headers, Mapping):
        headers = list(headers.items())
    pairs = []
    for item in headers:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise InvalidRequest("request['headers'] must be a mapping or a list of (name, value) strings.")
        pairs.append([item[0], item[1]])
    body = request.get("body")
    if isinstance(body, str):
        body = body.encode("utf-8")
    if body is not None and not isinstance(body, (bytes, bytearray)):
        raise InvalidRequest("request['body'] must be bytes, str or None.")
    text = None if body is None else bytes(body).decode("latin-1")
    return msgspec.json.encode(
        {"method": method.upper(), "url": url, "headers": pairs, "body": text}
    ).decode()


def response_outcome_result(result: Any) -> Any:
    """The child sends the body as latin-1 text (one char per byte): give it back as text."""
    if isinstance(result, dict) and isinstance(result.get("body"), str):
        raw = result["body"].encode("latin-1")
        return {**result, "body": raw.decode("utf-8", "replace")}
    return result
