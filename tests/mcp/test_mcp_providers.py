"""MCP servers as providers, end to end: the SDK-written upstream server as a real process
(stdio and HTTP), programs in real isolates calling its tools through McpTools."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from mcp_helpers import TOKEN, alive, http_upstream, stdio_upstream, wait_dead

from codemode import SyncIsolateExecutor, ToolRegistry
from codemode.mcp import McpTools, McpUnavailable, StdioServer

RUN_MS = 60_000


def run(executor: SyncIsolateExecutor, tools: McpTools, code: str) -> object:
    outcome = executor.execute(code, providers=tools.providers(), dispatch=tools.dispatch, timeout=RUN_MS)
    assert outcome.error is None, outcome.error
    return outcome.result


def test_values_errors_and_mapped_names_over_stdio(executor: SyncIsolateExecutor) -> None:
    with McpTools([stdio_upstream()]) as tools:
        result = run(
            executor,
            tools,
            """async () => {
                const out = {}
                out.structured = await up.order({ order_id: 'o7' })
                out.text = await up.echo({ text: 'hi' })
                out.mapped = await up.get_forecast({ city: 'Oslo', days: 2 })
                try { await up.refuse({ reason: 'not today' }) } catch (e) { out.refused = e.message }
                try { await up.add({ a: 1 }) } catch (e) { out.checked = e.message }
                try { await up['get-forecast']({ city: 'x' }) } catch (e) { out.unmapped = e.message }
                return out
            }""",
        )
        declarations = tools.declarations()
    assert isinstance(result, dict)
    assert result["structured"] == {"id": "o7", "total": 42}
    assert result["text"] == "hi"
    assert result["mapped"] == "Oslo: sunny for 2 day(s)"
    assert "not today" in result["refused"]
    assert result["checked"].startswith("up.add was called with the wrong arguments: at arguments: 'b'")
    assert "up.get-forecast is not a tool this host serves" in result["unmapped"]
    assert "get_forecast(args: {" in declarations
    assert "(The MCP tool 'get-forecast'.) The weather for a city." in declarations
    assert "declare const up: {" in declarations


def test_a_slow_call_is_rejected_at_its_bound_and_the_run_goes_on(executor: SyncIsolateExecutor) -> None:
    with McpTools([stdio_upstream(call_timeout_s=1)]) as tools:
        result = run(
            executor,
            tools,
            """async () => {
                let slow
                try { await up.sleep({ seconds: 60 }) } catch (e) { slow = e.message }
                return [slow, await up.add({ a: 2, b: 3 })]
            }""",
        )
    assert result == [
        "up.sleep did not answer within its 1 s bound, so the call was abandoned. "
        "Ask it for less per call, or go on without this result.",
        {"result": 5},
    ]


def test_a_dying_server_rejects_pending_calls_and_the_next_run_reconnects(
    executor: SyncIsolateExecutor,
) -> None:
    with McpTools([stdio_upstream()]) as tools:
        first = run(
            executor,
            tools,
            """async () => {
                const pid = (await up.pid()).result
                const calls = await Promise.allSettled([up.sleep({ seconds: 60 }), up.die()])
                return { pid, reasons: calls.map(c => c.status + ': ' + (c.reason && c.reason.message)) }
            }""",
        )
        assert isinstance(first, dict)
        lost = (
            "The MCP server 'up' disconnected while up.{} was running, so the call did not complete "
            "(any effect it had is unknown). The server is reconnected for the next call."
        )
        assert first["reasons"] == [f"rejected: {lost.format('sleep')}", f"rejected: {lost.format('die')}"]
        assert wait_dead(first["pid"]), "the dead server's process was not reaped"
        second = run(executor, tools, "async () => (await up.pid()).result")
        assert isinstance(second, int) and second != first["pid"] and alive(second)
    assert wait_dead(second), "closing McpTools left the server's process behind"


def test_several_servers_beside_a_registry_over_http_with_headers(executor: SyncIsolateExecutor) -> None:
    registry = ToolRegistry()

    @registry.tool("local")
    def double(x: int) -> int:
        return 2 * x

    with http_upstream("web") as web, McpTools([stdio_upstream("up"), web], registries=[registry]) as tools:
        assert [p.name for p in tools.providers()] == ["up", "web", "local"]
        result = run(
            executor,
            tools,
            """async () => [
                await web.whoami(), (await up.add({ a: 1, b: 1 })).result, await local.double(21),
                await web.get_forecast({ city: 'Rome' }),
            ]""",
        )
    assert result == [{"result": f"Bearer {TOKEN}"}, 2, 42, "Rome: sunny for 1 day(s)"]


def test_an_unreachable_server_is_named_when_the_set_starts() -> None:
    with http_upstream("web", token="wrong") as web, pytest.raises(McpUnavailable) as caught:
        McpTools([web]).start()
    assert f"The MCP server 'web' ({web.url}) could not be reached" in str(caught.value)
    missing = StdioServer("gone", "/nonexistent/server")
    with pytest.raises(
        McpUnavailable, match="The MCP server 'gone' \\(/nonexistent/server\\) could not be reached"
    ):
        McpTools([missing]).start()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: StdioServer("my-server", "x"), "must be a JavaScript identifier"),
        (lambda: StdioServer("console", "x"), "would shadow a name the runtime installs"),
        (lambda: StdioServer("a", "x", call_timeout_s=0), "call_timeout_s must be a positive number"),
        (lambda: McpTools([StdioServer("a", "x"), StdioServer("a", "y")]), "claimed by both"),
    ],
)
def test_configuration_mistakes_say_what_to_change(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_results_as_values() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    from codemode.mcp._results import result_envelope

    two = CallToolResult(
        content=[
            TextContent(type="text", text="a"),
            ImageContent(type="image", data="AA==", mime_type="image/png"),
        ]
    )
    assert json.loads(result_envelope("p", "t", two)) == {
        "result": ["a", {"type": "image", "data": "AA==", "mimeType": "image/png"}]
    }
    assert json.loads(result_envelope("p", "t", CallToolResult(content=[], is_error=True))) == {
        "error": "The tool p.t failed and gave no reason."
    }
