"""The execute task's strategy: Celery's consumer hands each job straight to the runtime.

Celery's default strategy builds a ``Request`` for each message and submits it to the pool;
a pool thread runs Celery's tracer around the task body, which hands the job to the
runtime's loop thread and blocks until it ends. That is two thread hops and Celery's
per-task bookkeeping ahead of every job, in a process whose threads take turns at one
interpreter. Here the consumer's thread decodes the message and starts the job on the loop
itself (``WorkerRuntime.submit``). When the job ends its message is acked, on the
consumer's thread (``ack`` schedules it there) as Celery's late ack was, and its one-line
summary is logged. A message whose job cannot be read is acked and dropped to its queue's
dead-letter list with the reason (:meth:`DeadLetters.refuse`), as are the messages Celery's
consumer rejects before any strategy sees them (its ``task_unknown`` and ``task_rejected``
signals, connected in ``tasks.py``). ``docs/fleet.md`` ("What it costs") has what this
saves per job.

What the pool did still holds: a worker runs at most ``concurrency`` jobs at once (its
channel's prefetch count is ``concurrency``, and a job's message stays unacked until the
job ends), a worker that dies leaves its messages unacked, to be restored and refused by
the claim, and a warm shutdown lets running jobs end (``DrainJobs`` in ``app.py``). What no
longer happens for this task: Celery's per-task signals, events, revocation, expiry and
``eta`` (the claim is the authority on expiry: ``redis/lua/claim.lua``), and ``celery
inspect active`` does not list running jobs.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

import msgspec
import redis

from ..redis.client import sync_client
from ..settings import BrokerSettings
from ..wire import JobSpec, job_from_celery
from .deadletter import drop, message_text
from .intake import Intake
from .runtime import WorkerRuntime

__all__ = ["DeadLetters", "Handoff", "Malformed", "job_of"]

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


class Handoff:
    """Celery's strategy interface for the execute task (its ``Strategy``): called once per
    consumer with the task, it returns the handler of each of the task's messages. An
    object, not a function, so that Celery does not bind it to the task."""

    def __init__(self, runtime: WorkerRuntime, dead_letters: DeadLetters) -> None:
        self.runtime = runtime
        self.dead_letters = dead_letters
        self.intake = Intake(dead_letters.settings, runtime.tally)

    def __call__(self, task: Any, app: Any, consumer: Any, **_: Any) -> Any:
        connection_errors = consumer.connection_errors
        runtime, refuse, intake = self.runtime, self.dead_letters.refuse, self.intake

        def on_message(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any) -> None:
            if intake.refused(message, refuse):  # unsigned or altered (intake.py): never runs
                ack(log, connection_errors)
                return
            try:
                job = job_of(message)
            except Malformed as exc:  # a message no worker can run: say so, and drop it
                refuse(message, f"a malformed {task.name} message: {exc}")
                ack(log, connection_errors)
                return
            try:
                future = runtime.submit(job)
            except RuntimeError as exc:  # closing: the unacked message goes back to the queue
                log.warning("%s", exc)
                return

            def ended(future: concurrent.futures.Future[str]) -> None:
                ack(log, connection_errors)
                try:
                    log.info("%s", future.result())
                except (Exception, concurrent.futures.CancelledError):
                    log.exception("a job ended with an error in the worker")

            future.add_done_callback(ended)

        return on_message
