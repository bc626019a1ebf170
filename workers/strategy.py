"""The execute task's strategy: Celery's consumer hands each job straight to the runtime.

Celery's default strategy builds a ``Request`` for each message and submits it to the pool;
a pool thread runs Celery's tracer around the task body, which hands the job to the
runtime's loop thread and blocks until it ends. That is two thread hops and Celery's
per-task bookkeeping ahead of every job, in a process whose threads take turns at one
interpreter. Here the consumer's thread decodes the message and starts the job on the loop
itself (``WorkerRuntime.submit``). When the job ends its message is acked, on the
consumer's thread (``ack`` schedules it there) as Celery's late ack was, and its one-line
summary is logged.

Measured side by side (two workers, each on its own Redis, alternating blocks of ten jobs):
a trivial job 3.53 -> 3.11 ms median and worker CPU 1.78 -> 1.32 ms per job; a job with ten
tool calls 12.8 -> 11.9 ms, CPU 5.5 -> 4.7 ms (``docs/fleet.md``, "What it costs").

What the pool did still holds: a worker runs at most ``concurrency`` jobs at once (its
channel's prefetch count is ``concurrency``, and a job's message stays unacked until the
job ends), a worker that dies leaves its messages unacked, to be restored and refused by
the claim, and a warm shutdown lets running jobs end (``DrainJobs`` in ``app.py``). What no
longer happens for this task: Celery's per-task signals, events, revocation, expiry and
``eta`` (the claim is the authority on expiry: ``codemode/fleet/_scripts.py``), and ``celery
inspect active`` does not list running jobs.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from .app import runtime

__all__ = ["handoff"]

log = logging.getLogger("codemode.fleet.worker")


def handoff(task: Any, app: Any, consumer: Any, **_: Any) -> Any:
    """Celery's strategy interface: the handler of each message of ``task``."""
    connection_errors = consumer.connection_errors

    def on_message(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any) -> None:
        try:
            args, kwargs, _embed = message.decode()
            if "job" in kwargs:
                job = kwargs["job"]
            elif args:
                job = args[0]
            else:
                raise ValueError("it carries no job (the task takes one argument, the job)")
        except Exception as exc:  # a message no worker can run: say so, and drop it
            log.error(
                "dropped a malformed %s message (%s: %s); a producer sent what codemode's client does not",
                task.name,
                type(exc).__name__,
                exc,
            )
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
