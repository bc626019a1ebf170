"""Enqueueing a job: Celery's own ``send_task`` (protocol, routing and ``expires`` stay
Celery's), on one dedicated thread because kombu's publisher is synchronous.

One thread keeps publishes in order on one pooled kombu connection and never blocks the
host's event loop; a publish costs a few hundred microseconds, so it is not the bottleneck.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from broker_config import TASK_NAME, BrokerSettings

from ._wire import JobSpec, job_to_celery

__all__ = ["CeleryProducer"]


class CeleryProducer:
    def __init__(self, settings: BrokerSettings) -> None:
        from celery import Celery

        self._app: Any = Celery("codemode-producer", set_as_current=False)
        self._app.conf.update(settings.celery_config())
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="codemode-publish")

    def _send(self, spec: JobSpec, queue: str, expires_s: float) -> None:
        self._app.send_task(
            TASK_NAME,
            kwargs={"job": job_to_celery(spec)},
            task_id=spec.job_id,
            queue=queue,
            expires=expires_s,
            ignore_result=True,
            # Celery would put a repr of the arguments (the program's code) in the headers
            # too: name the job instead, which is cheaper and keeps the code out of logs.
            argsrepr="()",
            kwargsrepr=f"{{'job': {spec.job_id!r}}}",
        )

    async def send(self, spec: JobSpec, *, queue: str, expires_s: float) -> None:
        """Publish the job; raises kombu's or redis's connection errors as they come."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._send, spec, queue, expires_s)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._app.close)
        self._thread.shutdown(wait=False)
