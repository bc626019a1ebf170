"""Signed jobs: with CODEMODE_JOB_KEY set, a real worker runs only jobs its key (or the previous
key, while keys rotate) signed. An unsigned or altered job is dead-lettered with its reason and
never claimed; an honest host with the wrong key hears INVALID_REQUEST at once, not at its queue
timeout."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

import pytest
import redis
from fleet_helpers import eventually

from codemode import ExecutorError
from codemode.fleet import FleetExecutor
from codemode.fleet.host.producer import CeleryMessages, queue_key
from codemode.fleet.redis.keys import JobKeys, admission_key, dead_letter_key
from codemode.fleet.settings import BrokerSettings, SettingsError
from codemode.fleet.signing import REFUSED_MARK, SCHEME, JobSigner
from codemode.fleet.testing import WorkerProcess
from codemode.fleet.wire import JobSpec

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

OLD_KEY = "old-" + "o" * 40
NEW_KEY = "new-" + "n" * 40
QUEUE_TIMEOUT_MS = 60_000
"""Long: a refusal that reached the host through its queue timeout would take this long."""
TOLD_WITHIN_S = 20.0
"""Generous for a loaded machine, and far below the queue timeout."""


# ---- the signature itself (no Redis) ------------------------------------------------------


def test_a_signature_covers_the_exact_body() -> None:
    signer = JobSigner(NEW_KEY)
    body = b'[[], {"job": {"code": "async () => 1"}}, {}]'
    signature = signer.sign(body)
    assert signature.startswith(SCHEME)
    assert signer.refusal(signature, body) is None
    altered = signer.refusal(signature, body.replace(b"1", b"2"))
    assert altered is not None and "altered" in altered
    unsigned = signer.refusal(None, body)
    assert unsigned is not None and "not signed" in unsigned
    malformed = signer.refusal("sha1=abc", body)
    assert malformed is not None and SCHEME in malformed


def test_a_worker_takes_the_previous_key_and_a_producer_signs_with_the_current() -> None:
    body = b"[]"
    rotating = JobSigner(NEW_KEY, OLD_KEY)
    assert rotating.refusal(JobSigner(OLD_KEY).sign(body), body) is None
    assert rotating.refusal(JobSigner(NEW_KEY).sign(body), body) is None
    assert rotating.sign(body) == JobSigner(NEW_KEY).sign(body)
    assert JobSigner(NEW_KEY).refusal(JobSigner(OLD_KEY).sign(body), body) is not None


def test_job_keys_are_checked_and_kept_out_of_reprs() -> None:
    with pytest.raises(SettingsError, match="CODEMODE_JOB_KEY must be at least 32 characters"):
        BrokerSettings(job_key="short")
    with pytest.raises(SettingsError, match="CODEMODE_JOB_KEY_PREVIOUS is set without CODEMODE_JOB_KEY"):
        BrokerSettings(job_key_previous=OLD_KEY)
    settings = BrokerSettings.from_env({"CODEMODE_JOB_KEY": NEW_KEY, "CODEMODE_JOB_KEY_PREVIOUS": OLD_KEY})
    assert (settings.job_key, settings.job_key_previous) == (NEW_KEY, OLD_KEY)
    assert NEW_KEY not in repr(settings) and OLD_KEY not in repr(settings)


# ---- a real worker --------------------------------------------------------------------------


def dead_reasons(client: redis.Redis, queue: str) -> list[str]:
    return [json.loads(raw)["reason"] for raw in client.lrange(dead_letter_key(queue), 0, -1)]


async def run_one(settings: BrokerSettings, key: str) -> object:
    async with FleetExecutor(settings=replace(settings, job_key=key), queue_timeout=QUEUE_TIMEOUT_MS) as host:
        return (await host.execute("async () => 6 * 7")).result


async def refused_fast(settings: BrokerSettings, key: str) -> ExecutorError:
    """The fault a host signing with ``key`` (or none) gets, and check it came fast."""
    started = time.monotonic()
    async with FleetExecutor(settings=replace(settings, job_key=key), queue_timeout=QUEUE_TIMEOUT_MS) as host:
        with pytest.raises(ExecutorError) as caught:
            await host.execute("async () => 6 * 7")
    assert time.monotonic() - started < TOLD_WITHIN_S
    fault = caught.value
    assert fault.code == "INVALID_REQUEST" and not fault.retryable and not fault.started
    assert "CODEMODE_JOB_KEY" in fault.message and "nothing ran" in fault.message
    return fault


async def test_unsigned_and_wrongly_signed_jobs_are_refused_and_their_host_told(
    private_queue: BrokerSettings,
    start_worker: Callable[..., WorkerProcess],
    redis_sync: redis.Redis,
) -> None:
    signed = replace(private_queue, job_key=NEW_KEY)
    worker = start_worker(signed)
    assert await run_one(private_queue, NEW_KEY) == 42

    unsigned = await refused_fast(private_queue, "")
    assert "was not signed" in unsigned.message
    wrong = await refused_fast(private_queue, OLD_KEY)
    assert "does not match" in wrong.message
    reasons = dead_reasons(redis_sync, private_queue.queue)
    assert any("it is not signed" in r for r in reasons), reasons
    assert any("matches neither" in r for r in reasons), reasons
    assert "its signature matches neither CODEMODE_JOB_KEY" in worker.log_text()
    # Nothing was left holding a slot of the fleet's admission.
    assert redis_sync.zcard(f"{private_queue.key_prefix}:admission") == 0
    assert await run_one(private_queue, NEW_KEY) == 42


async def test_an_altered_job_never_runs_and_a_forged_one_answers_no_host(
    private_queue: BrokerSettings,
    start_worker: Callable[..., WorkerProcess],
    redis_sync: redis.Redis,
) -> None:
    """A Redis writer without the key takes a signed job and changes its code: the worker
    refuses it before any claim. Its host id names no live host, so nobody is answered."""
    signed = replace(private_queue, job_key=NEW_KEY)
    start_worker(signed)
    spec = JobSpec(
        job_id=uuid.uuid4().hex,
        host_id="no-such-host",
        key_prefix=private_queue.key_prefix,
        code="async () => 1",
        timeout_ms=5_000,
        count_host_waits=True,
        start_by_ms=int(time.time() * 1000) + QUEUE_TIMEOUT_MS,
    )
    raw = json.loads(CeleryMessages(signed).build(spec, queue=private_queue.queue, expires_s=60.0))
    body = base64.b64decode(raw["body"]).replace(b"async () => 1", b"async () => 2")
    raw["body"] = base64.b64encode(body).decode()
    redis_sync.lpush(queue_key(private_queue.queue), json.dumps(raw))

    await eventually(
        lambda: any("matches neither" in r for r in dead_reasons(redis_sync, private_queue.queue)),
        TOLD_WITHIN_S,
        "the altered job's dead letter",
    )
    keys = JobKeys.of(private_queue.key_prefix, spec.job_id)
    assert redis_sync.get(keys.claim) is None  # never claimed, and no refusal mark either
    assert redis_sync.llen(keys.up) == 0
    assert await run_one(private_queue, NEW_KEY) == 42


async def test_keys_rotate_on_live_workers(
    private_queue: BrokerSettings,
    start_worker: Callable[..., WorkerProcess],
    redis_sync: redis.Redis,
) -> None:
    """Workers restarted with the new key and the old one as previous take both during the
    overlap; restarted again without the previous key, they refuse the old one."""
    overlap = start_worker(replace(private_queue, job_key=NEW_KEY, job_key_previous=OLD_KEY), name="overlap")
    assert await run_one(private_queue, OLD_KEY) == 42  # hosts not yet moved
    assert await run_one(private_queue, NEW_KEY) == 42  # hosts moved
    overlap.stop()
    start_worker(replace(private_queue, job_key=NEW_KEY), name="after")
    await refused_fast(private_queue, OLD_KEY)
    assert await run_one(private_queue, NEW_KEY) == 42
    refusal_marks = [
        k for k in redis_sync.scan_iter(match=f"{private_queue.key_prefix}:job:*:claim")
        if redis_sync.get(k) == REFUSED_MARK.encode()
    ]  # fmt: skip
    assert len(refusal_marks) == 1


async def test_a_host_that_finds_its_job_marked_refused_is_told_invalid_request_not_a_crash(
    private_queue: BrokerSettings, redis_sync: redis.Redis
) -> None:
    """A worker refused the job (its claim holds the refusal's mark) and its Failed never
    reached the host (the reply channel lost, say). The host's check on its queued job finds
    the mark: INVALID_REQUEST, nothing ran; not a worker called "refused" that crashed."""
    async with FleetExecutor(
        settings=replace(private_queue, job_key=OLD_KEY), queue_timeout=QUEUE_TIMEOUT_MS
    ) as host:
        running = asyncio.ensure_future(host.execute("async () => 1"))
        admission = admission_key(private_queue.key_prefix)

        def admitted() -> list[str]:
            return [
                str(m.decode() if isinstance(m, bytes) else m) for m in redis_sync.zrange(admission, 0, -1)
            ]

        (job_id,) = await eventually(admitted, TOLD_WITHIN_S, "the admitted job")
        redis_sync.set(JobKeys.of(private_queue.key_prefix, job_id).claim, REFUSED_MARK, ex=600)
        started = time.monotonic()
        with pytest.raises(ExecutorError) as caught:
            await running
    assert time.monotonic() - started < TOLD_WITHIN_S
    fault = caught.value
    assert (fault.code, fault.retryable, fault.started) == ("INVALID_REQUEST", False, False)
    assert "does not match the worker's job key" in fault.message and "CODEMODE_JOB_KEY" in fault.message
