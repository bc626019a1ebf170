"""An MCP server written with the SDK (its FastMCP, named ``MCPServer`` since mcp 2), for the
tests and the benchmark: started as a real process over stdio or streamable HTTP.

::

    python tests/mcp/upstream_server.py stdio
    python tests/mcp/upstream_server.py http PORT [--token TOKEN]

With ``--token`` the HTTP server answers 401 to every request whose ``Authorization`` header
is not ``Bearer TOKEN``: a client proves that it sends its configured headers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("upstream")


class Order(TypedDict):
    id: str
    total: int


@server.tool(description="Add two whole numbers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Answer with the text given, as text content.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(description="Look up one order (structured content).")
def order(order_id: str) -> Order:
    return {"id": order_id, "total": 42}


@server.tool(name="get-forecast", description="The weather for a city.", structured_output=False)
def get_forecast(city: str, days: int = 1) -> str:
    return f"{city}: sunny for {days} day(s)"


@server.tool(description="Always fails with the reason given.")
def refuse(reason: str) -> str:
    raise ToolError(reason)


@server.tool(description="Sleep, then answer with the seconds slept.")
async def sleep(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@server.tool(description="End the server's process at once, in the middle of this call.")
def die() -> str:
    sys.stdout.flush()
    os._exit(3)


@server.tool(description="The process id of the server.")
def pid() -> int:
    return os.getpid()


@server.tool(description="The Authorization header this call arrived with (HTTP only).")
def whoami(ctx: Context) -> str:
    headers: Any = ctx.headers or {}
    return str(headers.get("authorization", ""))


def _http(port: int, token: str | None) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    app: ASGIApp = server.streamable_http_app()
    if token is not None:
        inner = app
        expected = f"Bearer {token}".encode()

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
            await inner(scope, receive, send)

        app = guarded
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("port", type=int, nargs="?")
    parser.add_argument("--token")
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        _http(args.port, args.token)


if __name__ == "__main__":
    main()
