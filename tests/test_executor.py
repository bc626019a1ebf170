"""The in-process executor: fresh isolates, the entry form, the outcome envelope, the
guest's world, and the sync/async facades."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import msgspec
import pytest

from codemode import (
    Disposed,
    InvalidRequest,
    IsolateExecutor,
    LogEntry,
    Outcome,
    SyncIsolateExecutor,
    tool_result,
)

from .conftest import child_pids, wait_gone


def test_first_execution_returns_the_value(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute("async () => 6 * 7")
    assert msgspec.structs.replace(outcome, duration_ms=None, ran_on=None) == Outcome(
        result=42, error=None, logs=[]
    )


def _standby_of(ex: SyncIsolateExecutor) -> int:
    """Wait for the pool's standby child (it starts once the slots are full)."""
    deadline = time.monotonic() + 30
    while ex.standby_pid is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ex.standby_pid is not None
    return ex.standby_pid


def test_constructing_spawns_nothing_and_first_execute_warms_the_pool() -> None:
    # Another executor's standby may start meanwhile: count this executor's children.
    ex = SyncIsolateExecutor(pool={"max_workers": 2})
    try:
        assert ex.worker_pids == [] and ex.standby_pid is None
        assert ex.execute("async () => 1").result == 1
        deadline = time.monotonic() + 30
        while len(ex.worker_pids) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(ex.worker_pids) == 2
        pids = set(ex.worker_pids)
        for _ in range(5):
            ex.execute("() => 1")
        assert set(ex.worker_pids) == pids  # the pool stays warm: same children
        mine = pids | {_standby_of(ex)}
        assert mine <= set(child_pids())
    finally:
        ex.dispose()
    assert not (set(child_pids()) & mine)


def test_a_killed_child_is_replaced_by_the_standby_in_milliseconds() -> None:
    """The standby child (engine loaded, no isolate, no core) takes the slot, and a new
    standby starts behind it; the replacement serves at once."""
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        assert ex.execute("() => 1").result == 1
        [first] = ex.worker_pids
        standby = _standby_of(ex)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while ex.worker_pids in ([], [first]) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert ex.worker_pids == [standby]  # adopted, not started from scratch
        assert ex.execute("async () => 6 * 7").result == 42
        assert _standby_of(ex) not in (first, standby)


def test_without_a_standby_a_killed_child_is_started_anew() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1, "standby": False}) as ex:
        assert ex.execute("() => 1").result == 1
        [first] = ex.worker_pids
        time.sleep(0.3)
        assert ex.standby_pid is None
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while ex.worker_pids in ([], [first]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ex.execute("async () => 6 * 7").result == 42
        assert ex.standby_pid is None


def test_async_context_manager_ends_every_child() -> None:
    async def main() -> set[int]:
        async with IsolateExecutor(pool={"max_workers": 2}) as ex:
            assert (await ex.execute("async () => 'hi'")).result == "hi"
            return {pid for pid in [*ex.worker_pids, ex.standby_pid] if pid is not None}

    pids = asyncio.run(main())
    assert pids
    assert not wait_gone(sorted(pids))


def test_dispose_then_execute_raises_disposed() -> None:
    ex = SyncIsolateExecutor(pool={"max_workers": 1})
    ex.execute("() => 1")
    ex.dispose()
    with pytest.raises(Disposed) as info:
        ex.execute("() => 1")
    assert info.value.code == "DISPOSED" and not info.value.retryable


def test_a_fresh_isolate_per_execution(executor: SyncIsolateExecutor) -> None:
    # Run enough times that both children serve twice: nothing a program leaves on the
    # global (or on a built-in prototype) reaches the next run.
    for _ in range(4):
        out = executor.execute(
            """async () => {
                const seen = [typeof globalThis.leftover, typeof Array.prototype.leak];
                globalThis.leftover = 1;
                Array.prototype.leak = () => 'x';
                return seen;
            }"""
        )
        assert out.result == ["undefined", "undefined"]


def test_standard_globals_can_be_replaced_before_they_load(executor: SyncIsolateExecutor) -> None:
    """A standard global is a lazy accessor until first touched; one function is both its
    getter and its setter, so a set must be told from a get by its argument, not its value
    (undefined is a value a program may set)."""
    code = """async () => {
      globalThis.TextEncoder = undefined;
      URL = 5;
      const d = Object.getOwnPropertyDescriptor(globalThis, 'TextDecoder');
      return [typeof TextEncoder, URL, typeof d.get, typeof TextDecoder,
              'value' in Object.getOwnPropertyDescriptor(globalThis, 'TextDecoder')];
    }"""
    assert executor.execute(code).result == ["undefined", 5, "function", "function", True]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("async () => 6 * 7", 42),
        ("() => 'sync arrow'", "sync arrow"),
        ("function () { return [1, 2] }", [1, 2]),
        ("async function main() { return { ok: true } }", {"ok": True}),
        ("(async () => null)", None),
        ("async () => undefined", None),
        ("async () => {}", None),
        ("async () => ({ n: NaN, d: new Date(0) })", {"n": None, "d": "1970-01-01T00:00:00.000Z"}),
        ("async () => 'caf\u00e9 \U0001f600'", "caf\u00e9 \U0001f600"),
    ],
)
def test_entry_form_and_json_results(executor: SyncIsolateExecutor, code: str, expected: object) -> None:
    outcome = executor.execute(code)
    assert outcome.error is None
    assert outcome.result == expected


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("6 * 7", "must be one arrow or function expression"),
        ("const x = 1; x", "must be one arrow or function expression"),
        ("```js\nasync () => 6 * 7\n```", "is not a function"),
        ("return 6 * 7", "must be one arrow or function expression"),
    ],
)
def test_anything_but_the_entry_form_says_what_was_expected(
    executor: SyncIsolateExecutor, code: str, fragment: str
) -> None:
    outcome = executor.execute(code)
    assert outcome.result is None
    assert outcome.error is not None and fragment in outcome.error


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("async () => () => 1", "a function"),
        ("async () => ({ f() {} })", "a function at key 'f'"),
        ("async () => Symbol('s')", "a symbol"),
        ("async () => ({ big: 10n })", "BigInt"),
        ("async () => { const a = {}; a.self = a; return a }", "cycle"),
    ],
)
def test_values_that_cannot_cross_give_a_clear_error(
    executor: SyncIsolateExecutor, code: str, fragment: str
) -> None:
    outcome = executor.execute(code)
    assert outcome.result is None
    assert outcome.error is not None
    assert fragment in outcome.error
    assert "cannot cross" in outcome.error


