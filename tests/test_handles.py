"""Retained handles: a run that returns a request handler keeps serving invocations."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from codemode import HandleExpired, HandleLost, IsolateExecutor, QueueFull, SyncIsolateExecutor, tool_result
from codemode.texts import timeout_text

COUNTER = """async () => {
    let count = 0;
    return async (request) => {
        count++;
        const body = request.method === 'POST' ? await request.text() : null;
        return Response.json({ count, method: request.method, url: request.url, body,
                               header: request.headers.get('x-test') });
    };
}"""


def test_state_survives_between_invocations_and_tools_keep_working() -> None:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        return tool_result(json.loads(args_json)[0] * 10)

    with SyncIsolateExecutor(pool={"max_workers": 2}) as ex:
        created = ex.execute(
            """async () => {
                let calls = 0;
                return { fetch: async (req) => {
                    calls++;
                    console.log('call', calls);
                    return new Response(String(await store.times(calls)), { status: 201,
                                        headers: { 'x-calls': String(calls) } });
                } };
            }""",
            providers=[{"name": "store", "tools": ["times"]}],
            dispatch=dispatch,
            retain_handles=True,
        )
        assert created.error is None and created.result is None and created.handle
        for n in (1, 2, 3):
            out = ex.invoke_handle(created.handle, {"method": "GET", "url": "https://svc.test/"})
            assert out.error is None
            assert out.result["status"] == 201
            assert out.result["body"] == str(n * 10)
            assert ["x-calls", str(n)] in out.result["headers"]
            assert [e.text for e in out.logs] == [f"call {n}"]
        # The pool keeps serving other runs on the other child meanwhile.
        assert ex.execute("async () => 6 * 7").result == 42
        ex.release_handle(created.handle)
        with pytest.raises(HandleLost):
            ex.invoke_handle(created.handle, {"url": "https://svc.test/"})


def test_request_data_reaches_the_handler() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2}) as ex:
        handle = ex.execute(COUNTER, retain_handles=True).handle
        assert handle is not None
        out = ex.invoke_handle(
            handle,
            {
                "method": "post",
                "url": "https://svc.test/a?b=1",
                "headers": {"x-test": "yes"},
                "body": "payload",
            },
        )
        assert json.loads(out.result["body"]) == {
            "count": 1,
            "method": "POST",
            "url": "https://svc.test/a?b=1",
            "body": "payload",
            "header": "yes",
        }


def test_without_retain_or_without_a_handler_nothing_is_retained() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        plain = ex.execute(COUNTER)
        assert plain.handle is None and plain.error is not None and "a function" in plain.error
        value = ex.execute("async () => 42", retain_handles=True)
        assert value.result == 42 and value.handle is None
        assert ex.execute("async () => 1").result == 1  # the child is free again


def test_a_hundred_invocations_some_concurrent() -> None:
    async def main() -> None:
        async with IsolateExecutor(pool={"max_workers": 2}) as ex:
            handle = (await ex.execute(COUNTER, retain_handles=True)).handle
            assert handle is not None
            results = []
            for _ in range(10):
                batch = await asyncio.gather(
                    *(ex.invoke_handle(handle, {"url": "https://svc.test/"}) for _ in range(10))
                )
                results.extend(batch)
            counts = sorted(json.loads(r.result["body"])["count"] for r in results)
            assert counts == list(range(1, 101))  # serialized per isolate, none lost
            others = await asyncio.gather(*(ex.execute("async () => 1") for _ in range(10)))
            assert all(o.result == 1 for o in others)

    asyncio.run(main())


def test_idle_handles_expire() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2}, handle_idle_ttl=0.3) as ex:
        handle = ex.execute(COUNTER, retain_handles=True).handle
        assert handle is not None
        assert ex.invoke_handle(handle, {"url": "https://svc.test/"}).error is None
        time.sleep(0.8)
        with pytest.raises(HandleExpired) as info:
            ex.invoke_handle(handle, {"url": "https://svc.test/"})
        assert info.value.code == "HANDLE_EXPIRED"
        # the child went back to the pool: two runs can proceed at once again
        assert ex.execute("async () => 2").result == 2


def test_a_handle_whose_child_died_is_lost() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2}) as ex:
        handle = ex.execute(COUNTER, retain_handles=True).handle
        assert handle is not None
        pool = ex._async._pool
        assert pool is not None
        holder = [c for c in pool.children() if c.retained is not None]
        assert holder[0].pid is not None
        os.kill(holder[0].pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(HandleLost) as info:
            ex.invoke_handle(handle, {"url": "https://svc.test/"})
        assert "child process that held its isolate is gone" in str(info.value)
        assert ex.execute("async () => 3").result == 3


def test_an_invocation_has_its_own_timeout_and_loses_the_handle_when_it_hits_it() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2}) as ex:
        handle = ex.execute(
            "async () => async (req) => { if (req.url.endsWith('/spin')) { await null; while (true) {} }"
            " return new Response('ok') }",
            retain_handles=True,
        ).handle
        assert handle is not None
        assert ex.invoke_handle(handle, {"url": "https://svc.test/"}).result["body"] == "ok"
        out = ex.invoke_handle(handle, {"url": "https://svc.test/spin"}, timeout=300)
        assert out.error == timeout_text(300)
        with pytest.raises(HandleLost):
            ex.invoke_handle(handle, {"url": "https://svc.test/"})


def test_a_handler_that_throws_or_returns_no_response() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2}) as ex:
        handle = ex.execute(
            "async () => (req) => { if (req.url.endsWith('/throw')) throw new Error('bad request');"
            " return 'not a response' }",
            retain_handles=True,
        ).handle
        assert handle is not None
        assert ex.invoke_handle(handle, {"url": "https://a.test/throw"}).error == "bad request"
        out = ex.invoke_handle(handle, {"url": "https://a.test/"})
        assert out.error == "The request handler must return (or resolve to) a Response."
        # Program errors keep the handle.
        assert ex.invoke_handle(handle, {"url": "https://a.test/throw"}).error == "bad request"


def test_the_cap_on_retained_handles() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2}, max_handles=1) as ex:
        first = ex.execute(COUNTER, retain_handles=True).handle
        assert first is not None
        with pytest.raises(QueueFull) as info:
            ex.execute(COUNTER, retain_handles=True)
        assert "max_handles=1" in str(info.value)
        ex.release_handle(first)
        assert ex.execute(COUNTER, retain_handles=True).handle is not None
