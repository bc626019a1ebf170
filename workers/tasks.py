"""The execute task: one job, run to its end on this worker's isolate pool.

Late acks and reject-on-worker-lost mean Celery may deliver a job again (a worker died, or
the visibility timeout passed while it ran). A program that started never runs twice: the
first thing a worker does is claim the job in Redis (SET NX); a redelivered started job
finds the claim taken and is refused, and a job past its start-by time is never started.
The choice: at most once for programs (their tool calls have side effects), with the
caller told WORKER_CRASHED (started=True) instead of a silent second run.
"""

from __future__ import annotations

from typing import Any

import redis
from celery import signals

from broker_config import PING_TASK_NAME, TASK_NAME

from .app import app, runtime, settings
from .strategy import on_rejected, on_unknown_task

__all__ = ["execute", "ping"]

PING_TTL_MS = 60_000
"""How long a pong waits for its reader."""
_ping_client = redis.Redis.from_url(settings.redis_url, **settings.redis_kwargs())
"""Thread-safe (a connection pool), and connects on first use, not at import."""


@app.task(
    name=TASK_NAME,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    Strategy="workers.strategy:handoff",
)  # type: ignore[untyped-decorator]
def execute(job: dict[str, Any]) -> str:
    """Run one job; the outcome travels on the job's reply channel, the return is a log line."""
    return runtime.run_job(job)


@app.task(name=PING_TASK_NAME, ignore_result=True)  # type: ignore[untyped-decorator]
def ping(reply_key: str) -> str:
    """Push ``pong`` onto ``reply_key`` (expiring): nothing else runs, no isolate is used."""
    pipe = _ping_client.pipeline(transaction=False)
    pipe.rpush(reply_key, b"pong")
    pipe.pexpire(reply_key, PING_TTL_MS)
    pipe.execute()
    return f"pong to {reply_key}"


# Messages Celery's consumer rejects itself (an unknown task name, a message it cannot read
# as a task) are dead-lettered too, whichever strategy a task has.
signals.task_unknown.connect(on_unknown_task, weak=False)
signals.task_rejected.connect(on_rejected, weak=False)
