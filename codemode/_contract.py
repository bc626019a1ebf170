"""The executor contract as types: what every executor's ``execute`` takes and gives back.

:class:`Executor` is satisfied by :class:`codemode.IsolateExecutor` (a pool in your
process) and :class:`codemode.fleet.FleetExecutor` (Celery workers over Redis), so a host
written against it moves from one to the other by changing a constructor;
:class:`SyncExecutor` is the blocking form (:class:`codemode.SyncIsolateExecutor`). The
contract test suite (``tests/contract``) is typed against :class:`Executor`, so mypy holds
both executors to the same signatures.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias

from ._config import Unset
from ._outcome import LogEntry, Outcome
from ._request import Dispatch, Provider
from ._source.module_map import ModuleSpec

if TYPE_CHECKING:
    from ._bulk import BulkResults, Jobs, RetryArg, SyncBulkResults
    from ._outbound import OutboundPolicy

__all__ = [
    "Executor",
    "JSONValue",
    "LogCallback",
    "ModuleSource",
    "ProviderSpec",
    "SyncExecutor",
]

JSONValue: TypeAlias = "Mapping[str, JSONValue] | Sequence[JSONValue] | str | int | float | bool | None"
"""JSON data as Python holds it: what ``inputs`` may be."""
ProviderSpec: TypeAlias = "Provider | Mapping[str, str | Sequence[str]]"
"""One entry of ``providers``: a :class:`Provider`, or ``{"name": ..., "tools": [...]}``."""
ModuleSource: TypeAlias = "str | ModuleSpec | Mapping[str, object]"
"""One entry of ``modules``: its source (an ES module), a :class:`ModuleSpec`, or
``{"source": ..., "type": "esm" | "cjs" | "json"}`` (json may give ``"value"``)."""
LogCallback: TypeAlias = Callable[[LogEntry], "Awaitable[None] | None"]
"""``on_log``: told of each log entry as the program writes it, sync or async."""


class Executor(Protocol):
    """An async executor: one ``execute`` per program, bulk runs, retained handles."""

    async def execute(
        self,
        code: str,
        *,
        inputs: JSONValue | Unset = ...,
        providers: Sequence[ProviderSpec] | None = ...,
        dispatch: Dispatch | None = ...,
        outbound: OutboundPolicy | Unset | None = ...,
        modules: Mapping[str, ModuleSource] | Unset | None = ...,
        timeout: float | Unset | None = ...,
        count_host_waits: bool | Unset | None = ...,
        retain_handles: bool = ...,
        on_log: LogCallback | None = ...,
    ) -> Outcome:
        """Run one program; its failure comes back in ``Outcome.error``, the executor's own
        as an :class:`codemode.ExecutorError`."""
        ...

    async def invoke_handle(
        self, handle: str, request: Mapping[str, object], *, timeout: float | Unset | None = ...
    ) -> Outcome:
        """Call the request handler a run retained."""
        ...

    async def release_handle(self, handle: str) -> None:
        """Let go of a retained handler."""
        ...

    def map(
        self,
        jobs: Jobs,
        *,
        concurrency: int | None = ...,
        retry: RetryArg = ...,
        **options: object,
    ) -> BulkResults:
        """Run many jobs, yielding ``(key, Outcome | ExecutorError)`` as each ends."""
        ...

    def map_ordered(
        self,
        jobs: Jobs,
        *,
        concurrency: int | None = ...,
        retry: RetryArg = ...,
        **options: object,
    ) -> BulkResults:
        """:meth:`map` in input order."""
        ...

    async def aclose(self) -> None:
        """End the executor; calls in flight fail with DISPOSED."""
        ...


class SyncExecutor(Protocol):
    """A blocking executor, for hosts without an event loop."""

    def execute(
        self,
        code: str,
        *,
        inputs: JSONValue | Unset = ...,
        providers: Sequence[ProviderSpec] | None = ...,
        dispatch: Dispatch | None = ...,
        outbound: OutboundPolicy | Unset | None = ...,
        modules: Mapping[str, ModuleSource] | Unset | None = ...,
        timeout: float | Unset | None = ...,
        count_host_waits: bool | Unset | None = ...,
        retain_handles: bool = ...,
        on_log: LogCallback | None = ...,
    ) -> Outcome:
        """Run one program and wait for its outcome."""
        ...

    def invoke_handle(
        self, handle: str, request: Mapping[str, object], *, timeout: float | Unset | None = ...
    ) -> Outcome: ...

    def release_handle(self, handle: str) -> None: ...

    def map(
        self,
        jobs: Jobs,
        *,
        concurrency: int | None = ...,
        retry: RetryArg = ...,
        **options: object,
    ) -> SyncBulkResults: ...

    def map_ordered(
        self,
        jobs: Jobs,
        *,
        concurrency: int | None = ...,
        retry: RetryArg = ...,
        **options: object,
    ) -> SyncBulkResults: ...

    def dispose(self) -> None:
        """End the executor."""
        ...
