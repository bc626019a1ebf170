"""The strategy of the execute and canvas tasks: every message is screened, then takes
Celery's own request path.

Celery's consumer hands each message of a task to that task's strategy. This one checks the
message's signature first (``intake.py``: an unsigned or altered message is acked and
dead-lettered, and never runs), then, for the execute task, reads the job
(:func:`job_of`): a message that carries no job this worker can read is acked and dropped
to its queue's dead-letter list with the reason (:meth:`DeadLetters.refuse`), as are the
messages Celery's consumer rejects before any strategy sees them (its ``task_unknown`` and
``task_rejected`` signals, connected in ``tasks.py``). Every other message goes to Celery's
default strategy, unchanged: a ``Request`` (``request.py``'s :class:`JobRequest`),
counted reserved and then active (``celery inspect reserved`` / ``active``), events when
they are on (``-E``, ``celery control enable_events``), rate limits, revokes, expiry, and a
pool thread whose task body waits for the job on the runtime's loop (``runtime.py``). A
job handed straight to the pool is then waited for, briefly, until it has started
(``gate.py``: the consumer's own work would otherwise land on the job's start).

Until this release the strategy handed each job straight to the runtime, skipping the
``Request``: one thread hop fewer, and a job invisible to ``inspect``, events and Flower,
with revokes and rate limits accepted and ignored. ``benchmarks/README.md`` has the A/B.

Celery API relied on: ``celery.worker.strategy.default(task, app, consumer, **kwargs)``,
the handler it returns (``(message, body, ack, reject, callbacks)``, each of ``callbacks``
called with the request right before the pool is handed it, and only then), and the
consumer's ``connection_errors``; :func:`check_strategy_api` fails with a sentence when an
installed Celery changes them.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import msgspec
import redis
from celery.worker.strategy import default as celery_default

from ..redis.client import sync_client
from ..settings import BrokerSettings
from ..wire import JobSpec, job_from_celery
from .deadletter import drop, message_text
from .gate import StartGate
from .intake import Intake

__all__ = ["DeadLetters", "Malformed", "Screened", "check_strategy_api", "job_of"]

log = logging.getLogger("codemode.fleet.worker")


class Malformed(Exception):
    """A message of the execute task that carries no job this worker can read."""


class DeadLetters:
    """Where this worker keeps the messages it refuses: each queue's dead-letter list
    (``deadletter.py``), over a thread-safe client that connects on first use."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self._redis: redis.Redis | None = None

    def refuse(self, message: Any, reason: str) -> None:
        """Log ``message`` as dropped with ``reason`` and keep it in its queue's dead-letter
        list; settling it is the caller's part."""
        if self._redis is None:
            self._redis = sync_client(self.settings)
        info = getattr(message, "delivery_info", None)
        queue = info.get("routing_key") if isinstance(info, dict) else None
        drop(self._redis, str(queue or self.settings.queue), message_text(message), reason)

    def on_unknown_task(self, message: Any = None, name: Any = None, **_: Any) -> None:
        """Celery's ``task_unknown`` signal: its consumer rejected a message naming no task
        of this worker (and logged it); keep it with the reason."""
        if message is not None:
            self.refuse(message, f"no task named {name!r} is registered on this worker")

    def on_rejected(self, message: Any = None, exc: Any = None, **_: Any) -> None:
        """Celery's ``task_rejected`` signal: its consumer rejected a message it cannot read
        as a task (and logged it); keep it with the reason."""
        if message is not None:
            why = f"{type(exc).__name__}: {exc}" if exc is not None else "it names no task"
            self.refuse(message, f"Celery's consumer refused it ({why})")


def job_of(message: Any) -> JobSpec:
    """The job a message of the execute task carries; raises :class:`Malformed` saying
    what is wrong with it."""
    try:
        body = message.decode()
    except Exception as exc:  # kombu's decoders raise whatever the content makes them
        raise Malformed(f"its body does not decode ({type(exc).__name__}: {exc})") from None
    if not (isinstance(body, (list, tuple)) and len(body) == 3 and isinstance(body[0], list)):
        raise Malformed("its body is not Celery's [args, kwargs, embed]")
    args, kwargs = body[0], body[1]
    if isinstance(kwargs, dict) and "job" in kwargs:
        job = kwargs["job"]
    elif len(args) == 1:
        job = args[0]
    else:
        raise Malformed("it carries no job (the task takes one argument, the job)")
    try:
        return job_from_celery(job)
    except msgspec.ValidationError as exc:
        raise Malformed(f"its job is malformed ({exc})") from None
    except RecursionError:
        raise Malformed("its job is nested too deeply") from None


DEFAULT_PARAMETERS = ("task", "app", "consumer")


def check_strategy_api() -> None:
    """Raise ``RuntimeError`` saying what changed when Celery's default strategy no longer
    takes ``(task, app, consumer)`` or its handlers no longer take ``(message, body, ack,
    reject, callbacks)``."""
    params = tuple(inspect.signature(celery_default).parameters)
    if params[:3] != DEFAULT_PARAMETERS:
        raise RuntimeError(
            f"celery.worker.strategy.default takes {params}, not {DEFAULT_PARAMETERS} first, in "
            "the installed Celery: codemode's Screened strategy (codemode/fleet/worker/strategy.py) "
            "wraps it; update it for this Celery release, or pin Celery below it."
        )


class Screened:
    """Celery's strategy interface for the execute task (its ``Strategy``): called once per
    consumer with the task, it returns the handler of each of the task's messages, which
    screens the job and hands the message to Celery's default strategy. An object, not a
    function, so that Celery does not bind it to the task."""

    def __init__(
        self,
        dead_letters: DeadLetters,
        intake: Intake | None = None,
        *,
        reads_job: bool = True,
        gate: StartGate | None = None,
    ) -> None:
        self.dead_letters = dead_letters
        self.intake = Intake(dead_letters.settings) if intake is None else intake
        self.reads_job = reads_job
        """Read the execute job (:func:`job_of`) before Celery's strategy; ``codemode.run``
        reads its own (a malformed canvas job is a fault, as data)."""
        self.gate = gate
        """Where the consumer waits for a job it handed to the pool to start (``gate.py``)."""

    def __call__(self, task: Any, app: Any, consumer: Any, **kwargs: Any) -> Any:
        celery_handler = celery_default(task, app, consumer, **kwargs)
        connection_errors = consumer.connection_errors
        refuse, intake, reads_job, gate = self.refuse, self.intake, self.reads_job, self.gate

        def on_message(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any) -> None:
            if intake.refused(message, refuse):  # unsigned or altered (intake.py): never runs
                ack(log, connection_errors)
                return
            try:
                spec = job_of(message) if reads_job else None
            except Malformed as exc:  # a message no worker can run: say so, and drop it
                refuse(message, f"a malformed {task.name} message: {exc}")
                ack(log, connection_errors)
                return
            if gate is None or spec is None:
                celery_handler(message, body, ack, reject, callbacks)
                return
            gate.hand_off(
                spec.job_id,
                lambda handed: celery_handler(message, body, ack, reject, [*(callbacks or ()), handed]),
            )

        return on_message

    def refuse(self, message: Any, reason: str) -> None:
        """Drop ``message`` to its queue's dead-letter list with ``reason`` (the caller
        acks it): the one refusal path of the hand-off, where further checks plug in."""
        self.dead_letters.refuse(message, reason)
