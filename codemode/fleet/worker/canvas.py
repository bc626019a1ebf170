"""The canvas task, ``codemode.run``: one program on this worker's isolate pool, for a job
that no host waits on (the contract is ``codemode/fleet/canvas.py``; docs/pipelines.md).

::

    Celery's consumer ─▶ a pool thread: task body ─ runtime.call ─▶ loop: IsolateExecutor
         ▲                   │ claim (SET NX)                      tools: CODEMODE_WORKER_TOOLS
         │                   ▼
    retry message ◀── RetriedFault (autoretry_for)     result / CanvasFault ─▶ result backend

Like ``codemode.execute``, each message is screened first (``strategy.py``: with
``CODEMODE_JOB_KEY`` set, one not signed with the key is dead-lettered and never runs), then
takes Celery's own request path and pool, so it has all of Celery: the result backend, chains, groups and chords, ``link``/``link_error``,
retries, events. Its tools are the worker's (a :class:`codemode.ToolRegistry` named by
``CODEMODE_WORKER_TOOLS``, imported when the worker starts; a path that names none stops
the start with a sentence).

At most once per try: the message is acked late (a worker that dies leaves it to be
restored), and the first thing a try does is claim ``(task id, retry number)`` in Redis. A
restored try that finds its claim taken does not run its program again: it ends with
WORKER_CRASHED (``started=True``), which is retried only for a job marked idempotent.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Final

import msgspec
import redis
from celery import signals

from ..._config import UNSET
from ..._faults import BrokerUnreachable, ExecutorError, WorkerCrashed
from ..._retry import RetryPolicy, note_attempts
from ...tools import ToolRegistry
from ..canvas import (
    CANVAS_TASK_NAME,
    CanvasFault,
    CanvasJob,
    RetriedFault,
    fault_result,
    sign_canvas_messages,
)
from ..errors import BROKER_ERRORS
from ..redis.client import sync_client
from ..settings import ENV_WORKER_TOOLS, BrokerSettings, WorkerSettings
from ..signing import JobSigner
from .intake import Intake
from .runtime import WorkerRuntime
from .strategy import DeadLetters, Screened

__all__ = ["MAX_RETRIES", "RETRY_BACKOFF_MAX_S", "WorkerTools", "register_canvas"]

log = logging.getLogger("codemode.fleet.worker")

MAX_RETRIES: Final = 3
"""Celery retries of one canvas job after its first try (``max_retries``)."""
RETRY_BACKOFF_MAX_S: Final = 30
"""The longest wait before a retry. The waits double from 1 s, with full jitter (Celery's
``retry_backoff=True``, ``retry_jitter=True``)."""


class WorkerTools:
    """The tools of canvas jobs: the registry ``CODEMODE_WORKER_TOOLS`` names, imported
    once, when the worker starts."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.registry: ToolRegistry | None = None
        self._loaded = False

    def load(self) -> ToolRegistry | None:
        """Import the registry (once); raises ``SystemExit`` with a sentence when the
        path names none (the worker's start reports it and exits)."""
        if self._loaded:
            return self.registry
        if self.path:
            module_name, _, attribute = self.path.partition(":")
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:  # the module's own import errors are the operator's to see
                raise SystemExit(
                    f"{ENV_WORKER_TOOLS}={self.path}: cannot import {module_name!r} "
                    f"({type(exc).__name__}: {exc}). Put the module on the worker's PYTHONPATH."
                ) from None
            registry = getattr(module, attribute, None)
            if not isinstance(registry, ToolRegistry):
                raise SystemExit(
                    f"{ENV_WORKER_TOOLS}={self.path}: {module_name}.{attribute} is "
                    f"{type(registry).__name__}, not a codemode.ToolRegistry."
                )
            self.registry = registry
        self._loaded = True
        return self.registry

    def options(self) -> dict[str, Any]:
        """``providers`` and ``dispatch`` for ``execute`` (none without a registry)."""
        registry = self.load()
        if registry is None:
            return {}
        return {"providers": registry.providers(), "dispatch": registry.dispatch}


