"""The execute task's Celery ``Request``: revokes end a job on the worker's runtime.

Jobs take Celery's own request path (``strategy.py`` hands each message to Celery's
default strategy): Celery builds a ``Request``, counts it reserved and then active, sends
its events, applies rate limits and revokes, and a pool thread runs the task body, which
waits for the job on the worker's event loop (``runtime.py``). One thing Celery cannot do
for a threads or solo pool is terminate a running task: ``celery control revoke <id>
--terminate`` calls ``Request.terminate(pool, signal)``, whose default asks the pool to
kill the process running it (``terminate_job``, which only prefork implements). A codemode
job is not a process of its own, so :class:`JobRequest` ends the job on the runtime
instead: its run is cancelled, its isolate child recycled, and its host gets ``CANCELLED``
(``started=True``) with the declared sentence; the task body then fails with that code,
which is what ``inspect``, events and Flower show.

A ``task-failed`` event carries the job's ``runtime`` too (Celery sends it with
``task-succeeded`` only), so a monitor shows how long a job that ended with a fault ran.

A job revoked before it starts is discarded by Celery (its ``revoked()`` check, before
the pool takes it); :meth:`JobRequest.revoked` also tells its host, with ``CANCELLED``
(``started=False``), instead of leaving it to wait for its start-by time.

Celery API relied on (``Task.Request`` is documented; the rest is ``Request``'s own, and
``check_request_api`` fails with a sentence when an installed Celery changes it):
``Request.terminate(pool, signal)``, ``Request.revoked()``,
``Request.send_event(type, **fields)``, ``Request.id``,
``Request.time_start``, ``Request.expires``, ``Request.kwargs`` and ``Request.args``.
"""

from __future__ import annotations

import inspect
import logging
import time
from datetime import UTC, datetime
from typing import Any

from celery.worker.request import Request

from .runtime import WorkerRuntime

__all__ = ["JobRequest", "check_request_api", "job_request_class"]

log = logging.getLogger("codemode.fleet.worker")

REQUEST_API: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("terminate", ("self", "pool", "signal")),
    ("revoked", ("self",)),
    ("send_event", ("self", "type", "fields")),
)
"""The ``Request`` methods this module overrides, with the parameters it expects."""
REQUEST_ATTRIBUTES = ("id", "time_start", "expires", "kwargs", "args")


def check_request_api(cls: type[Any] = Request) -> None:
    """Raise ``RuntimeError`` saying what changed when Celery's ``Request`` no longer has
    the methods (with those parameters) or the attributes this module relies on."""
    for name, params in REQUEST_API:
        method = getattr(cls, name, None)
        if method is None or tuple(inspect.signature(method).parameters)[: len(params)] != params:
            raise RuntimeError(
                f"celery.worker.request.Request.{name}{params} is gone or changed in the installed "
                f"Celery: codemode's JobRequest (codemode/fleet/worker/request.py) overrides it to "
                "revoke jobs; update it for this Celery release, or pin Celery below it."
            )
    for attribute in REQUEST_ATTRIBUTES:
        if not hasattr(cls, attribute) and attribute not in getattr(cls, "__slots__", ()):
            raise RuntimeError(
                f"celery.worker.request.Request has no {attribute!r} in the installed Celery: "
                "codemode's JobRequest (codemode/fleet/worker/request.py) reads it; update it "
                "for this Celery release, or pin Celery below it."
            )


class JobRequest(Request):  # type: ignore[misc]
    """A request of the execute task; ``runtime`` is bound by :func:`job_request_class`."""

    runtime: WorkerRuntime
    _host_told = False

    def terminate(self, pool: Any, signal: Any = None) -> None:
        """End the job on the runtime (running, or about to start); the pool is not asked
        (a threads or solo pool cannot kill a task)."""
        log.info("job %s: revoked with --terminate; ending it", self.id)
        self.runtime.revoke(self.id)

    def revoked(self) -> bool:
        """Celery's check, plus: a job revoked before it started has its host told."""
        if not super().revoked():
            return False
        if not self._host_told and not self._expired():
            self._host_told = True
            job = self._job()
            if job is not None:
                self.runtime.cancel_unstarted(job)
        return True

    def send_event(self, type: str, **fields: Any) -> None:
        """Celery's, with the job's runtime on ``task-failed`` as on ``task-succeeded``."""
        if type == "task-failed" and self.time_start and "runtime" not in fields:
            fields["runtime"] = max(0.0, time.time() - self.time_start)
        super().send_event(type, **fields)

    def _expired(self) -> bool:
        expires = self.expires
        if expires is None:
            return False
        return bool(datetime.now(expires.tzinfo or UTC) > expires)

    def _job(self) -> Any:
        kwargs = self.kwargs
        if isinstance(kwargs, dict) and "job" in kwargs:
            return kwargs["job"]
        args = self.args
        return args[0] if isinstance(args, (list, tuple)) and len(args) == 1 else None


def job_request_class(runtime: WorkerRuntime) -> type[JobRequest]:
    """A :class:`JobRequest` class bound to ``runtime`` (Celery instantiates requests
    itself, from the task's ``Request`` class)."""
    return type("JobRequest", (JobRequest,), {"runtime": runtime})
