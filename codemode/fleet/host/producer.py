"""Enqueueing a job: the Celery message for it, written into its queue by the admission
script, in the same Redis round trip that takes the job's admission slot.

::

    host: JobSpec ─▶ CeleryMessages.build() ─▶ bytes ─▶ admit script: slot free?
                                                          ├─ no:  QUEUE_FULL, nothing queued
                                                          └─ yes: take the slot, LPUSH queue
    worker: kombu's Redis transport BRPOPs the queue ─▶ Celery's tracer ─▶ execute task

The message is Celery's own: task protocol 2 headers and body from Celery's
``app.amqp.as_task_v2`` (so ``expires``, ids and argument reprs mean what Celery says; made
once per process, with the per-job fields set for each job), in
the envelope kombu's Redis transport writes for a publish (``Channel._put``: JSON, the
body base64-encoded, a fresh ``delivery_tag``, ``delivery_info`` of the default exchange).
Only the transport call is ours: a Celery ``send_task`` costs Python on a thread of its
own (kombu's publisher is synchronous) plus a second round trip, more than a trivial job's
whole run, and building the bytes costs a fraction of that. Writing it in the admission
script also makes the two one step: an admitted job is always queued, and a refused one
never is. ``tests/fleet/test_producer.py`` checks the bytes against a real ``send_task``.

The key a queue's messages live under is kombu's: the queue's name (priority 0; no
``global_keyprefix`` is configured, see ``settings.py``).

Two headers of codemode's own ride along: with ``CODEMODE_JOB_KEY`` set, the body's signature
(:data:`~codemode.fleet.signing.SIGNATURE_HEADER`, ``signing.py``), and
:data:`~codemode.fleet.wire.ENQUEUED_HEADER`, the Redis time the job was enqueued at, from which a worker's
metrics tell how long jobs wait in the queue (``worker/metrics.py``).
"""

from __future__ import annotations

import base64
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from ..._faults import InvalidRequest
from ..settings import TASK_NAME, BrokerSettings
from ..signing import SIGNATURE_HEADER, JobSigner
from ..wire import ENQUEUED_HEADER, MAX_QUEUE_MESSAGE_BYTES, JobSpec

__all__ = ["CeleryMessages", "queue_key", "transport_bytes"]


def queue_key(queue: str) -> str:
    """The Redis list kombu's transport keeps ``queue``'s messages in (priority 0)."""
    return queue


class CeleryMessages:
    """Builds the transport bytes of one ``execute`` task message per job."""

    def __init__(self, settings: BrokerSettings) -> None:
        from celery import Celery

        self._app: Any = Celery("codemode-producer", set_as_current=False)
        self._app.conf.update(settings.celery_config())
        self._amqp: Any = self._app.amqp
        self._reply_to = str(self._app.thread_oid)
        self._pid = -1
        self._headers: dict[str, Any] = {}
        self._embed: Any = None
        self._signer = JobSigner.from_settings(settings)
        self._queue_timeout_ms = settings.queue_timeout_ms

    def _template(self) -> tuple[dict[str, Any], Any]:
        """Celery's headers for this task and the body's last part (callbacks, chain, chord:
        none), from Celery itself (``as_task_v2``), made once per process: a job then sets
        only what differs per job. Building them per job costs more than the rest of the
        message (its expiry through the app's time zone, the
        origin from the host name and the pid); ``origin`` names the process, so a forked
        producer makes its own."""
        if self._pid != os.getpid():
            probe = self._amqp.as_task_v2(
                "template",
                TASK_NAME,
                args=(),
                kwargs={},
                expires=1.0,
                ignore_result=True,
                argsrepr="()",
                kwargsrepr="{}",
            )
            self._headers, self._embed = dict(probe.headers), probe.body[2]
            self._pid = os.getpid()
        return self._headers, self._embed

    def build(self, spec: JobSpec, *, queue: str, expires_s: float) -> bytes:
        """The message that runs ``spec`` on a worker consuming ``queue``; Celery discards
        it unrun once ``expires_s`` have passed (the start-by check in Redis is the
        authority: see ``redis/scripts.py``)."""
        template, embed = self._template()
        expires = datetime.now(UTC) + timedelta(seconds=expires_s)
        headers = {
            **template,
            "id": spec.job_id,
            "root_id": spec.job_id,
            "expires": expires.isoformat(),
            # Celery would put a repr of the arguments (the program's code) in the headers
            # too: name the job instead, which is cheaper and keeps the code out of logs.
            "kwargsrepr": f"{{'job': {spec.job_id!r}}}",
            # The host set the start-by time one queue timeout after it enqueues the job.
            ENQUEUED_HEADER: spec.start_by_ms - self._queue_timeout_ms,
        }
        # msgspec writes the job struct as the JSON object ``job_to_celery`` would give
        # json.dumps, at a fraction of the cost (the message is built before the job can go).
        body = msgspec.json.encode([[], {"job": spec}, embed])
        if len(body) * 4 // 3 > MAX_QUEUE_MESSAGE_BYTES:  # base64 in the envelope
            raise InvalidRequest(
                f"This job's message would be {len(body) * 4 // 3} bytes, over the "
                f"{MAX_QUEUE_MESSAGE_BYTES} a worker takes from its queue; nothing was enqueued. "
                "Send less code or smaller modules with it."
            )
        if self._signer is not None:
            headers[SIGNATURE_HEADER] = self._signer.sign(body)
        return transport_bytes(
            headers,
            body,
            correlation_id=spec.job_id,
            reply_to=self._reply_to,
            queue=queue,
            expiration_ms=int(expires_s * 1000),
        )


def transport_bytes(
    headers: dict[str, Any],
    body: bytes,
    *,
    correlation_id: str,
    reply_to: str,
    queue: str,
    expiration_ms: int | None = None,
) -> bytes:
    """A task message as kombu's Redis transport keeps it in ``queue``: Celery's headers and
    JSON body in the envelope of a publish (``Channel._put``), the body base64-encoded, a
    fresh ``delivery_tag``, ``delivery_info`` of the default exchange."""
    properties: dict[str, Any] = {
        "correlation_id": correlation_id,
        "reply_to": reply_to,
        "delivery_mode": 2,
    }
    if expiration_ms is not None:
        properties["expiration"] = str(expiration_ms)
    properties.update(
        {
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        }
    )
    envelope = {
        "body": base64.b64encode(body).decode("ascii"),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": properties,
    }
    return msgspec.json.encode(envelope)
