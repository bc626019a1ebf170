"""The executor contract: every test runs unchanged against the in-process executor and
the fleet client (see the ``executor`` fixture). A difference between them is a bug."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from codemode import Executor, ExecutorError, HandleLost, InvalidRequest, Outcome, tool_error, tool_result
from codemode._contract import ModuleSource
from codemode.texts import NETWORK_DISABLED, timeout_text

pytestmark = pytest.mark.anyio

STORE = [{"name": "store", "tools": ["get", "put"]}]


async def test_result_is_json_data(executor: Executor) -> None:
    outcome = await executor.execute("async () => ({ answer: 6 * 7, list: [1, 'a', null] })")
    assert isinstance(outcome, Outcome)
    assert outcome.error is None
    assert outcome.result == {"answer": 42, "list": [1, "a", None]}


async def test_logs_keep_level_and_text(executor: Executor) -> None:
    outcome = await executor.execute(
        "async () => { console.log('a', 1); console.warn('careful'); console.error('bad'); return 0 }"
    )
    assert [entry.to_dict() for entry in outcome.logs] == [
        {"level": "log", "text": "a 1"},
        {"level": "warn", "text": "careful"},
        {"level": "error", "text": "bad"},
    ]


async def test_throw_is_an_error_not_an_exception(executor: Executor) -> None:
    outcome = await executor.execute(
        "async () => { console.log('before'); throw new Error('the order was not found') }"
    )
    assert outcome.result is None
    assert outcome.error is not None and "the order was not found" in outcome.error
    assert [e.text for e in outcome.logs] == ["before"]


async def test_timeout_has_the_declared_text(executor: Executor) -> None:
    outcome = await executor.execute("() => { while (true) {} }", timeout=300)
    assert outcome.error == timeout_text(300)


async def test_tool_calls_reach_dispatch_and_return(executor: Executor) -> None:
    seen: list[tuple[str, str, str]] = []

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        seen.append((provider, tool, args_json))
        return tool_result({"id": msgspec.json.decode(args_json)[0], "total": 12.5})

    outcome = await executor.execute(
        "async () => { const a = await store.get('o-1'); const b = await store.get('o-2');"
        " return [a, b.total] }",
        providers=STORE,
        dispatch=dispatch,
    )
    assert outcome.error is None
    assert outcome.result == [{"id": "o-1", "total": 12.5}, 12.5]
    assert seen == [("store", "get", '["o-1"]'), ("store", "get", '["o-2"]')]


async def test_promise_all_runs_tool_calls_concurrently(executor: Executor) -> None:
    arrived = 0
    both = asyncio.Event()

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            both.set()
        # Each call waits until all three are in flight: sequential calls would time out.
        await asyncio.wait_for(both.wait(), 5)
        return tool_result(msgspec.json.decode(args_json)[0])

    outcome = await executor.execute(
        "async () => await Promise.all([store.get(1), store.get(2), store.get(3)])",
        providers=STORE,
        dispatch=dispatch,
    )
    assert outcome.error is None
    assert outcome.result == [1, 2, 3]


async def test_a_flood_of_concurrent_calls_is_answered_call_by_call(executor: Executor) -> None:
    """2,000 calls in flight at once: each answer reaches its own call (in the fleet the
    first call's push rides with the reader's BLPOP, and the rest go up on their own
    while that BLPOP waits), and none is lost or answered twice."""
    seen: list[int] = []

    async def dispatch(provider: str, tool: str, args_json: str) -> str:
        [i] = msgspec.json.decode(args_json)
        seen.append(i)
        await asyncio.sleep(0 if i % 2 else 0.001)  # half answer at once, half a moment later
        return tool_result(i * 3)

    outcome = await executor.execute(
        """async () => {
            const answers = await Promise.all([...Array(2000).keys()].map(i => store.get(i)));
            return answers.every((a, i) => a === i * 3) ? answers.length : answers;
        }""",
        providers=STORE,
        dispatch=dispatch,
        timeout=30_000,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == 2000
    assert sorted(seen) == list(range(2000))


async def test_calls_still_open_at_the_deadline_end_with_the_run(executor: Executor) -> None:
    """A run that times out with 200 calls open ends with the timeout's text; the answers
    that come after are dropped, and the next run is served as usual."""
    release = asyncio.Event()

    async def slow(provider: str, tool: str, args_json: str) -> str:
        await release.wait()
        return tool_result("late")

    outcome = await executor.execute(
        "async () => await Promise.all([...Array(200).keys()].map(i => store.get(i)))",
        providers=STORE,
        dispatch=slow,
        timeout=300,
    )
    assert outcome.error == timeout_text(300), outcome.error
    release.set()

    async def quick(provider: str, tool: str, args_json: str) -> str:
        return tool_result(msgspec.json.decode(args_json)[0] + 1)

    after = await executor.execute(
        "async () => [await store.get(1), await store.get(2)]", providers=STORE, dispatch=quick
    )
    assert after.error is None, after.error
    assert after.result == [2, 3]


async def test_an_undeclared_tool_name_reaches_dispatch(executor: Executor) -> None:
    seen: list[tuple[str, str]] = []

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        seen.append((provider, tool))
        if tool not in ("get", "put"):
            return tool_error(f"{provider}.{tool} is not a tool this host serves.")
        return tool_result(None)

    outcome = await executor.execute(
        "async () => { try { await store.dropAll() } catch (e) { return e.message } }",
        providers=STORE,
        dispatch=dispatch,
    )
    assert seen == [("store", "dropAll")]
    assert outcome.result == "store.dropAll is not a tool this host serves."


async def test_a_dispatch_that_raises_rejects_the_call(executor: Executor) -> None:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        raise RuntimeError("database password is hunter2")

    outcome = await executor.execute(
        "async () => { try { await store.get(1) } catch (e) { return e.message } }",
        providers=STORE,
        dispatch=dispatch,
    )
    assert outcome.error is None
    assert outcome.result == (
        "The tool store.get failed in the host (RuntimeError). "
        "Try another approach, or report that this tool is failing."
    )
    assert "hunter2" not in outcome.result


async def test_an_oversized_tool_reply_rejects_the_call(executor: Executor) -> None:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        return tool_result("x" * (2 * 1024 * 1024))

    outcome = await executor.execute(
        "async () => { try { await store.get(1); return 'took it' } catch (e) { return e.message } }",
        providers=STORE,
        dispatch=dispatch,
    )
    assert outcome.error is None
    assert outcome.result.startswith("The tool store.get answered with more than the")


async def test_outbound_none_rejects_fetch_with_the_declared_text(executor: Executor) -> None:
    probe = await executor.execute("() => typeof fetch", outbound=None)
    if probe.result != "function":
        pytest.skip("the guest's fetch is not installed in this build yet")
    outcome = await executor.execute(
        "async () => { try { await fetch('https://example.com/'); return 'fetched' }"
        " catch (e) { return e.message } }",
        outbound=None,
    )
    assert outcome.result == NETWORK_DISABLED


@pytest.mark.parametrize(
    "bad",
    [
        {"code": 123},
        {"code": "   "},
        {"code": "() => 1", "providers": [{"name": "not an identifier", "tools": []}]},
        {"code": "() => 1", "providers": STORE},  # tools declared, no dispatch
        {"code": "() => 1", "timeout": -5},
        {"code": "() => 1", "outbound": "everything"},
    ],
)
async def test_invalid_request_raises_invalid_request(executor: Executor, bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest) as info:
        await executor.execute(**bad)
    assert isinstance(info.value, ExecutorError)
    assert info.value.code == "INVALID_REQUEST" and not info.value.retryable
    assert info.value.started is False


async def test_the_guest_has_no_process(executor: Executor) -> None:
    outcome = await executor.execute("() => [typeof process === 'undefined', typeof require, typeof Buffer]")
    assert outcome.result == [True, "undefined", "undefined"]
    bare = await executor.execute("() => process.version")
    assert bare.error is not None and "process is not defined" in bare.error


async def test_an_outbound_policy_decides_every_request_in_the_host(executor: Executor) -> None:
    from codemode import OutboundRequest, OutboundResponse

    probe = await executor.execute("() => typeof fetch", outbound=None)
    if probe.result != "function":
        pytest.skip("the guest's fetch is not installed in this build yet")
    seen: list[tuple[str, str]] = []

    async def policy(request: OutboundRequest) -> OutboundResponse:
        seen.append((request.method, request.url))
        if request.host != "api.example":
            raise PermissionError(f"Requests to {request.host} are not allowed for this run.")
        if request.url.endswith("/old"):
            return OutboundResponse(302, [("location", "/new")])
        return OutboundResponse(200, [("content-type", "text/plain")], b"hello from the host")

    outcome = await executor.execute(
        "async () => { const r = await fetch('https://api.example/old');"
        " let refused; try { await fetch('https://evil.example/') } catch (e) {"
        " refused = e.message } return [r.status, await r.text(), r.redirected, refused] }",
        outbound=policy,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [
        200,
        "hello from the host",
        True,
        "Requests to evil.example are not allowed for this run.",
    ]
    assert seen == [
        ("GET", "https://api.example/old"),
        ("GET", "https://api.example/new"),
        ("GET", "https://evil.example/"),
    ]


async def test_the_basic_handle_flow(executor: Executor) -> None:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        return tool_result(msgspec.json.decode(args_json)[0] * 10)

    created = await executor.execute(
        """async () => {
            let hits = 0;
            return async (request) => {
                hits++;
                if (request.url.endsWith('/throw')) throw new Error('bad request');
                console.log('hit', hits);
                return Response.json({ hits, tool: await store.get(hits),
                                       path: new URL(request.url).pathname },
                                     { status: 201, headers: { 'x-hits': String(hits) } });
            };
        }""",
        providers=STORE,
        dispatch=dispatch,
        retain_handles=True,
    )
    assert isinstance(created, Outcome)
    assert created.error is None and created.result is None
    assert isinstance(created.handle, str) and created.handle
    handle = created.handle
    first = await executor.invoke_handle(handle, {"method": "GET", "url": "https://svc.local/a"})
    second = await executor.invoke_handle(handle, {"url": "https://svc.local/b"})
    assert first.error is None and first.handle is None
    assert set(first.result) == {"status", "statusText", "headers", "body"}
    assert first.result["status"] == 201 and ["x-hits", "1"] in first.result["headers"]
    assert first.result["body"] == '{"hits":1,"tool":10,"path":"/a"}'
    assert second.result["body"] == '{"hits":2,"tool":20,"path":"/b"}'
    assert [e.to_dict() for e in second.logs] == [{"level": "log", "text": "hit 2"}]
    thrown = await executor.invoke_handle(handle, {"url": "https://svc.local/throw"})
    assert thrown.error == "bad request" and thrown.result is None
    third = await executor.invoke_handle(handle, {"url": "https://svc.local/c"})
    assert third.result["body"] == '{"hits":4,"tool":40,"path":"/c"}'
    with pytest.raises(InvalidRequest):
        await executor.invoke_handle(handle, {"method": "GET"})  # no url
    await executor.release_handle(handle)
    with pytest.raises(HandleLost) as info:
        await executor.invoke_handle(handle, {"url": "https://svc.local/a"})
    assert info.value.code == "HANDLE_LOST" and not info.value.retryable
    with pytest.raises(HandleLost):
        await executor.release_handle(handle)
    with pytest.raises(HandleLost):
        await executor.invoke_handle("no-such-handle", {"url": "https://svc.local/a"})
    # A program that returns no request handler retains nothing.
    plain = await executor.execute("async () => 42", retain_handles=True)
    assert plain.result == 42 and plain.handle is None


async def test_modules_cross_as_data_and_import_resolves(executor: Executor) -> None:
    modules: dict[str, ModuleSource] = {
        "lib/math": "export const add = (a, b) => a + b\nexport default 7\n",
        "lib/cfg": {"type": "json", "value": {"n": 3}},
        "lib/cjs": {"type": "cjs", "source": "module.exports = { twice: (x) => 2 * x }\n"},
    }
    outcome = await executor.execute(
        """async () => {
            const m = await import('lib/math');
            const c = await import('lib/cfg');
            const j = await import('lib/cjs');
            let missing;
            try { await import('lib/none') } catch (e) { missing = e.message }
            return [m.add(1, 2), m.default, c.default.n, j.default.twice(4), missing];
        }""",
        modules=modules,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result[:4] == [3, 7, 3, 8]
    assert outcome.result[4].startswith("Cannot import 'lib/none': this run can import")


async def test_randomness_is_fresh_in_every_isolate(executor: Executor) -> None:
    code = "async () => [crypto.randomUUID(), Array.from(crypto.getRandomValues(new Uint8Array(8)))]"
    first = await executor.execute(code)
    second = await executor.execute(code)
    assert first.error is None and second.error is None
    assert first.result[0] != second.result[0]
    assert first.result[1] != second.result[1]


DEEP = 1_000
"""Levels of nesting past Python's recursion limit, which msgspec's decoders recurse against."""


async def test_a_deeply_nested_tool_reply_rejects_the_call_at_once(executor: Executor) -> None:
    """A reply nested past the host's decoders rejects its call with a sentence right away
    (it used to escape the reply check and leave the call waiting until the run's timeout);
    the run goes on and its next call is served."""

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        if tool == "put":
            return tool_result("still here")
        return '{"result": ' + "[" * DEEP + "]" * DEEP + "}"

    outcome = await executor.execute(
        "async () => { let said; try { await store.get(1); said = 'took it' }"
        " catch (e) { said = e.message } return [said, await store.put(2)] }",
        providers=STORE,
        dispatch=dispatch,
    )
    assert outcome.error is None, outcome.error
    said, after = outcome.result
    assert said == (
        "The tool store.get answered with data nested too deeply to read. "
        "Ask it for flatter data (fewer levels of lists and objects)."
    )
    assert after == "still here"


def _nested_result(depth: int) -> str:
    return f"() => {{ let v = []; for (let i = 1; i < {depth}; i++) v = [v]; return v }}"


async def test_a_deeply_nested_result_crosses_whole_or_is_the_runs_error(executor: Executor) -> None:
    """How deep a result may nest does not depend on how deep the reading stack happens to
    be (each side reads again from a fresh stack): 990 levels cross whole in both
    executors (the fleet's host raised RecursionError, or its worker's outcome never left
    and the host reported a crash), and 1,000 are the run's error, a sentence."""
    from codemode._host.nesting import RESULT_TOO_DEEP

    crossed = await executor.execute(_nested_result(990))
    assert crossed.error is None, crossed.error
    depth, value = 0, crossed.result
    while value:
        depth, value = depth + 1, value[0]
    assert depth == 989  # (and the innermost [] itself)

    too_deep = await executor.execute(_nested_result(DEEP))
    assert too_deep.error == RESULT_TOO_DEEP
    assert too_deep.result is None


@pytest.mark.parametrize(
    "answer",
    [
        {"status": "200"},
        {"status": 200, "headers": [["a", ["b"]]]},
        "body",
    ],
    ids=["status-text", "nested-header", "plain-text"],
)
async def test_a_policy_answer_that_is_not_a_response_rejects_the_fetch_at_once(
    executor: Executor, answer: Any
) -> None:
    """Whatever a policy answers, the fetch settles: a mapping that does not convert used to
    raise out of the in-process executor's fetch path and leave the fetch waiting for the
    run's timeout. The run goes on."""
    from codemode import OutboundRequest, OutboundResponse

    probe = await executor.execute("() => typeof fetch", outbound=None)
    if probe.result != "function":
        pytest.skip("the guest's fetch is not installed in this build yet")

    def policy(request: OutboundRequest) -> Any:
        return OutboundResponse(200, body=b"fine") if request.url.endswith("/ok") else answer

    outcome = await executor.execute(
        "async () => { let said; try { await fetch('https://api.example/'); said = 'fetched' }"
        " catch (e) { said = e.message } const r = await fetch('https://api.example/ok');"
        " return [said, await r.text()] }",
        outbound=policy,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == ["The host's outbound policy returned something that is not a response.", "fine"]


async def test_a_policy_response_with_a_text_body_rejects_the_fetch_at_once(executor: Executor) -> None:
    """An OutboundResponse is not checked when it is made: a ``str`` body used to fail
    where the fetch could no longer be answered (in process, encoding the reply; in the
    fleet, the worker's decoding of it), and the fetch waited for the run's timeout."""
    from codemode import OutboundRequest, OutboundResponse

    def policy(request: OutboundRequest) -> OutboundResponse:
        return OutboundResponse(200, body="text, not bytes")  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested

    outcome = await executor.execute(
        "async () => { try { await fetch('https://api.example/'); return 'fetched' }"
        " catch (e) { return e.message } }",
        outbound=policy,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == "The host's outbound policy returned something that is not a response."
