"""One upstream MCP server, held open in the tool set's loop thread.

A connection is a task that enters the SDK's ``Client`` (which starts the server's process
or opens the HTTP session), lists the tools, and then waits until it is told to stop; the
client is entered and left in that one task, as anyio's cancel scopes require. Calls from
any number of runs go through the open client at once.

A server that dies or disconnects fails the calls in flight (the SDK answers them with
"Connection closed"): each becomes an error envelope that says so, the connection is
dropped (its process reaped), and the next call connects again.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, Tool

from .._dispatch import tool_error
from ..tools import ToolSpec
from ..tools._check import ObjectArguments
from ._config import HttpServer, ServerConfig, StdioServer
from ._names import js_names
from ._results import result_envelope

__all__ = ["ConnectFailed", "Connection", "McpTool"]

log = logging.getLogger("codemode.mcp")

_LIST_PAGES = 100
"""A server whose tool listing has more pages than this is not paged further."""
_HTTP_READ_TIMEOUT_S = 300.0
"""The HTTP client's read bound; a call's own bound is its server's ``call_timeout_s``."""


@dataclass(frozen=True)
class McpTool:
    """One tool of an upstream server, as the program sees it: ``js_name`` is the property
    on the provider, ``name`` the server's own name for it. ``spec`` describes it for the
    declarations; ``arguments`` checks a call before it leaves for the server (``None``
    when the server's schema cannot check anything: the server then checks alone)."""

    js_name: str
    name: str
    spec: ToolSpec
    arguments: ObjectArguments | None


def _spec(provider: str, js_name: str, tool: Tool) -> ToolSpec:
    description = tool.description or ""
    if js_name != tool.name:
        # The mapping, where the model reads: the server's own name for the tool.
        description = f"(The MCP tool {tool.name!r}.) {description}".rstrip()
    try:
        return ToolSpec(provider, js_name, description, dict(tool.input_schema), tool.output_schema)
    except ValueError:  # a schema whose root is not an object: declared loosely, the server checks
        return ToolSpec(provider, js_name, description, {"type": "object"}, tool.output_schema)


def _checker(spec: ToolSpec) -> ObjectArguments | None:
    try:
        return ObjectArguments(spec.parameters)
    except Exception:  # jsonschema's SchemaError: an upstream schema we cannot check against
        log.warning("the input schema of %s cannot be checked; its server checks alone", spec)
        return None


class ConnectFailed(Exception):
    """The server could not be started or reached, or did not list its tools in time."""


def _mcp_tools(provider: str, listing: list[Tool]) -> dict[str, McpTool]:
    by_name = {tool.name: tool for tool in listing}
    tools: dict[str, McpTool] = {}
    for js, name in js_names(by_name).items():
        spec = _spec(provider, js, by_name[name])
        tools[js] = McpTool(js, name, spec, _checker(spec))
    return tools


async def _list_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@contextlib.asynccontextmanager
async def _open(config: ServerConfig) -> AsyncIterator[Client]:
    if isinstance(config, StdioServer):
        params = StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env or {}), cwd=config.cwd
        )
        async with Client(params) as client:
            yield client
        return
    assert isinstance(config, HttpServer)
    timeout = httpx2.Timeout(config.connect_timeout_s, read=_HTTP_READ_TIMEOUT_S)
    async with (
        httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout) as http,
        Client(streamable_http_client(config.url, http_client=http)) as client,
    ):
        yield client


def _cause(exc: BaseException) -> str:
    """The innermost useful words of a failure (the SDK's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Connection:
    """One upstream server: connects on first need, serves calls, connects again after a loss.
    Every method runs in the tool set's loop thread."""

    def __init__(self, config: ServerConfig, tasks: TaskGroup) -> None:
        self.config = config
        self.tools: dict[str, McpTool] = {}
        """The last listing, keyed by the name the program calls."""
        self._tasks = tasks
        self._client: Client | None = None
        self._stop: anyio.Event | None = None
        self._lock = anyio.Lock()

    async def connect(self) -> Client:
        """The open client, after starting or reaching the server if there is none."""
        async with self._lock:
            if self._client is None:
                await self._tasks.start(self._hold)
            assert self._client is not None
            return self._client

    async def _hold(self, *, task_status: TaskStatus[None]) -> None:
        config, started = self.config, False
        stop = anyio.Event()
        # One scope around the whole hold (the client's task groups must nest inside it):
        # its deadline bounds connecting and listing, and is lifted once the tools are listed.
        bound = anyio.CancelScope(deadline=anyio.current_time() + config.connect_timeout_s)
        try:
            with bound:
                async with _open(config) as client:
                    listing = await _list_tools(client)
                    self.tools, self._client, self._stop = _mcp_tools(config.name, listing), client, stop
                    bound.deadline = math.inf
                    started = True
                    task_status.started()
                    await stop.wait()
        except Exception as exc:
            if not started:
                raise ConnectFailed(
                    f"The MCP server {config.name!r} ({config.where}) could not be reached: {_cause(exc)}."
                ) from exc
            log.info("MCP server %r closed with an error: %s", config.name, _cause(exc))
        finally:
            if self._stop is stop:
                self._client = self._stop = None
        if not started:
            raise ConnectFailed(
                f"The MCP server {config.name!r} ({config.where}) did not start and list its "
                f"tools within {config.connect_timeout_s:g} s."
            )

    def _lost(self, client: Client) -> None:
        if self._client is client and self._stop is not None:
            self._stop.set()
            self._client = self._stop = None

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def call(self, js_name: str, arguments: dict[str, Any]) -> str:
        """The envelope for one call: the result, or a sentence saying what went wrong."""
        config = self.config
        tool = self.tools[js_name]
        label = f"{config.name}.{js_name}"
        try:
            client = await self.connect()
        except ConnectFailed as exc:
            return tool_error(f"{exc} The call to {label} did not run.")
        try:
            with anyio.fail_after(config.call_timeout_s):
                result = await client.call_tool(tool.name, arguments)
        except TimeoutError:
            return tool_error(
                f"{label} did not answer within its {config.call_timeout_s:g} s bound, so the call was "
                "abandoned. Ask it for less per call, or go on without this result."
            )
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                return tool_error(f"{label} was refused by its MCP server: {exc.message}")
            self._lost(client)
            return tool_error(self._lost_text(label))
        except Exception as exc:  # the transport failed under the call (HTTP, a garbled reply, ...)
            log.warning("MCP call %s failed: %s", label, _cause(exc))
            self._lost(client)
            return tool_error(self._lost_text(label))
        return result_envelope(config.name, js_name, result)

    def _lost_text(self, label: str) -> str:
        return (
            f"The MCP server {self.config.name!r} disconnected while {label} was running, so the call "
            "did not complete (any effect it had is unknown). The server is reconnected for the next call."
        )
