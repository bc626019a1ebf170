"""Signed canvas jobs: with CODEMODE_JOB_KEY set, a real worker runs a ``codemode.run`` message
only when its key (or the previous key, while keys rotate) signed its body and the headers
that name its try. An unsigned message, an altered one, and a signed one copied under
another task id are refused before anything runs, dead-lettered with the reason, and leave
no result. (Signed chains, groups, chords, errbacks and Celery's retries run in
test_canvas.py, whose worker holds a key.)"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis

from codemode import InvalidRequest
from codemode.fleet.canvas import CANVAS_TASK_NAME, canvas_app, run_signature
from codemode.fleet.redis.keys import dead_letter_key
from codemode.fleet.settings import BrokerSettings, WorkerSettings
from codemode.fleet.signing import SIGNATURE_HEADER, TRY_HEADERS, JobSigner
from codemode.fleet.testing import SharedFleet, WorkerProcess

pytestmark = pytest.mark.fleet

OLD_KEY = "old-" + "o" * 40
NEW_KEY = "new-" + "n" * 40
RESULT_TIMEOUT_S = 120.0
"""Generous: the machine is shared."""


@pytest.fixture
def canvas_settings(fleet: SharedFleet) -> BrokerSettings:
    """A queue, key prefix and result backend of this test's own (no key: each test sets one)."""
    tag = uuid.uuid4().hex[:8]
    return replace(
        fleet.settings,
        queue=f"canvas-signed-{tag}",
        key_prefix=f"canvas-signed-{tag}",
        result_backend=fleet.settings.redis_url,
    )


