"""codemode jobs in Celery canvas: ``codemode.run`` as a signature for ``chain``, ``group``
and ``chord``, for jobs that no host waits on.

An execute job (:class:`~codemode.fleet.FleetExecutor`) has a host on its reply channel
for the tool calls and the outcome. A canvas job has none: its tools are the worker's own
(``CODEMODE_WORKER_TOOLS``, a :class:`codemode.ToolRegistry`), and its outcome goes where
Celery puts any task's result (the result backend, ``CODEMODE_RESULT_BACKEND``; the next
task of a chain; a chord's callback)::

    from celery import chord
    from codemode.fleet.canvas import canvas_app, run_signature

    app = canvas_app()  # the fleet's broker and result backend, JSON only
    squares = [run_signature("(n) => n * n", inputs=n, app=app) for n in range(10)]
    total = chord(squares)(run_signature("(rs) => rs.reduce((a, r) => a + r.result, 0)", app=app))
    total.get(timeout=60)["result"]  # 285

What the task returns is plain JSON: ``Outcome.to_dict()`` (``result``, ``error``,
``logs``, the run's metadata, and ``attempts`` after a retry). A program's own failure is
``error``, as everywhere. A fault of the executor (``ExecutorError``) is, by the job's ``on_fault``:

- ``"raise"`` (the default): the task fails with :class:`CanvasFault`, which carries
  ``code``, ``message``, ``retryable`` and ``started`` through the JSON result backend
  (its arguments are exactly those four). A chain stops; a ``link_error`` fires and finds
  the fault with ``AsyncResult(task_id).result``; ``.get()`` raises it.
- ``"return"``: the task succeeds with a fault result, ``{"result": None, "error":
  message, "logs": [], "fault": {code, message, retryable, started}}``: a chord's callback
  gets every job, served or not, and branches on ``"fault"`` (:func:`fault_of`). A chord
  whose header jobs raise calls no callback.

Before either, the worker retries the faults :class:`codemode.RetryPolicy` would (a
retryable fault with ``started=False``, or any retryable fault of a job marked
``idempotent``) with Celery's own retry, declared on the task (``autoretry_for`` with
exponential back-off and jitter, ``max_retries``): the retries are Celery's, visible as
``RETRY`` states, with the same task id.

Signed: with ``CODEMODE_JOB_KEY`` set, every ``codemode.run`` message an app of
:func:`canvas_app` publishes, and every one a worker publishes (a chain's next task, a
chord's callback, an errback, a retry), carries a signature over its body and the headers
that name its try (``signing.py``, :func:`sign_canvas_messages`); a worker with the key
refuses one without it, dead-lettered with the reason. Send canvas jobs from
:func:`canvas_app`'s app (``run_signature(..., app=app)``): Celery's current app signs
nothing.

This module is the contract both sides read, like ``wire.py``: the task name, the job's
fields (:class:`CanvasJob`, checked by the host as it builds a signature and by the worker
as it takes one), the fault and the fault result. The worker's task is
``worker/canvas.py``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from .._faults import ExecutorError, InvalidRequest
from .settings import BrokerSettings
from .signing import SIGNATURE_HEADER, TRY_HEADERS, JobSigner

__all__ = [
    "CANVAS_TASK_NAME",
    "CanvasFault",
    "CanvasJob",
    "RetriedFault",
    "canvas_app",
    "fault_of",
    "fault_result",
    "run_signature",
    "sign_canvas_messages",
]

CANVAS_TASK_NAME: Final = "codemode.run"
"""The canvas task every worker registers."""

JOB_FIELDS: Final = "code, and optionally inputs, timeout, modules, idempotent and on_fault"


class CanvasJob(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A canvas job's keyword arguments (plain JSON in the task message).

    ``inputs`` absent: the entry function gets the previous task's result when there is
    one (a chain's last result, a chord's list of results), else nothing. ``timeout`` is
    in ms (the worker's ceiling applies). ``idempotent``: running the program twice
    repeats no side effect that matters, so a fault with ``started=True`` may be retried.
    """

    code: str
    inputs: Any | msgspec.UnsetType = msgspec.UNSET
    timeout: float | None = None
    modules: dict[str, Any] | None = None
    idempotent: bool = False
    on_fault: Literal["raise", "return"] = "raise"

    @classmethod
    def of(cls, kwargs: object, previous: tuple[Any, ...] = ()) -> CanvasJob:
        """The job from a task's kwargs and positional arguments (what the canvas passed
        on); raises :class:`InvalidRequest` saying what is wrong."""
        try:
            job = msgspec.convert(kwargs, cls)
        except msgspec.ValidationError as exc:
            raise InvalidRequest(
                f"The {CANVAS_TASK_NAME} job is malformed ({exc}); nothing ran. It takes {JOB_FIELDS}."
            ) from None
        if len(previous) > 1:
            raise InvalidRequest(
                f"{CANVAS_TASK_NAME} takes at most one positional argument, the previous task's "
                f"result, got {len(previous)}; nothing ran. Pass the job as keyword arguments."
            )
        if previous and job.inputs is not msgspec.UNSET:
            raise InvalidRequest(
                f"This {CANVAS_TASK_NAME} job got the previous task's result and inputs of its own; "
                "nothing ran. Leave inputs out to receive the result, or make the signature "
                "immutable (run_signature(..., immutable=True)) to ignore it."
            )
        if previous:
            job = msgspec.structs.replace(job, inputs=previous[0])
        return job

    def kwargs(self) -> dict[str, Any]:
        """The task's keyword arguments (defaults and an absent ``inputs`` left out)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


class CanvasFault(Exception):
    """A fault of the executor that ended a canvas job, as data: ``code``, ``message``,
    ``retryable``, ``started`` (whether the program had begun, so whether running it
    again can repeat a tool's side effect) and ``attempts`` (the tries the job had, Celery's
    retries included). Its arguments are those five, so Celery's JSON result backend
    rebuilds it on the host (``AsyncResult.result``, ``.get()``); a fault of one try has the
    first four only, as before ``attempts`` was counted, so a host of an earlier release
    rebuilds it too."""

    def __init__(
        self, code: str, message: str, retryable: bool = False, started: bool = False, attempts: int = 1
    ) -> None:
        if attempts == 1:
            super().__init__(code, message, retryable, started)
        else:
            super().__init__(code, message, retryable, started, attempts)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.started = started
        self.attempts = attempts

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    @classmethod
    def of(cls, error: ExecutorError) -> CanvasFault:
        return cls(error.code, error.message, bool(error.retryable), bool(error.started), error.attempts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "started": self.started,
            "attempts": self.attempts,
        }


class RetriedFault(CanvasFault):
    """A fault the worker retries (the task's ``autoretry_for``): seen as the reason of a
    ``RETRY`` state, never as a job's final result."""


def fault_result(fault: CanvasFault) -> dict[str, Any]:
    """What a job with ``on_fault="return"`` returns for a fault: the keys of a served
    outcome (``error`` is the fault's sentence, so ``error is None`` still means served
    and fine) and ``fault``."""
    served: dict[str, Any] = {"result": None, "error": fault.message, "logs": [], "fault": fault.to_dict()}
    if fault.attempts != 1:  # as a served outcome's dict has it
        served["attempts"] = fault.attempts
    return served


def fault_of(value: object) -> CanvasFault | None:
    """The fault in a canvas job's result (a fault result, or a :class:`CanvasFault`);
    ``None`` for a served outcome (whose program may still have failed: see ``error``)."""
    if isinstance(value, CanvasFault):
        return value
    data = value.get("fault") if isinstance(value, dict) else None
    if not isinstance(data, dict):
        return None
    return CanvasFault(
        str(data.get("code", "")),
        str(data.get("message", "")),
        bool(data.get("retryable", False)),
        bool(data.get("started", False)),
        _attempts(data.get("attempts", 1)),
    )


def _attempts(value: object) -> int:
    """A fault's ``attempts`` from a result (1 where it is missing or not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def canvas_app(settings: BrokerSettings | None = None, *, name: str = "codemode-canvas") -> Any:
    """A Celery app for sending canvas jobs and reading their results: the fleet's broker,
    result backend and serializers (JSON only), from ``settings`` (default: the
    environment, ``CODEMODE_REDIS_URL`` and ``CODEMODE_RESULT_BACKEND``). Groups and
    chords need a result backend, set here and on the workers."""
    from celery import Celery

    settings = BrokerSettings.from_env() if settings is None else settings
    app = Celery(name, set_as_current=False)
    app.conf.update(settings.celery_config())
    sign_canvas_messages(app, JobSigner.from_settings(settings))
    return app


def sign_canvas_messages(app: Any, signer: JobSigner | None) -> None:
    """Make ``app`` (a Celery app) sign each ``codemode.run`` message it publishes with
    ``signer`` (nothing changes without one): the message's body, as the app's serializer
    writes it, and its :data:`~codemode.fleet.signing.TRY_HEADERS`, once Celery has merged
    the headers it was given (a retry's carry the old signature, replaced here).

    It wraps the app's ``amqp.send_task_message``, which every publish of the app goes
    through (``apply_async``, canvas, a worker's retries, chain steps, chord callbacks and
    errbacks), and which reads its configuration once, here (call it after configuring the
    app). Raises :class:`InvalidRequest` for a compressed ``codemode.run`` message: the
    signature covers the JSON body a worker reads.
    """
    if signer is None:
        return
    from kombu.serialization import dumps

    send = app.amqp.send_task_message
    conf = app.conf

    def send_signed(producer: Any, name: str, message: Any, **options: Any) -> Any:
        if name != CANVAS_TASK_NAME:
            return send(producer, name, message, **options)
        headers = message.headers
        headers.update(options.pop("headers", None) or {})  # as Celery merges them, first
        if options.get("compression") or conf.task_compression:
            raise InvalidRequest(
                f"A signed {CANVAS_TASK_NAME} message cannot be compressed (its signature covers "
                "the JSON body a worker reads); send it without compression."
            )
        serializer = options.get("serializer") or conf.task_serializer
        _, encoding, data = dumps(message.body, serializer=serializer)  # type: ignore[no-untyped-call]
        body = data.encode(encoding or "utf-8") if isinstance(data, str) else data
        headers[SIGNATURE_HEADER] = signer.sign(body, headers, TRY_HEADERS)
        return send(producer, name, message, **options)

    app.amqp.send_task_message = send_signed


def run_signature(
    code: str,
    *,
    inputs: Any = msgspec.UNSET,
    timeout: float | None = None,
    modules: dict[str, Any] | None = None,
    idempotent: bool = False,
    on_fault: Literal["raise", "return"] = "raise",
    immutable: bool = False,
    app: Any = None,
    **options: Any,
) -> Any:
    """A ``codemode.run`` signature (``celery.Signature``) for ``code``, to put in a chain,
    group or chord, or to ``apply_async()``.

    ``inputs``: the entry function's one argument (JSON); left out, the program gets the
    previous task's result in a chain or chord. ``immutable``: the previous result is not
    passed (Celery's ``.si()``). ``on_fault``: ``"raise"`` or ``"return"``, see the module
    docstring. ``app``: the Celery app that sends it (:func:`canvas_app`; default: Celery's
    current app). ``options`` are Celery's (``queue``, ``link_error``, ``countdown``, ...).

    Raises :class:`codemode.InvalidRequest` for a job no worker would run.
    """
    code = str(code) if isinstance(code, str) else code  # normalize_code's str subclass: plain text
    fields: dict[str, Any] = {"code": code, "idempotent": idempotent, "on_fault": on_fault}
    if inputs is not msgspec.UNSET:
        fields["inputs"] = inputs
    if timeout is not None:
        fields["timeout"] = timeout
    if modules is not None:
        fields["modules"] = modules
    job = CanvasJob.of(fields)
    try:
        msgspec.json.encode(fields)
    except (TypeError, OverflowError) as exc:
        raise InvalidRequest(
            f"The {CANVAS_TASK_NAME} job must be JSON data ({exc}); inputs and modules travel "
            "in the task message."
        ) from None
    if app is None:
        from celery import signature

        return signature(CANVAS_TASK_NAME, kwargs=job.kwargs(), immutable=immutable, **options)
    return app.signature(CANVAS_TASK_NAME, kwargs=job.kwargs(), immutable=immutable, **options)