class Claims:
    """One claim per try of a canvas job, ``<prefix>:canvas:{<task id>}:<retry>``, kept
    twice as long as a message can wait to be restored."""

    def __init__(self, settings: BrokerSettings, worker_id: str) -> None:
        self.settings = settings
        self.worker_id = worker_id
        self._client: redis.Redis | None = None

    def take(self, task_id: str, retry: int) -> None:
        """Claim this try; raises WORKER_CRASHED (``started=True``) when an earlier delivery
        of it took the claim, BROKER_UNREACHABLE (``started=False``) without Redis."""
        if self._client is None:
            self._client = sync_client(self.settings)
        key = f"{self.settings.key_prefix}:canvas:{{{task_id}}}:{retry}"
        try:
            taken = self._client.set(key, self.worker_id, nx=True, ex=2 * self.settings.visibility_timeout_s)
            holder = None if taken else self._client.get(key)
        except BROKER_ERRORS as exc:
            raise BrokerUnreachable(
                "The fleet's Redis could not be reached to claim this canvas job; nothing ran.",
                causes=(f"{type(exc).__name__}: {exc}",),
            ) from None
        if not taken:
            who = holder.decode(errors="replace") if isinstance(holder, bytes) else "another worker"
            raise WorkerCrashed(
                f"This canvas job was delivered again after worker {who} took it (that worker "
                "stopped or lost it while it ran); the program had started, so it was not run twice.",
                started=True,
            )


class CanvasTask:
    """The body of ``codemode.run``: what one try does."""

    def __init__(self, runtime: WorkerRuntime, tools: WorkerTools, claims: Claims) -> None:
        self.runtime = runtime
        self.tools = tools
        self.claims = claims

    def __call__(self, task: Any, previous: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        request = task.request
        on_fault = kwargs.get("on_fault", "raise")
        try:
            job = CanvasJob.of(kwargs, previous)
        except ExecutorError as exc:
            return _settled(CanvasFault.of(exc), on_fault)
        attempt = int(request.retries) + 1
        try:
            self.claims.take(str(request.id), int(request.retries))
            outcome = self.runtime.call(lambda executor: executor.execute(job.code, **self._options(job)))
        except ExecutorError as exc:
            policy = RetryPolicy(attempts=int(task.max_retries) + 1)
            if policy.retries(exc, attempt, idempotent=job.idempotent):
                log.info("canvas job %s: %s (try %d); Celery retries it", request.id, exc.code, attempt)
                raise RetriedFault(
                    exc.code, exc.message, bool(exc.retryable), bool(exc.started), attempt
                ) from None
            note_attempts(exc, attempt)
            return _settled(CanvasFault.of(exc), job.on_fault)
        ran_on = None if outcome.ran_on is None else f"{self.runtime.worker_id}/{outcome.ran_on}"
        return msgspec.structs.replace(outcome, attempts=attempt, ran_on=ran_on).to_dict()

    def _options(self, job: CanvasJob) -> dict[str, Any]:
        options = self.tools.options()
        options["inputs"] = UNSET if job.inputs is msgspec.UNSET else job.inputs
        if job.timeout is not None:
            options["timeout"] = job.timeout
        if job.modules is not None:
            options["modules"] = job.modules
        return options


def _settled(fault: CanvasFault, on_fault: object) -> dict[str, Any]:
    """The job's end with a fault: raised (the task fails with it) or returned as data."""
    if on_fault == "return":
        return fault_result(fault)
    raise fault


def register_canvas(
    app: Any, runtime: WorkerRuntime, settings: BrokerSettings, worker: WorkerSettings
) -> None:
    """Register ``codemode.run`` on ``app`` and import its tools when the worker starts
    (call it before the app's start-up signals are connected, so a bad tools path stops
    the worker before its isolate pool starts). With ``CODEMODE_JOB_KEY`` set, its
    messages are screened like execute jobs (an unsigned or altered one is dead-lettered
    and never runs) and the ones this worker publishes (retries, a chain's next task, a
    chord's callback, errbacks) are signed."""
    sign_canvas_messages(app, JobSigner.from_settings(settings))
    screened = Screened(DeadLetters(settings), Intake.for_canvas(settings, runtime.tally), reads_job=False)
    tools = WorkerTools(worker.tools)
    body = CanvasTask(runtime, tools, Claims(settings, runtime.worker_id))

    def load_tools(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", app) is app:
            tools.load()

    signals.worker_init.connect(load_tools, weak=False)

    @app.task(  # type: ignore[untyped-decorator]
        name=CANVAS_TASK_NAME,
        bind=True,
        ignore_result=False,
        acks_late=True,
        reject_on_worker_lost=True,
        autoretry_for=(RetriedFault,),
        retry_backoff=True,
        retry_backoff_max=RETRY_BACKOFF_MAX_S,
        retry_jitter=True,
        max_retries=MAX_RETRIES,
        Strategy=screened,
    )
    def run(self: Any, *previous: Any, **kwargs: Any) -> dict[str, Any]:
        """Run one canvas job's program; see ``codemode/fleet/canvas.py``."""
        return body(self, previous, kwargs)
