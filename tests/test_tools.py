"""Tools: providers, dispatch (sync and async), envelopes, and what a bad dispatch does."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode import (
    IsolateExecutor,
    Provider,
    SyncIsolateExecutor,
    ToolRegistry,
    tool_error,
    tool_result,
)

ORDERS = [
    {"id": "o1", "user": "ada", "total": 42},
    {"id": "o2", "user": "ada", "total": 7},
    {"id": "o3", "user": "grace", "total": 100},
]

ORDERS_PROGRAM = """async () => {
    const rows = await store.listOrders('ada')
    return rows.reduce((sum, order) => sum + order.total, 0)
}"""


def test_the_seed_orders_example_prints_49(executor: SyncIsolateExecutor) -> None:
    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        [user] = json.loads(args_json)
        return json.dumps({"result": [o for o in ORDERS if o["user"] == user]})

    outcome = executor.execute(
        ORDERS_PROGRAM, providers=[{"name": "store", "tools": ["listOrders"]}], dispatch=dispatch
    )
    assert outcome.result == 49 and outcome.error is None


def test_a_sync_dispatch_works_too(executor: SyncIsolateExecutor) -> None:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        [user] = json.loads(args_json)
        return tool_result([o for o in ORDERS if o["user"] == user])

    outcome = executor.execute(
        ORDERS_PROGRAM, providers=[Provider("store", ("listOrders",))], dispatch=dispatch
    )
    assert outcome.result == 49


def test_calls_cross_as_three_strings_and_undeclared_names_reach_dispatch(
    executor: SyncIsolateExecutor,
) -> None:
    seen: list[tuple[str, str, str]] = []

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        seen.append((provider, tool, args_json))
        return tool_result(tool)

    outcome = executor.execute(
        """async () => [
            await store.listOrders('ada', { limit: 2 }),
            await store.deleteEverything(),
            typeof store.anything, await store.then,
        ]""",
        providers=[{"name": "store", "tools": ["listOrders"]}],
        dispatch=dispatch,
    )
    assert outcome.result == ["listOrders", "deleteEverything", "function", None]
    assert seen == [
        ("store", "listOrders", '["ada",{"limit":2}]'),
        ("store", "deleteEverything", "[]"),
    ]


class InFlight:
    """Counts the calls inside ``with``: how many are in now, and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.now -= 1


