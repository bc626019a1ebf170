"""The worker's tasks: ``codemode.execute`` (one job, run to its end on this worker's
isolate pool) and ``codemode.ping`` (nothing runs: Celery's own round trip).

Late acks and reject-on-worker-lost mean Celery may deliver a job again (a worker died, or
the visibility timeout passed while it ran). A program that started never runs twice: the
first thing a worker does is claim the job in Redis (SET NX); a redelivered started job
finds the claim taken and is refused, and a job past its start-by time is never started.
The choice: at most once for programs (their tool calls have side effects), with the
caller told WORKER_CRASHED (started=True) instead of a silent second run.

The execute task's return value is the job's one-line summary; a job that ends with a
fault (its host got ``Failed``) makes the task fail with :class:`JobFault`, whose text
starts with the fault's code: ``inspect``, events and Flower show ``FAILURE`` and, for
instance, ``JobFault('CANCELLED: ...')``. It is declared in the task's ``throws``, so Celery
logs it as expected, without a traceback.
"""

from __future__ import annotations

from typing import Any, Final

from celery import signals

from ..redis.client import sync_client
from ..settings import PING_TASK_NAME, TASK_NAME, BrokerSettings
from .intake import Intake
from .request import check_request_api, job_request_class
from .runtime import WorkerRuntime
from .strategy import DeadLetters, Screened, check_strategy_api
from .transport import check_kombu_api

__all__ = ["PING_TTL_MS", "JobFault", "register_tasks"]

PING_TTL_MS: Final = 60_000
"""How long a pong waits for its reader."""


class JobFault(Exception):
    """A job ended with a fault (its host got it as an ExecutorError): ``CODE: summary``."""


def register_tasks(app: Any, runtime: WorkerRuntime, settings: BrokerSettings) -> None:
    """Register the execute and ping tasks on ``app`` (a Celery app), with the execute
    task's screening strategy and request class, and dead-letter what Celery's consumer
    rejects itself."""
    check_request_api()  # an installed Celery that moved them fails here, with a sentence
    check_strategy_api()
    check_kombu_api()
    dead_letters = DeadLetters(settings)
    ping_client = sync_client(settings)  # thread-safe, connects on first use

    @app.task(  # type: ignore[untyped-decorator]
        name=TASK_NAME,
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=True,
        Strategy=Screened(dead_letters, Intake(settings, runtime.tally), gate=runtime.gate),
        Request=job_request_class(runtime),
        throws=(JobFault,),
    )
    def execute(job: dict[str, Any]) -> str:
        """Run one job on the runtime and wait for it; the outcome travels on the job's
        reply channel, the return is its one-line summary (raises :class:`JobFault` when the
        job ended with a fault)."""
        end = runtime.run_job(job)
        if end.fault is not None:
            raise JobFault(f"{end.fault}: {end.summary}")
        return end.summary

    @app.task(name=PING_TASK_NAME, ignore_result=True)  # type: ignore[untyped-decorator]
    def ping(reply_key: str) -> str:
        """Push ``pong`` onto ``reply_key`` (expiring): nothing else runs, no isolate is used."""
        pipe = ping_client.pipeline(transaction=False)
        pipe.rpush(reply_key, b"pong")
        pipe.pexpire(reply_key, PING_TTL_MS)
        pipe.execute()
        return f"pong to {reply_key}"

    # Messages Celery's consumer rejects itself (an unknown task name, a message it cannot
    # read as a task) are dead-lettered too, whichever strategy a task has.
    signals.task_unknown.connect(dead_letters.on_unknown_task, weak=False)
    signals.task_rejected.connect(dead_letters.on_rejected, weak=False)