@pytest.fixture
def start_canvas_worker(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(settings: BrokerSettings, name: str = "canvas-signed") -> WorkerProcess:
        worker = WorkerProcess(settings, WorkerSettings(concurrency=1), log_dir=tmp_path, name=name)
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()
        assert not worker.alive(), f"{worker.name} left processes behind"


@pytest.fixture
def apps() -> Iterator[Callable[[BrokerSettings], Any]]:
    """Canvas apps (``canvas_app``), closed at the end."""
    made: list[Any] = []

    def make(settings: BrokerSettings) -> Any:
        app = canvas_app(settings)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close()


def dead_reasons(client: redis.Redis, queue: str) -> list[str]:
    return [str(json.loads(raw)["reason"]) for raw in client.lrange(dead_letter_key(queue), 0, -1)]


def wait_for_dead_letter(client: redis.Redis, queue: str, said: str) -> list[str]:
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while time.monotonic() < deadline:
        reasons = dead_reasons(client, queue)
        if any(said in reason for reason in reasons):
            return reasons
        time.sleep(0.05)
    raise AssertionError(f"no dead letter saying {said!r} in {queue}: {dead_reasons(client, queue)}")


def served(app: Any, code: str = "() => 6 * 7") -> object:
    """Run one canvas job through ``app`` and return its program's result."""
    outcome = run_signature(code, app=app).apply_async().get(timeout=RESULT_TIMEOUT_S)
    assert isinstance(outcome, dict)
    return outcome["result"]


def never_ran(app: Any, task_id: str) -> None:
    """The refused job left no result (a job that ran would have stored one by now: the
    worker takes its queue in order, and a later job was served)."""
    assert app.AsyncResult(task_id).state == "PENDING"


def held_message(app: Any, client: redis.Redis, code: str, queue: str) -> tuple[str, dict[str, Any]]:
    """A signed ``codemode.run`` message as ``app`` publishes it, taken off a queue no worker
    reads and addressed to ``queue``: ``(task id, its transport envelope)``."""
    hold = f"hold-{uuid.uuid4().hex[:8]}"
    task_id = str(run_signature(code, app=app).apply_async(queue=hold).id)
    raw = client.lpop(hold)
    assert isinstance(raw, bytes), "the signed message was not published to the holding queue"
    envelope: dict[str, Any] = json.loads(raw)
    assert str(envelope["headers"][SIGNATURE_HEADER]).startswith("hmac-sha256=")
    envelope["properties"]["delivery_info"]["routing_key"] = queue
    return task_id, envelope


def test_an_unsigned_canvas_job_is_refused_dead_lettered_and_never_runs(
    canvas_settings: BrokerSettings,
    start_canvas_worker: Callable[..., WorkerProcess],
    apps: Callable[[BrokerSettings], Any],
    redis_sync: redis.Redis,
) -> None:
    signed = replace(canvas_settings, job_key=NEW_KEY)
    worker = start_canvas_worker(signed)
    unsigned_app = apps(canvas_settings)  # no key: publishes without a signature
    task_id = str(run_signature("() => 'must not run'", app=unsigned_app).apply_async().id)
    reasons = wait_for_dead_letter(redis_sync, canvas_settings.queue, "it is not signed")
    assert any(r.startswith(f"a {CANVAS_TASK_NAME} message refused") for r in reasons), reasons
    assert f"a {CANVAS_TASK_NAME} message refused: it is not signed" in worker.log_text()
    assert served(apps(signed)) == 42
    never_ran(unsigned_app, task_id)


def test_an_altered_canvas_job_and_a_signed_one_under_another_task_id_are_refused(
    canvas_settings: BrokerSettings,
    start_canvas_worker: Callable[..., WorkerProcess],
    apps: Callable[[BrokerSettings], Any],
    redis_sync: redis.Redis,
) -> None:
    """A Redis writer without the key takes signed messages: changing the program in one
    body, or replaying another under a fresh task id (the try's claim would be free), gets
    neither run."""
    signed = replace(canvas_settings, job_key=NEW_KEY)
    start_canvas_worker(signed)
    app = apps(signed)

    altered_id, altered = held_message(app, redis_sync, "() => 'as signed'", canvas_settings.queue)
    body = base64.b64decode(altered["body"]).replace(b"as signed", b"rewritten")
    altered["body"] = base64.b64encode(body).decode()
    redis_sync.lpush(canvas_settings.queue, json.dumps(altered))
    wait_for_dead_letter(redis_sync, canvas_settings.queue, "matches neither")

    _, replayed = held_message(app, redis_sync, "() => 'charged once'", canvas_settings.queue)
    replayed_id = uuid.uuid4().hex
    replayed["headers"]["id"] = replayed["properties"]["correlation_id"] = replayed_id
    redis_sync.lpush(canvas_settings.queue, json.dumps(replayed))
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while sum("matches neither" in r for r in dead_reasons(redis_sync, canvas_settings.queue)) < 2:
        assert time.monotonic() < deadline, dead_reasons(redis_sync, canvas_settings.queue)
        time.sleep(0.05)

    assert served(app) == 42
    never_ran(app, altered_id)
    never_ran(app, replayed_id)


def test_canvas_keys_rotate_on_live_workers(
    canvas_settings: BrokerSettings,
    start_canvas_worker: Callable[..., WorkerProcess],
    apps: Callable[[BrokerSettings], Any],
    redis_sync: redis.Redis,
) -> None:
    """Workers restarted with the new key and the old one as previous run jobs signed with
    either; restarted again without the previous key, they refuse the old one."""
    old_app = apps(replace(canvas_settings, job_key=OLD_KEY))
    new_app = apps(replace(canvas_settings, job_key=NEW_KEY))
    overlap = start_canvas_worker(
        replace(canvas_settings, job_key=NEW_KEY, job_key_previous=OLD_KEY), name="overlap"
    )
    assert served(old_app) == 42  # producers not yet moved
    assert served(new_app) == 42  # producers moved
    overlap.stop()

    start_canvas_worker(replace(canvas_settings, job_key=NEW_KEY), name="after")
    old_id = str(run_signature("() => 'old key'", app=old_app).apply_async().id)
    wait_for_dead_letter(redis_sync, canvas_settings.queue, "matches neither")
    assert served(new_app) == 42
    never_ran(old_app, old_id)


def test_the_signature_covers_the_trys_headers() -> None:
    """What a producer signs and a worker checks: the body and the try's headers, so that a
    retry (a new ``retries``) needs a new signature, which the republishing worker makes."""
    signer = JobSigner(NEW_KEY)
    body = b'[[], {"code": "() => 1"}, {}]'
    headers: dict[str, object] = {"task": CANVAS_TASK_NAME, "id": "t1", "retries": 0}
    signature = signer.sign(body, headers, TRY_HEADERS)
    assert signer.refusal(signature, body, headers, TRY_HEADERS) is None
    for name, value in (("retries", 1), ("id", "t2"), ("expires", "2030-01-01T00:00:00")):
        changed = {**headers, name: value}
        assert signer.refusal(signature, body, changed, TRY_HEADERS) is not None, name
    assert signer.refusal(signature, body) is not None  # the body alone is not what was signed


def test_a_signed_canvas_job_cannot_be_compressed(
    canvas_settings: BrokerSettings, apps: Callable[[BrokerSettings], Any], redis_sync: redis.Redis
) -> None:
    """Its signature covers the JSON body a worker reads: a compressed one is refused as it
    is sent, with a sentence, and nothing reaches the queue."""
    app = apps(replace(canvas_settings, job_key=NEW_KEY))
    with pytest.raises(InvalidRequest, match="cannot be compressed"):
        run_signature("() => 1", app=app, compression="zlib").apply_async()
    assert redis_sync.llen(canvas_settings.queue) == 0