def test_throw_comes_back_as_error_not_exception(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute('async () => { throw new Error("nope") }')
    assert (outcome.result, outcome.error, outcome.logs) == (None, "nope", [])
    assert outcome.error_detail is not None and outcome.error_detail.name == "Error"
    assert executor.execute("async () => { throw 'plain' }").error == "plain"
    assert executor.execute("async () => { await null; throw new TypeError('late') }").error == "late"


def test_logs_are_kept_and_formatted_like_a_console(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async () => {
            console.log('working');
            console.info({ a: 1, b: 'x' });
            console.warn([1, 2, 3]);
            console.error('n=%d', 5);
            console.debug(null, undefined, true);
            return 6 * 7;
        }"""
    )
    assert outcome.result == 42
    assert outcome.logs == [
        LogEntry("log", "working"),
        LogEntry("info", "{ a: 1, b: 'x' }"),
        LogEntry("warn", "[ 1, 2, 3 ]"),
        LogEntry("error", "n=5"),
        LogEntry("debug", "null undefined true"),
    ]


def test_logs_before_a_throw_and_before_a_timeout_are_kept(executor: SyncIsolateExecutor) -> None:
    thrown = executor.execute("async () => { console.log('before'); throw new Error('boom') }")
    assert thrown.error == "boom"
    assert thrown.logs == [LogEntry("log", "before")]
    timed = executor.execute(
        "async () => { console.log('step 1'); await null; console.log('step 2'); while (true) {} }",
        timeout=300,
    )
    assert timed.error is not None and timed.error.startswith("Execution timed out at its 300 ms")
    assert [e.text for e in timed.logs] == ["step 1", "step 2"]


LONG_LINES = """async () => {
    %s
    const text = 'é😀'.repeat(300) + '\\ud800' + 'x'.repeat(20000);
    console.log(text);
    console.log('a'.repeat(1100));
    console.log('short');
    return { text, more: 'q'.repeat(5000) };
}"""
TAMPERINGS = [
    "",
    "WebAssembly.Module = function Module() {};",
    "delete globalThis.WebAssembly;",
    "Object.defineProperty(WebAssembly.Memory.prototype, 'buffer', { get() { return new ArrayBuffer(8) } });",
    "Object.prototype.maximum = 0; Object.prototype.builtins = [];",
    "Object.defineProperty(ArrayBuffer.prototype, 'byteLength', { get() { return 1e9 } });",
    "Array.prototype[Symbol.iterator] = function* () { yield 0; };",
    "WebAssembly.Memory.prototype.grow = WebAssembly.Table.prototype.grow;",
]


def test_long_lines_cross_whole_however_the_program_treated_webassembly(
    executor: SyncIsolateExecutor,
) -> None:
    """Long log lines leave through a small WebAssembly copier that the runtime makes on
    the first very long one (COPIER_FIRST_UNITS); a program that replaced what making it
    reads gets the interpreter's copy instead. (A result that long is taken from its
    isolate: see the next test.) Either way every unit arrives (a lone surrogate as
    U+FFFD, as everywhere else a program's text crosses)."""
    text = "é😀" * 300 + "\ufffd" + "x" * 20000
    for tampering in TAMPERINGS:
        outcome = executor.execute(LONG_LINES % tampering)
        assert outcome.error is None, (tampering, outcome.error)
        assert outcome.result == {"text": text, "more": "q" * 5000}, tampering
        assert [e.text for e in outcome.logs] == [text, "a" * 1100, "short"], tampering


LONG_RESULT = """async () => {
    console.log('first'); await null; console.log('second');
    const got = await t.echo(%d);
    console.log('third');
    return { text: got.text + '\\ud800' };
}"""


@pytest.mark.parametrize("units", [46, 47, 48, 49, 300, 70_000])
def test_a_long_result_arrives_whole_and_after_its_logs(executor: SyncIsolateExecutor, units: int) -> None:
    """A result of 64 UTF-16 units of JSON or more waits in its isolate and the child takes
    it as the value of a call of its own (runtime.js, finish); a shorter one comes through
    the journal. Either way every unit arrives (a lone surrogate as U+FFFD), after every
    log line the program wrote before it. ``units`` straddles the threshold: the JSON
    text is ``units`` + 16 units long."""

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        [n] = json.loads(args_json)
        return tool_result({"text": "😀" + "é" * (n - 2)})  # n UTF-16 units

    outcome = executor.execute(
        LONG_RESULT % (units - 1), providers=[{"name": "t", "tools": ["echo"]}], dispatch=dispatch
    )
    assert outcome.error is None
    assert outcome.result == {"text": "😀" + "é" * (units - 3) + "\ufffd"}
    assert [e.text for e in outcome.logs] == ["first", "second", "third"]


def test_a_long_result_after_a_full_journal_arrives_after_every_log_line(
    executor: SyncIsolateExecutor,
) -> None:
    """Log lines that overflow the journal wait in the runtime's outbox, and so does the
    word that a long result is waiting: the loop's pump takes both, in order."""
    outcome = executor.execute(
        "async () => { for (let i = 0; i < 4; i++) console.log(String(i).repeat(100000));"
        " return 'r'.repeat(1000) }"
    )
    assert outcome.error is None
    assert outcome.result == "r" * 1000
    assert [e.text for e in outcome.logs] == [str(i) * 100000 for i in range(4)]


def test_a_long_log_line_before_a_loop_that_never_yields_is_kept(executor: SyncIsolateExecutor) -> None:
    timed = executor.execute(
        "async () => { console.log('y'.repeat(20000)); await null; console.log('z'.repeat(1500));"
        " while (true) {} }",
        timeout=300,
    )
    assert timed.error is not None and timed.error.startswith("Execution timed out at its 300 ms")
    assert [e.text for e in timed.logs] == ["y" * 20000, "z" * 1500]


def test_only_installed_names_exist(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async () => ({
            process: typeof process,
            require: typeof require,
            Buffer: typeof Buffer,
            WebSocket: typeof WebSocket,
        })"""
    )
    assert outcome.result == {
        "process": "undefined",
        "require": "undefined",
        "Buffer": "undefined",
        "WebSocket": "undefined",
    }
    outcome = executor.execute("async () => process.version")
    assert (outcome.result, outcome.error, outcome.logs) == (None, "process is not defined", [])


def test_installed_timers_and_microtasks(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async () => {
            const order = [];
            queueMicrotask(() => order.push('micro'));
            await new Promise((r) => setTimeout(() => { order.push('timeout0'); r(); }, 0));
            const cancelled = setTimeout(() => order.push('never'), 1);
            clearTimeout(cancelled);
            let n = 0;
            await new Promise((r) => {
                const id = setInterval(() => { n++; if (n === 3) { clearInterval(id); r(); } }, 1);
            });
            await new Promise((r) => setTimeout(r, 20));
            return { order, n, types: [typeof setTimeout, typeof clearTimeout, typeof setInterval,
                     typeof clearInterval, typeof queueMicrotask, typeof console] };
        }"""
    )
    assert outcome.error is None
    assert outcome.result == {
        "order": ["micro", "timeout0"],
        "n": 3,
        "types": ["function"] * 5 + ["object"],
    }


def test_constructor_chain_reaches_only_the_isolates_own_global(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async function () {
            const g = this.constructor.constructor('return this')();
            const g2 = (() => {}).constructor('return globalThis')();
            return [g === globalThis, g2 === globalThis, typeof g.process, typeof g.require,
                    Object.getOwnPropertyNames(g).filter((n) => n.startsWith('__')).length];
        }"""
    )
    assert outcome.result == [True, True, "undefined", "undefined", 0]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"code": 42}, "code must be a string"),
        ({"code": None}, "code must be a string"),
        ({"code": "  "}, "code is empty"),
        ({"code": "() => 1", "timeout": -5}, "timeout must be a positive number"),
        ({"code": "() => 1", "timeout": "fast"}, "timeout must be a positive number"),
        ({"code": "() => 1", "providers": [{"name": "not valid", "tools": []}]}, "identifier"),
        ({"code": "() => 1", "providers": [{"name": "1abc"}]}, "identifier"),
        ({"code": "() => 1", "providers": [{"name": "console"}], "dispatch": lambda *a: ""}, "shadow"),
        ({"code": "() => 1", "providers": [{"name": "s", "tools": ["a"]}]}, "no dispatch"),
        ({"code": "() => 1", "providers": "store"}, "providers must be a list"),
        ({"code": "() => 1", "count_host_waits": "yes"}, "count_host_waits"),
        ({"code": "() => 1", "outbound": 5}, "outbound"),
        ({"code": "() => 1", "timeout": 10_000_000}, "operator ceiling max_timeout_ms=300000"),
    ],
)
def test_malformed_requests_raise_invalid_request_before_anything_runs(
    kwargs: dict[str, object],
    fragment: str,
) -> None:
    async def main() -> None:
        ex = IsolateExecutor(pool={"max_workers": 1})
        try:
            with pytest.raises(InvalidRequest) as info:
                await ex.execute(**kwargs)  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested
            assert fragment in str(info.value)
            assert info.value.code == "INVALID_REQUEST"
            assert not info.value.retryable and not info.value.started
            assert ex.worker_pids == []  # nothing was started for a malformed request
        finally:
            await ex.aclose()

    asyncio.run(main())


def test_executor_bounds_are_validated() -> None:
    with pytest.raises(InvalidRequest):
        IsolateExecutor(memory_limit=1)
    with pytest.raises(InvalidRequest):
        IsolateExecutor(pool={"max_workers": 0})
    with pytest.raises(InvalidRequest):
        IsolateExecutor(pool={"workers": 2})
    with pytest.raises(InvalidRequest, match="pin_cpus must be True or False"):
        IsolateExecutor(pool={"pin_cpus": "yes"})
    with pytest.raises(InvalidRequest, match=r"pool\.standby must be True or False"):
        IsolateExecutor(pool={"standby": 1})
    with pytest.raises(InvalidRequest, match=r"pool takes max_workers, max_queue, pin_cpus and standby"):
        IsolateExecutor(pool={"spare": True})


def test_lone_surrogates_never_wedge_a_child(executor: SyncIsolateExecutor) -> None:
    # Half a surrogate pair is ordinary JavaScript; it crosses as U+FFFD.
    outcome = executor.execute('async () => { console.log("\\ud83d"); return ["\\ud83d", "ok"] }')
    assert outcome.error is None
    assert outcome.result == ["\ufffd", "ok"]
    assert outcome.logs == [LogEntry("log", "\ufffd")]
    thrown = executor.execute('async () => { throw new Error("bad \\ud800") }')
    assert thrown.error == "bad \ufffd"


def test_code_that_cannot_be_encoded_is_refused_and_the_pool_keeps_serving() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        with pytest.raises(InvalidRequest) as info:
            ex.execute('async () => "\ud800"')
        assert "lone surrogate (U+D800)" in str(info.value)
        assert ex.execute("async () => 1").result == 1


def test_code_that_closes_the_parentheses_itself_is_refused(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute("async () => 1) || (async () => 2")
    assert outcome.error is not None and outcome.error.startswith("The code must be one arrow")


def test_the_entry_form_hint_only_follows_statements(executor: SyncIsolateExecutor) -> None:
    assert executor.execute("async () => { return 1 +* 2 }").error == "Unexpected token '*'"
    statements = executor.execute("const x = 1; x").error
    assert statements is not None and statements.endswith("pass model output through normalize_code() first.")


def test_an_executor_used_from_a_second_event_loop_says_so() -> None:
    ex = IsolateExecutor(pool={"max_workers": 1})

    async def first() -> None:
        assert (await ex.execute("async () => 1")).result == 1

    async def second() -> None:
        with pytest.raises(InvalidRequest) as info:
            await ex.execute("async () => 2")
        assert "belongs to the event loop that first used it" in str(info.value)

    async def close() -> None:
        await ex.aclose()  # from a third loop: the children are still ended

    asyncio.run(first())
    asyncio.run(second())
    asyncio.run(close())
