"""The job's Celery message is the one Celery's own ``send_task`` writes, field for field.

The producer builds the transport bytes itself so that the admission script can enqueue
them (see codemode/fleet/_producer.py); a real ``send_task`` to the same Redis is the
reference. Every fleet test then runs such messages on real Celery workers.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import redis

from codemode.fleet.host.producer import CeleryMessages, queue_key
from codemode.fleet.settings import TASK_NAME, BrokerSettings
from codemode.fleet.wire import ENQUEUED_HEADER, JobSpec, job_from_celery, job_to_celery

pytestmark = pytest.mark.fleet

VOLATILE_HEADERS = {"expires"}
"""Celery computes it from the publish time: checked as a time, not as text."""
VOLATILE_PROPERTIES = {"delivery_tag", "reply_to"}
"""A fresh uuid per message, and an id of the publishing app."""


def _spec() -> JobSpec:
    return JobSpec(
        job_id="f" * 32,
        host_id="h" * 32,
        key_prefix="codemode",
        timeout_ms=500,
        code="async () => { const s = '\u00e9\u2603 \"quoted\"'; return s }",
        count_host_waits=False,
        start_by_ms=1_234_567,
    )


def _decoded(raw: object) -> dict[str, Any]:
    assert isinstance(raw, bytes)  # a message popped off its queue
    message: dict[str, Any] = json.loads(raw)
    assert message["properties"]["body_encoding"] == "base64"
    message["body"] = json.loads(base64.b64decode(message["body"]))
    return message


def test_the_message_is_the_one_send_task_writes(settings: BrokerSettings, redis_sync: redis.Redis) -> None:
    from celery import Celery

    ours_queue, theirs_queue = f"{settings.key_prefix}-ours", f"{settings.key_prefix}-theirs"
    spec = _spec()
    app = Celery("reference-producer", set_as_current=False)
    app.conf.update(settings.celery_config())
    try:
        app.send_task(
            TASK_NAME,
            kwargs={"job": job_to_celery(spec)},
            task_id=spec.job_id,
            queue=theirs_queue,
            expires=3.0,
            ignore_result=True,
            argsrepr="()",
            kwargsrepr=f"{{'job': {spec.job_id!r}}}",
        )
    finally:
        app.close()
    redis_sync.lpush(
        queue_key(ours_queue), CeleryMessages(settings).build(spec, queue=ours_queue, expires_s=3.0)
    )
    try:
        theirs = _decoded(redis_sync.lpop(theirs_queue))
        ours = _decoded(redis_sync.lpop(ours_queue))
    finally:
        redis_sync.delete(ours_queue, theirs_queue)
    assert job_from_celery(ours["body"][1]["job"]) == spec
    assert ours["body"] == theirs["body"]
    assert {k: v for k, v in ours.items() if k not in ("headers", "properties")} == {
        k: v for k, v in theirs.items() if k not in ("headers", "properties")
    }
    for field in VOLATILE_HEADERS:
        assert ours["headers"].pop(field) >= theirs["headers"].pop(field)
    # codemode's own header (the queue-wait metric's start); unsigned settings: no signature.
    assert ours["headers"].pop(ENQUEUED_HEADER) == spec.start_by_ms - settings.queue_timeout_ms
    assert ours["headers"] == theirs["headers"]
    # send_task also repeats the argument reprs among the properties; nothing reads them there.
    for field in ("argsrepr", "kwargsrepr"):
        theirs["properties"].pop(field)
    theirs["properties"]["delivery_info"]["routing_key"] = ours_queue
    for field in VOLATILE_PROPERTIES:
        assert ours["properties"].pop(field) and theirs["properties"].pop(field)
    assert ours["properties"] == theirs["properties"]
