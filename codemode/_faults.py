"""Executor faults: failures of codemode itself, never of the program it ran.

A program that throws, times out or runs out of memory comes back as ``Outcome.error``
(a sentence for the model). Everything here is different: the executor could not serve
the call, and the host branches on ``code`` and ``retryable``.

Tree::

    ExecutorError                 code          retryable  program may have started
    ├── QueueFull                 QUEUE_FULL    yes        no
    ├── WorkerCrashed             WORKER_CRASHED yes       see ``started``
    ├── Disposed                  DISPOSED      no         see ``started``
    ├── InvalidRequest            INVALID_REQUEST no       no
    ├── BrokerUnreachable         BROKER_UNREACHABLE yes   see ``started``
    ├── HostGone                  HOST_GONE     no         yes
    ├── JobExpired                JOB_EXPIRED   yes        no
    ├── HandleLost                HANDLE_LOST   no         -
    ├── HandleExpired             HANDLE_EXPIRED no        -
    └── Cancelled                 CANCELLED     no         see ``started``

``started`` says whether any program code had begun to run, so a pipeline knows whether a
retry can repeat a tool's side effect. Faults cross process and Redis boundaries as
:class:`FaultData` (msgspec), never pickled; :func:`fault_from_data` rebuilds the class.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

__all__ = [
    "CANCELLED_TEXT",
    "BrokerUnreachable",
    "Cancelled",
    "Disposed",
    "ExecutorError",
    "FaultData",
    "HandleExpired",
    "HandleLost",
    "HostGone",
    "InvalidRequest",
    "JobExpired",
    "QueueFull",
    "WorkerCrashed",
    "fault_from_data",
]


class FaultData(msgspec.Struct, frozen=True):
    """The wire form of an :class:`ExecutorError` (new fields get defaults, never retype)."""

    code: str
    message: str
    retryable: bool
    started: bool = False
    causes: tuple[str, ...] = ()
    attempts: int = 1
    """Tries the call had when this fault ended it (a :class:`codemode.RetryPolicy`, ``map``
    or a canvas job's retries fill it in; 1 where nothing retried)."""


class ExecutorError(Exception):
    """A failure of the executor itself; carries a stable ``code`` and ``retryable``."""

    code: ClassVar[str] = "EXECUTOR_ERROR"
    retryable: ClassVar[bool] = False

    def __init__(
        self, message: str, *, started: bool = False, causes: tuple[str, ...] = (), attempts: int = 1
    ) -> None:
        super().__init__(message)
        self.message = message
        self.started = started
        self.causes = causes
        self.attempts = attempts
        """Tries the call had when this fault ended it (1: the first try; a
        :class:`codemode.RetryPolicy` and ``map`` count theirs)."""
        if causes:
            # Keep the chain visible in tracebacks: each cause becomes a __cause__ link.
            chained: BaseException | None = None
            for text in reversed(causes):
                err = RuntimeError(text)
                err.__cause__ = chained
                chained = err
            self.__cause__ = chained

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, started={self.started})"

    def to_data(self) -> FaultData:
        return FaultData(self.code, self.message, self.retryable, self.started, self.causes, self.attempts)


class QueueFull(ExecutorError):
    """Every worker is busy and the queue is at its bound; nothing ran."""

    code = "QUEUE_FULL"
    retryable = True


class WorkerCrashed(ExecutorError):
    """A child process died or failed to start; ``started`` tells if the program ran."""

    code = "WORKER_CRASHED"
    retryable = True


class Disposed(ExecutorError):
    """The executor was disposed before or while serving the call."""

    code = "DISPOSED"


class InvalidRequest(ExecutorError):
    """The request is malformed; nothing ran. Fix the request, do not retry it."""

    code = "INVALID_REQUEST"


class BrokerUnreachable(ExecutorError):
    """The fleet's Redis could not be reached (or went away mid-job)."""

    code = "BROKER_UNREACHABLE"
    retryable = True


class HostGone(ExecutorError):
    """The host that owns a job stopped answering its reply channel."""

    code = "HOST_GONE"


class JobExpired(ExecutorError):
    """A fleet job waited in the queue past its deadline and was not started."""

    code = "JOB_EXPIRED"
    retryable = True


class HandleLost(ExecutorError):
    """The isolate behind a retained handle is gone (child died, or released)."""

    code = "HANDLE_LOST"


class HandleExpired(ExecutorError):
    """A retained handle passed its idle time-to-live and was released."""

    code = "HANDLE_EXPIRED"


CANCELLED_TEXT = (
    "This run was cancelled while it ran (an operator revoked its job, or its caller stopped "
    "waiting); the program had started, so tool calls it made may have taken effect. Run it "
    "again only if repeating those calls is safe."
)
"""The declared sentence of a :class:`Cancelled` run that had started."""


class Cancelled(ExecutorError):
    """The run was ended on purpose (a fleet job revoked by an operator, or cancelled by its
    caller); not retryable: whoever cancelled it meant it."""

    code = "CANCELLED"


_BY_CODE: dict[str, type[ExecutorError]] = {
    cls.code: cls
    for cls in (
        QueueFull,
        WorkerCrashed,
        Disposed,
        InvalidRequest,
        BrokerUnreachable,
        HostGone,
        JobExpired,
        HandleLost,
        HandleExpired,
        Cancelled,
    )
}


def fault_from_data(data: FaultData) -> ExecutorError:
    """Rebuild the typed fault from its wire form; unknown codes keep their text."""
    cls = _BY_CODE.get(data.code)
    if cls is None:
        err = ExecutorError(data.message, started=data.started, causes=data.causes, attempts=data.attempts)
        err.code = data.code  # type: ignore[misc]
        return err
    return cls(data.message, started=data.started, causes=data.causes, attempts=data.attempts)