def test_promise_all_calls_run_concurrently_in_the_host(executor: SyncIsolateExecutor) -> None:
    """Five calls a program makes at once are all inside the (sync) dispatch at once: each
    waits at a barrier for the other four, which calls run one after another never pass.
    (A barrier, not sleeps and a clock: on a loaded machine a thread that started late let
    a 200 ms sleep end first.)"""
    calls = InFlight()
    all_in = threading.Barrier(5, timeout=10)

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        with calls:
            all_in.wait()
        return tool_result(json.loads(args_json)[0])

    outcome = executor.execute(
        "async () => Promise.all([1, 2, 3, 4, 5].map((i) => api.slow(i)))",
        providers=[{"name": "api", "tools": ["slow"]}],
        dispatch=dispatch,
        timeout=30_000,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [1, 2, 3, 4, 5]
    assert calls.peak == 5


def _slow_dispatch(provider: str, tool: str, args_json: str) -> str:
    time.sleep(0.5)
    return tool_result(json.loads(args_json)[0])


def _slower_dispatch(provider: str, tool: str, args_json: str) -> str:
    """An answer that comes far later than anything these tests assert about: what happens
    before it proves that nothing waited for it, on however loaded a machine."""
    time.sleep(3.0)
    return tool_result(json.loads(args_json)[0])


SLOW = [{"name": "api", "tools": ["slow"]}]


def test_a_call_waiting_for_its_answer_holds_neither_the_program_nor_its_timers(
    executor: SyncIsolateExecutor,
) -> None:
    """While a program waits on a slow call, its isolate's thread waits on the answers'
    pipe (the park, docs/performance.md): the code after the call runs at once (the bell
    of a lone call waits ~1 ms for a quick answer, no longer), and a timer set meanwhile
    fires on time (the park comes back for the engine's timers)."""
    outcome = executor.execute(
        "async () => { const t0 = Date.now(); const p = api.slow(1); const after = Date.now() - t0;"
        " const t1 = Date.now(); await new Promise((r) => setTimeout(r, 50));"
        " const timer = Date.now() - t1; return { after, timer, answer: await p } }",
        providers=SLOW,
        dispatch=_slower_dispatch,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result["answer"] == 1
    assert outcome.result["after"] < 2000  # not the 3 s answer
    assert 50 <= outcome.result["timer"] < 2000  # on its own clock, not the answer's


def test_a_run_that_ends_while_its_isolate_waits_for_an_answer_ends_at_its_bound(
    executor: SyncIsolateExecutor,
) -> None:
    """The park is woken when the run ends: a run whose only call outlasts its bound
    settles at the bound, and the child serves the next run (and drops the late answer)."""
    started = time.monotonic()
    outcome = executor.execute(
        "async () => api.slow(1)", providers=SLOW, dispatch=_slower_dispatch, timeout=200
    )
    assert outcome.error is not None and "200 ms" in outcome.error
    assert time.monotonic() - started < 2.5  # at its bound, not with the 3 s answer
    assert executor.execute("async () => 6 * 7").result == 42
    later = executor.execute(
        "async () => [await api.slow(2), await api.slow(3)]", providers=SLOW, dispatch=_slow_dispatch
    )
    assert later.result == [2, 3], later.error


def test_a_program_that_breaks_delivery_gets_its_error_not_a_timeout(
    executor: SyncIsolateExecutor,
) -> None:
    """Answers to a slow call are delivered by a park (docs/performance.md); a program that
    broke what delivering uses gets that error at once, and one that deleted a global the
    runtime does not need (Math) gets its answer. (A park that failed was once dropped: the
    call never settled and the run waited for its bound.)"""

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        time.sleep(0.02)  # longer than the bell of a lone call waits: the park delivers
        return tool_result(json.loads(args_json)[0])

    echo = [{"name": "api", "tools": ["echo"]}]
    outcome = executor.execute(
        "async () => { delete globalThis.Math; return await api.echo('x') }",
        providers=echo,
        dispatch=dispatch,
    )
    assert (outcome.result, outcome.error) == ("x", None)
    started = time.monotonic()
    outcome = executor.execute(
        "async () => { Object.getPrototypeOf(Uint16Array.prototype).subarray = () => {"
        " throw new Error('broken') }; return await api.echo('x') }",
        providers=echo,
        dispatch=dispatch,
        timeout=30_000,
    )
    assert outcome.error is not None and "broken" in outcome.error
    assert time.monotonic() - started < 15  # at once, not at its 30 s bound
    assert executor.execute("async () => 6 * 7").result == 42


def test_one_runs_fan_out_of_sync_calls_never_holds_another_runs_call() -> None:
    """A run's sync calls take at most 16 of the executor's threads at once: a program that
    starts 40 calls to a tool that blocks leaves room for another run's call (on the loop's
    shared default pool, 6 threads here, it waited until the first run's calls were done)."""
    release = threading.Event()
    slow = InFlight()

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        if tool == "slow":
            with slow:
                release.wait(30)
        return tool_result(tool)

    providers = [{"name": "api", "tools": ["slow", "fast"]}]

    async def scenario() -> None:
        async with IsolateExecutor(pool={"max_workers": 2}) as ex:
            fan_out = asyncio.ensure_future(
                ex.execute(
                    "async () => (await Promise.all(Array.from({ length: 40 }, () => api.slow()))).length",
                    providers=providers,
                    dispatch=dispatch,
                    timeout=30_000,
                )
            )
            deadline = time.monotonic() + 20
            while slow.peak < 16 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            other = await ex.execute(
                "async () => api.fast()", providers=providers, dispatch=dispatch, timeout=5_000
            )
            assert other.error is None and other.result == "fast"
            assert slow.now == 16, "the first run's calls still wait, 16 at a time"
            release.set()
            assert (await fan_out).result == 40

    try:
        asyncio.run(scenario())
    finally:
        release.set()
    assert slow.peak == 16


def test_async_dispatch_calls_overlap_as_well(executor: SyncIsolateExecutor) -> None:
    """Each call waits until all three are in the dispatch at once, which calls served one
    after another never are (no clock: a sleep-and-measure version failed on a loaded machine)."""
    in_flight = 0
    all_in: asyncio.Event | None = None

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        nonlocal in_flight, all_in
        all_in = all_in or asyncio.Event()
        in_flight += 1
        if in_flight == 3:
            all_in.set()
        try:
            await asyncio.wait_for(all_in.wait(), 20)
        except TimeoutError:
            return tool_error("served alone")
        return tool_result(json.loads(args_json)[0] * 2)

    outcome = executor.execute(
        "async () => Promise.all([1, 2, 3].map((i) => api.double(i)))",
        providers=[{"name": "api", "tools": ["double"]}],
        dispatch=dispatch,
        timeout=60_000,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [2, 4, 6]


def test_a_flood_of_calls_is_served_whole_and_in_order_a_share_per_loop_turn(
    executor: SyncIsolateExecutor,
) -> None:
    """Past CALLS_STARTED_PER_TURN calls in one loop turn, the rest wait in the run's line
    for the next turns (so the loop keeps reading the child between them): every call is
    still served, in the order the program made them."""
    from codemode._host.calls import CALLS_STARTED_PER_TURN

    served: list[int] = []

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        served.append(json.loads(args_json)[0])
        return tool_result(json.loads(args_json)[0])

    n = 20 * CALLS_STARTED_PER_TURN
    outcome = executor.execute(
        f"async () => (await Promise.all(Array.from({{ length: {n} }}, (_, i) => api.echo(i))))"
        ".reduce((a, b) => a + b, 0)",
        providers=[{"name": "api", "tools": ["echo"]}],
        dispatch=dispatch,
        timeout=30_000,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == n * (n - 1) // 2
    assert served == list(range(n))


def test_a_run_that_outgrows_its_journal_ends_whole_and_in_order(executor: SyncIsolateExecutor) -> None:
    """Past the journal's JOURNAL_UNITS, a run's messages wait in the outbox and leave as
    the string value of a pump (read on the isolate's thread without mini-racer's general
    conversion): log lines, tool calls and the result all arrive, in the order made."""
    from codemode._child.runtime import JOURNAL_UNITS

    served: list[int] = []

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        served.append(json.loads(args_json)[0])
        return tool_result(json.loads(args_json)[0] * 2)

    lines = 2 * JOURNAL_UNITS // 1000  # 1,000-unit log lines: twice what the journal holds
    outcome = executor.execute(
        f"""async () => {{
            let sum = 0;
            for (let i = 0; i < {lines}; i++) {{
                console.log(String(i).padStart(4, '0') + 'é'.repeat(996));
                if (i % 64 === 0) sum += await api.twice(i);
            }}
            return {{ sum, tail: 'ü'.repeat(3000) }};
        }}""",
        providers=[{"name": "api", "tools": ["twice"]}],
        dispatch=dispatch,
        timeout=30_000,
    )
    assert outcome.error is None, outcome.error
    calls = list(range(0, lines, 64))
    assert served == calls
    assert outcome.result == {"sum": 2 * sum(calls), "tail": "ü" * 3000}
    assert [entry.text[:4] for entry in outcome.logs] == [f"{i:04d}" for i in range(lines)]
    assert all(entry.text[4:] == "é" * 996 for entry in outcome.logs)


def test_a_module_first_touched_after_the_journal_filled_still_loads(executor: SyncIsolateExecutor) -> None:
    """A standard library module loads through a synchronous request that the isolate waits
    for: once logs have filled the journal, the request still goes there (its reserve), not
    to the outbox, where no answer could come before the request timed out."""
    from codemode._child.runtime import JOURNAL_UNITS

    lines = JOURNAL_UNITS // 1000 + 10
    outcome = executor.execute(
        f"""async () => {{
            for (let i = 0; i < {lines}; i++) console.log('x'.repeat(1000));
            return new URL('https://a.example/b?c=7').searchParams.get('c');
        }}""",
        timeout=30_000,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == "7"
    assert len(outcome.logs) == lines


def test_an_error_envelope_rejects_the_call_with_its_text(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        """async () => {
            try { await store.get('x') } catch (e) { return ['caught', e.message, e instanceof Error] }
        }""",
        providers=[{"name": "store", "tools": ["get"]}],
        dispatch=lambda p, t, a: tool_error("no such record: x"),
    )
    assert outcome.result == ["caught", "no such record: x", True]


def test_a_dispatch_that_raises_rejects_with_a_short_clear_message(executor: SyncIsolateExecutor) -> None:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        raise KeyError("secret-token-123")

    outcome = executor.execute(
        "async () => store.get('x')", providers=[{"name": "store", "tools": ["get"]}], dispatch=dispatch
    )
    assert outcome.error == (
        "The tool store.get failed in the host (KeyError). Try another approach, "
        "or report that this tool is failing."
    )
    assert "Traceback" not in outcome.error and "secret-token" not in outcome.error


def test_a_dispatch_that_returns_garbage_rejects_clearly(executor: SyncIsolateExecutor) -> None:
    cases = {
        "notjson": "this is not json",
        "number": 42,
        "noenvelope": '{"data": 1}',
        "none": None,
        "brokenresult": '{"result": [1, }',  # (the result is checked as JSON, not decoded)
        "trailing": '{"result": 1} and more',
    }

    def dispatch(provider: str, tool: str, args_json: str) -> object:
        return cases[tool]

    for tool in cases:
        outcome = executor.execute(
            f"async () => store.{tool}()",
            providers=[{"name": "store", "tools": [tool]}],
            dispatch=dispatch,  # type: ignore[arg-type]  # garbage on purpose: its rejection is tested
        )
        assert outcome.result is None
        assert outcome.error is not None
        assert outcome.error.startswith(f"The tool store.{tool} failed in the host"), outcome.error


def test_an_oversized_tool_reply_is_refused(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        "async () => store.big()",
        providers=[{"name": "store", "tools": ["big"]}],
        dispatch=lambda p, t, a: tool_result("x" * (2 * 1024 * 1024)),
    )
    assert outcome.error is not None and "ceiling" in outcome.error


def test_a_tool_reply_over_the_ceiling_in_bytes_but_not_in_characters_is_refused(
    executor: SyncIsolateExecutor,
) -> None:
    # 600,000 characters, 1.8 MB of UTF-8: the ceiling (1 MiB) counts bytes.
    outcome = executor.execute(
        "async () => store.big()",
        providers=[{"name": "store", "tools": ["big"]}],
        dispatch=lambda p, t, a: tool_result("\u20ac" * 600_000),
    )
    assert outcome.error is not None and "ceiling" in outcome.error


def test_the_registry_serves_its_tools_and_refuses_everything_else() -> None:
    tools = ToolRegistry()

    @tools.tool("store", "listOrders")
    def list_orders(user: str) -> list[dict[str, object]]:
        return [o for o in ORDERS if o["user"] == user]

    @tools.tool("store", "total")
    async def total(user: str) -> int:
        await asyncio.sleep(0)
        return sum(int(str(o["total"])) for o in ORDERS if o["user"] == user)

    @tools.tool("store", "refuse")
    def refuse() -> None:
        raise ToolRegistry.Refusal("not today")

    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 1}) as ex:
            outcome = await ex.execute(
                """async () => {
                    const rows = await store.listOrders('ada');
                    const t = await store.total('ada');
                    const errors = [];
                    for (const f of [() => store.deleteAll(), () => admin.listOrders('ada'),
                                     () => store.refuse(), () => store.listOrders()]) {
                        try { await f() } catch (e) { errors.push(e.message) }
                    }
                    return { n: rows.length, t, errors };
                }""",
                providers=[*tools.providers(), {"name": "admin", "tools": []}],
                dispatch=tools.dispatch,
            )
            assert outcome.error is None, outcome.error
            assert outcome.result["n"] == 2 and outcome.result["t"] == 49
            errors = outcome.result["errors"]
            assert errors[0].startswith("store.deleteAll is not a tool this host serves.")
            assert "store.listOrders" in errors[0]
            assert errors[1] == "admin.listOrders is not a tool this host serves."
            assert errors[2] == "not today"
            assert errors[3].startswith("store.listOrders was called with the wrong arguments")

    asyncio.run(main())
    assert [p.name for p in tools.providers()] == ["store"]


def test_envelope_helpers() -> None:
    assert json.loads(tool_result({"a": [1, None]})) == {"result": {"a": [1, None]}}
    assert json.loads(tool_error("nope")) == {"error": "nope"}


def test_large_replies_cross_intact_in_several_feeds(executor: SyncIsolateExecutor) -> None:
    # Bigger than the isolate's inbound buffer: the text goes in several feeds, and every
    # character must arrive (a capacity mismatch once dropped a few at each boundary).
    pattern = "".join(chr(0x41 + i % 26) for i in range(300_000))

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        return tool_result(pattern)

    outcome = executor.execute(
        """async () => {
            const [a, b] = await Promise.all([api.big(), api.big()]);
            let bad = -1;
            for (let i = 0; i < a.length; i++) {
                if (a.charCodeAt(i) !== 65 + (i % 26) || b.charCodeAt(i) !== a.charCodeAt(i)) { bad = i; break; }
            }
            return [a.length, b.length, bad];
        }""",
        providers=[{"name": "api", "tools": ["big"]}],
        dispatch=dispatch,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [300_000, 300_000, -1]


STEP = st.one_of(
    st.tuples(st.just("call"), st.integers(0, 2)),  # one call; the host answers at once or after a sleep
    st.tuples(st.just("all"), st.integers(2, 6)),  # a fan-out of calls
    st.tuples(st.just("log"), st.integers(1, 3)),
    st.tuples(st.just("timer"), st.integers(0, 2)),  # setTimeout(ms) between calls
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=12))
def test_any_mix_of_calls_logs_and_timers_ends_whole_and_in_order(
    executor: SyncIsolateExecutor, steps: list[tuple[str, int]]
) -> None:
    """The child acts on some of a run's messages from the isolate's thread and wakes its
    loop only when it must: whatever the interleaving, every reply gets in, every log line
    comes out in order, and the run ends (a lost wake-up would end it on the clock)."""

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        [n, delay] = json.loads(args_json)
        if delay:
            await asyncio.sleep(delay / 1000)
        return tool_result(n * 2)

    lines = ["async () => {", "  let total = 0, k = 0;"]
    expected_logs: list[str] = []
    expected_total, k = 0, 0
    for kind, n in steps:
        if kind == "call":
            lines.append(f"  total += await t.x(k++, {n});")
            expected_total += 2 * k
            k += 1
        elif kind == "all":
            lines.append(
                f"  for (const v of await Promise.all(Array.from({{length: {n}}}, (_, j) => "
                f"t.x(k + j, j % 2)))) total += v; k += {n};"
            )
            expected_total += sum(2 * (k + j) for j in range(n))
            k += n
        elif kind == "log":
            for _ in range(n):
                lines.append(f"  console.log('line', {len(expected_logs)});")
                expected_logs.append(f"line {len(expected_logs)}")
        else:
            lines.append(f"  await new Promise((r) => setTimeout(r, {n}));")
    lines += ["  return total;", "}"]
    outcome = executor.execute(
        "\n".join(lines), providers=[{"name": "t", "tools": ["x"]}], dispatch=dispatch, timeout=20_000
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == expected_total
    assert [entry.text for entry in outcome.logs] == expected_logs


def test_a_dispatch_runs_as_a_task_of_its_own(executor: SyncIsolateExecutor) -> None:
    """Code that needs its current task (``asyncio.timeout``, anyio, httpx) works inside an
    async dispatch, even one that answers without waiting."""

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        task = asyncio.current_task()
        assert task is not None
        if tool == "wait":
            async with asyncio.timeout(5):
                await asyncio.sleep(0.001)
        return tool_result(tool)

    outcome = executor.execute(
        "async () => [await t.now(), await t.wait()]",
        providers=[{"name": "t", "tools": ["now", "wait"]}],
        dispatch=dispatch,
    )
    assert outcome.error is None and outcome.result == ["now", "wait"]
