"""Unhandled promise rejections: which are reported, and which the engine hides from us."""

from __future__ import annotations

import pytest

from codemode import LogEntry, SyncIsolateExecutor


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("async () => { Promise.reject(new Error('lost')); return 1 }", "lost"),
        ("async () => { new Promise((_, reject) => reject('sync')); await null; return 1 }", "sync"),
        (
            "async () => { new Promise((_, r) => setTimeout(() => r(new TypeError('t')), 1));"
            " await new Promise((r) => setTimeout(r, 20)); return 1 }",
            "t",
        ),
        (
            "async () => { Promise.all([Promise.reject(new Error('in all'))]); await null; return 1 }",
            "in all",
        ),
        (
            "async () => { Promise.resolve(1).then(() => { throw new Error('in then') });"
            " await new Promise((r) => setTimeout(r, 5)); return 1 }",
            "in then",
        ),
    ],
)
def test_caught_rejections_are_logged_and_the_result_is_unaffected(
    executor: SyncIsolateExecutor, code: str, reason: str
) -> None:
    outcome = executor.execute(code)
    assert outcome.result == 1 and outcome.error is None
    assert LogEntry("error", f"Unhandled promise rejection: {reason}") in outcome.logs


def test_handled_rejections_are_not_reported(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async () => {
            const late = Promise.reject(new Error('handled later'));
            await new Promise((r) => setTimeout(r, 5));
            late.catch(() => {});
            try { await Promise.reject(new Error('awaited')) } catch (e) {}
            await Promise.allSettled([Promise.reject(new Error('settled'))]);
            return 'ok';
        }"""
    )
    assert outcome.result == "ok"
    assert outcome.logs == []


def test_rejections_the_engine_hides_are_not_reported(executor: SyncIsolateExecutor) -> None:
    # A promise returned by an async function is the engine's own: no hook sees it reject.
    outcome = executor.execute(
        "async () => { (async () => { throw new Error('inside async fn') })(); await null; return 1 }"
    )
    assert outcome.result == 1
    assert outcome.logs == []


def test_the_instrumented_promise_still_behaves_like_promise(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async () => [
            new Promise(() => {}) instanceof Promise,
            (async () => 1)() instanceof Promise,
            Promise.name,
            await Promise.resolve(7),
            await Promise.all([1, Promise.resolve(2)]),
            await Promise.any([Promise.reject(1), Promise.resolve(3)]),
        ]"""
    )
    assert outcome.result == [True, True, "Promise", 7, [1, 2], 3]
