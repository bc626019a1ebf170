"""The global object as an EventTarget: error events for exceptions nobody catches.

Timer callbacks and microtasks run in the executor's own runtime, so those tests go through a
real executor (a child process, a fresh isolate per run); the rest use a harness isolate.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode import SyncIsolateExecutor
from tests.stdlib.conftest import Guest


@pytest.fixture(scope="module")
def ex() -> Iterator[SyncIsolateExecutor]:
    with SyncIsolateExecutor(pool={"max_workers": 1}, timeout=20_000) as executor:
        yield executor


_CATCH = """
const seen = [];
addEventListener('error', (e) => {
  seen.push([e.constructor.name, e.type, e.message, e.error && e.error.message, e.cancelable,
             e.isTrusted, e.target === globalThis, e.filename, e.lineno, e.colno]);
  e.preventDefault();
});
"""


@pytest.mark.parametrize(
    "throw",
    [
        "setTimeout(() => { throw new Error('boom'); }, 0);",
        "const id = setInterval(() => { clearInterval(id); throw new Error('boom'); }, 1);",
        "queueMicrotask(() => { throw new Error('boom'); });",
        "const t = new EventTarget(); t.addEventListener('x', () => { throw new Error('boom'); });"
        " t.dispatchEvent(new Event('x'));",
    ],
    ids=["timeout", "interval", "microtask", "listener"],
)
def test_uncaught_exceptions_fire_error_at_the_global(ex: SyncIsolateExecutor, throw: str) -> None:
    code = f"""async () => {{
      {_CATCH}
      {throw}
      await new Promise((r) => setTimeout(r, 30));
      return seen;
    }}"""
    outcome = ex.execute(code)
    assert outcome.error is None, outcome.error
    assert outcome.result == [
        ["ErrorEvent", "error", "Uncaught Error: boom", "boom", True, True, True, "", 0, 0]
    ]
    assert outcome.logs == []  # canceled: not logged


def test_uncanceled_timer_exception_is_logged_and_the_run_goes_on(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        """async () => {
          setTimeout(() => { throw new TypeError('late'); }, 0);
          queueMicrotask(() => { throw 'plain'; });
          await new Promise((r) => setTimeout(r, 30));
          return 'done';
        }"""
    )
    assert outcome.result == "done" and outcome.error is None
    texts = [entry.text for entry in outcome.logs]
    assert len(texts) == 2, texts
    assert texts[0].startswith("Uncaught 'plain'") or texts[0].startswith("Uncaught plain"), texts
    assert texts[1].startswith("Uncaught TypeError: late"), texts
    assert all(entry.level == "error" for entry in outcome.logs)


def test_onerror_gets_the_special_arguments_and_true_cancels(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        """async () => {
          const calls = [];
          onerror = (message, filename, lineno, colno, error) => {
            calls.push([message, filename, lineno, colno, error.message]);
            return error.message === 'quiet';
          };
          setTimeout(() => { throw new Error('quiet'); }, 0);
          setTimeout(() => { throw new Error('loud'); }, 5);
          await new Promise((r) => setTimeout(r, 40));
          return calls;
        }"""
    )
    assert outcome.result == [
        ["Uncaught Error: quiet", "", 0, 0, "quiet"],
        ["Uncaught Error: loud", "", 0, 0, "loud"],
    ]
    assert [e.text.split("\n")[0] for e in outcome.logs] == ["Uncaught Error: loud"]


def test_an_error_in_an_error_listener_is_logged_not_reported_again(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        """async () => {
          let calls = 0;
          addEventListener('error', () => { calls++; throw new Error('second'); });
          reportError(new Error('first'));
          return calls;
        }"""
    )
    assert outcome.result == 1
    assert sorted(e.text.split("\n")[0] for e in outcome.logs) == [
        "Uncaught Error: first",
        "Uncaught Error: second",
    ]


def test_global_is_an_event_target(guest: Guest) -> None:
    out = guest.run(
        """
        const got = [];
        const listener = (e) => got.push([e.type, e.target === globalThis, e.currentTarget === globalThis]);
        addEventListener('ping', listener);
        const r1 = dispatchEvent(new Event('ping'));
        removeEventListener('ping', listener);
        dispatchEvent(new Event('ping'));
        globalThis.addEventListener('once', () => got.push('once'), { once: true });
        globalThis.dispatchEvent(new CustomEvent('once'));
        globalThis.dispatchEvent(new CustomEvent('once'));
        let illegal;
        try { EventTarget.prototype.addEventListener.call({}, 'x', () => {}); } catch (e) { illegal = e.constructor.name; }
        const ev = new ErrorEvent('error', { message: 'm', filename: 'f.js', lineno: 3, colno: 4, error: 7 });
        return { got, r1, instance: globalThis instanceof EventTarget, illegal,
                 same: addEventListener === EventTarget.prototype.addEventListener,
                 ev: [ev.message, ev.filename, ev.lineno, ev.colno, ev.error, ev instanceof Event,
                      Object.prototype.toString.call(ev)] };
        """
    )
    assert out == {
        "got": [["ping", True, True], "once"],
        "r1": True,
        "instance": True,
        "illegal": "TypeError",
        "same": True,
        "ev": ["m", "f.js", 3, 4, 7, True, "[object ErrorEvent]"],
    }


def test_report_error_fires_and_dispatched_error_events_reach_onerror(guest: Guest) -> None:
    out = guest.run(
        """
        const seen = [];
        onerror = function (...args) { seen.push(['onerror', args.length, this === globalThis]); };
        addEventListener('error', (e) => { seen.push(['listener', e.error]); e.preventDefault(); });
        reportError(42);
        const plain = new Event('error', { cancelable: true });
        onerror = (e) => { seen.push(['plain', e === plain]); return false; };
        const notCanceled = dispatchEvent(plain);
        return { seen, notCanceled, logs: __stdlibLogs.length };
        """
    )
    assert out == {
        "seen": [["onerror", 5, True], ["listener", 42], ["plain", True], ["listener", None]],
        "notCanceled": False,
        "logs": 0,
    }


def test_performance_is_an_event_target(guest: Guest) -> None:
    out = guest.run(
        """
        let hit = 0;
        performance.addEventListener('x', () => hit++);
        performance.dispatchEvent(new Event('x'));
        let illegal;
        try { new Performance(); } catch (e) { illegal = e.constructor.name; }
        return [hit, performance instanceof EventTarget, illegal, typeof performance.now()];
        """
    )
    assert out == [1, True, "TypeError", "number"]
