"""RetryPolicy's decision and its waits, on the real fault classes (the executors' side of
it runs in tests/contract/test_bulk.py)."""

from __future__ import annotations

import threading
import time

import msgspec
import pytest

from codemode import (
    BrokerUnreachable,
    Disposed,
    FaultData,
    HostGone,
    InvalidRequest,
    JobExpired,
    QueueFull,
    RetryPolicy,
    SyncIsolateExecutor,
    WorkerCrashed,
    fault_from_data,
)


def test_by_default_retryable_faults_that_did_not_start_are_retried() -> None:
    policy = RetryPolicy()
    for fault in (QueueFull("x"), WorkerCrashed("x"), BrokerUnreachable("x"), JobExpired("x")):
        assert policy.retries(fault, 1), fault
    assert not policy.retries(HostGone("x", started=True), 1, idempotent=True)
    assert not policy.retries(InvalidRequest("x"), 1)
    assert not policy.retries(Disposed("x"), 1)
    assert not policy.retries(ValueError("x"), 1)


def test_a_started_fault_is_retried_only_for_an_idempotent_request() -> None:
    crashed = WorkerCrashed("x", started=True)
    assert not RetryPolicy().retries(crashed, 1)
    assert RetryPolicy().retries(crashed, 1, idempotent=True)


def test_attempts_count_the_first_try() -> None:
    policy = RetryPolicy(attempts=3)
    assert policy.retries(QueueFull("x"), 2)
    assert not policy.retries(QueueFull("x"), 3)
    assert not RetryPolicy.never().retries(QueueFull("x"), 1)


def test_codes_narrow_or_widen_what_is_retried() -> None:
    only_crashes = RetryPolicy(codes=frozenset({"WORKER_CRASHED"}))
    assert only_crashes.retries(WorkerCrashed("x"), 1)
    assert not only_crashes.retries(QueueFull("x"), 1)
    assert RetryPolicy(codes=frozenset({"HOST_GONE"})).retries(
        HostGone("x", started=True), 1, idempotent=True
    )


def test_waits_grow_exponentially_up_to_the_cap_with_jitter() -> None:
    exact = RetryPolicy(base_delay_s=0.1, max_delay_s=1.0, jitter=0)
    assert [exact.delay_s(n) for n in range(1, 6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0])
    jittered = RetryPolicy(base_delay_s=0.1, max_delay_s=1.0, jitter=0.5)
    waits = [jittered.delay_s(3) for _ in range(200)]
    assert all(0.2 <= w <= 0.4 for w in waits) and len(set(waits)) > 1


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"attempts": 0}, "attempts must be an integer >= 1"),
        ({"base_delay_s": -1}, "base_delay_s must be a number of seconds"),
        ({"jitter": 2}, "jitter must be a number from 0 to 1"),
        ({"codes": "WORKER_CRASHED"}, "must be a set of fault codes"),
        ({"codes": {"WORKER_CRASH"}}, "unknown fault codes \\['WORKER_CRASH'\\]"),
        ({"codes": {"INVALID_REQUEST"}}, "fails the same way every time"),
    ],
)
def test_a_policy_that_cannot_work_is_refused_when_made(kwargs: dict[str, object], text: str) -> None:
    with pytest.raises(InvalidRequest, match=text):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested


def test_execute_sync_retries_queue_full_on_a_sync_executor() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1, "max_queue": 0}) as executor:
        blocker = threading.Thread(
            target=executor.execute, args=("async () => { await new Promise((r) => setTimeout(r, 1500)) }",)
        )
        blocker.start()
        try:
            deadline_policy = RetryPolicy(attempts=60, base_delay_s=0.05, max_delay_s=0.25)
            time.sleep(0.5)
            with pytest.raises(QueueFull):
                executor.execute("async () => 0")
            outcome = deadline_policy.execute_sync(executor, "async () => 7")
        finally:
            blocker.join(60)
    assert outcome.result == 7 and outcome.attempts > 1


def test_the_last_fault_says_how_many_tries_were_made() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1, "max_queue": 0}) as executor:
        blocker = threading.Thread(
            target=executor.execute, args=("async () => { await new Promise((r) => setTimeout(r, 3000)) }",)
        )
        blocker.start()
        time.sleep(0.5)
        try:
            with pytest.raises(QueueFull) as info:
                RetryPolicy(attempts=2, base_delay_s=0.01).execute_sync(executor, "async () => 0")
        finally:
            blocker.join(60)
    assert "Given up after 2 attempts." in (info.value.__notes__ or [])
    assert info.value.attempts == 2  # counted as data too, and carried by its wire form
    data = info.value.to_data()
    assert data.attempts == 2
    again = fault_from_data(msgspec.json.decode(msgspec.json.encode(data), type=FaultData))
    assert isinstance(again, QueueFull) and again.attempts == 2


def test_a_fault_a_policy_did_not_retry_counts_one_try() -> None:
    fault = InvalidRequest("no")
    assert fault.attempts == 1 and fault.to_data().attempts == 1
    old_wire = msgspec.json.encode({"code": "INVALID_REQUEST", "message": "no", "retryable": False})
    assert fault_from_data(msgspec.json.decode(old_wire, type=FaultData)).attempts == 1
