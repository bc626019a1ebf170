"""Several MCP servers as one set of providers and one dispatch, beside a ToolRegistry.

::

    host loop(s)                         the set's loop thread (anyio portal)
    ------------                         -----------------------------------
    dispatch(provider, tool, args) --->  Connection(provider).call(...)  ---> MCP server
          await <--------------------    envelope  <---------------------     (stdio / HTTP)

The sessions live in one loop thread of their own, so a tool set serves any executor on any
loop: the async executor on the caller's, the sync facade's thread, a fleet client's. A run
that ends with calls in flight cancels them there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal

from .._dispatch import tool_error
from .._request import Provider
from ..tools import ToolRegistry, ToolSpec, typescript_declarations
from ..tools._check import ArgumentMismatch
from ..tools._typescript import method_signature
from ._config import ServerConfig
from ._connection import Connection, McpTool

__all__ = ["McpTools"]


class McpTools:
    """MCP servers mounted as providers, one per server, with a dispatch that calls them.

    ::

        async with McpTools([StdioServer("files", "python", ["files_server.py"])]) as tools:
            await executor.execute(code, providers=tools.providers(), dispatch=tools.dispatch)

    Entering connects to every server and lists its tools (a server that cannot be reached
    raises :class:`McpUnavailable` naming it); leaving closes the sessions and stops the
    servers' processes. ``registries`` adds the tools of :class:`~codemode.tools.ToolRegistry`
    objects under their own providers. Usable as a sync context manager too.
    """

    def __init__(self, servers: Sequence[ServerConfig], *, registries: Sequence[ToolRegistry] = ()) -> None:
        self.servers = tuple(servers)
        self.registries = tuple(registries)
        self._routes = _routes(self.servers, self.registries)
        self._connections: dict[str, Connection] = {}
        self._portal: BlockingPortal | None = None
        self._portal_cm: contextlib.AbstractContextManager[BlockingPortal] | None = None
        self._closing: anyio.Event | None = None
        self._held: Any = None

    # ---- lifetime ---------------------------------------------------------------------

    def start(self) -> McpTools:
        """Connect to every server (blocking; from async code, enter with ``async with``)."""
        if self._portal is not None:
            return self
        self._portal_cm = start_blocking_portal("asyncio")
        self._portal = self._portal_cm.__enter__()
        try:
            self._held, _ = self._portal.start_task(self._hold)
            self._portal.call(self._connect_all)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close every session and stop the servers' processes; idempotent."""
        portal, cm = self._portal, self._portal_cm
        if portal is None or cm is None:
            return
        self._portal = self._portal_cm = None
        try:
            if self._closing is not None:
                portal.call(self._closing.set)
            if self._held is not None:
                with contextlib.suppress(BaseException):
                    self._held.result()
        finally:
            cm.__exit__(None, None, None)
            self._connections = {}

    async def _hold(self, *, task_status: TaskStatus[None]) -> None:
        self._closing = anyio.Event()
        async with anyio.create_task_group() as tasks:
            self._connections = {server.name: Connection(server, tasks) for server in self.servers}
            task_status.started()
            await self._closing.wait()
            for connection in self._connections.values():
                connection.close()

    async def _connect_all(self) -> None:
        failures: list[str] = []

        async def connect(connection: Connection) -> None:
            try:
                await connection.connect()
            except Exception as exc:
                failures.append(str(exc))

        async with anyio.create_task_group() as tasks:
            for connection in self._connections.values():
                tasks.start_soon(connect, connection)
        if failures:
            raise McpUnavailable(" ".join(sorted(failures)))

    def __enter__(self) -> McpTools:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpTools:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.close)

    # ---- what the program is told -----------------------------------------------------

    def tools(self) -> dict[str, list[McpTool]]:
        """Each server's tools, as last listed, by provider name."""
        return {name: list(c.tools.values()) for name, c in self._connected().items()}

    def specs(self) -> list[ToolSpec]:
        """Every tool, as the model is told about it: the servers', then the registries'."""
        mounted = [tool.spec for tools in self.tools().values() for tool in tools]
        return mounted + [spec for registry in self.registries for spec in registry.specs()]

    def declarations(self) -> str:
        """TypeScript declarations of every tool, for a prompt (a renamed MCP tool's
        description starts with its server's name for it)."""
        return typescript_declarations(self.specs())

    def providers(self) -> list[Provider]:
        mounted = [Provider(name, tuple(c.tools)) for name, c in self._connected().items()]
        return mounted + [p for registry in self.registries for p in registry.providers()]

    def _connected(self) -> dict[str, Connection]:
        if self._portal is None:
            raise RuntimeError("McpTools is not started: enter it (with / async with) or call start() first.")
        return self._connections

    # ---- calls ------------------------------------------------------------------------

    async def dispatch(self, provider: str, tool: str, args_json: str) -> str:
        """The executor's dispatch: MCP providers' calls go to their servers, other
        providers' to the registry; anything else is refused."""
        connection = self._connections.get(provider)
        if connection is None:
            registry = self._routes.get(provider)
            if registry is None:
                # (a provider a registry gained after the set was made)
                registry = next((r for r in self.registries if provider in _names(r)), None)
            if registry is not None:
                return await registry.dispatch(provider, tool, args_json)
            return tool_error(f"{provider}.{tool} is not a tool this host serves.")
        found = connection.tools.get(tool)
        if found is None:
            served = ", ".join(f"{provider}.{name}" for name in connection.tools)
            return tool_error(
                f"{provider}.{tool} is not a tool this host serves. This host serves: {served}."
            )
        arguments = _arguments(found, args_json)
        if isinstance(arguments, str):
            return arguments
        portal = self._portal
        if portal is None:
            return tool_error(f"{provider}.{tool} cannot be called: its MCP connection is closed.")
        return await asyncio.wrap_future(portal.start_task_soon(connection.call, tool, arguments))


def _names(registry: ToolRegistry) -> set[str]:
    return {provider.name for provider in registry.providers()}


def _routes(servers: Sequence[ServerConfig], registries: Sequence[ToolRegistry]) -> dict[str, ToolRegistry]:
    """Which registry serves each provider; a name claimed twice is a ``ValueError``."""
    owners: dict[str, str] = {}
    routes: dict[str, ToolRegistry] = {}
    claims: list[tuple[str, str, ToolRegistry | None]] = [
        (server.name, f"the MCP server {server.name!r}", None) for server in servers
    ]
    for index, each in enumerate(registries):
        claims += [(name, f"registries[{index}]", each) for name in sorted(_names(each))]
    for name, owner, registry in claims:
        if name in owners:
            raise ValueError(
                f"The provider {name!r} is claimed by both {owners[name]} and {owner}; rename one."
            )
        owners[name] = owner
        if registry is not None:
            routes[name] = registry
    return routes


class McpUnavailable(Exception):
    """An MCP server could not be started or reached when the tool set started."""


def _arguments(tool: McpTool, args_json: str) -> dict[str, Any] | str:
    """The one object argument an MCP tool takes, checked against its input schema, or an
    error envelope saying what was wrong and how the tool is declared."""
    spec = tool.spec
    try:
        if tool.arguments is not None:
            value = tool.arguments.value(args_json)
        else:
            value = _one_object(args_json)
    except ArgumentMismatch as exc:
        return tool_error(
            f"{spec} was called with the wrong arguments: {exc}. It is declared as {method_signature(spec)}."
        )
    if not isinstance(value, dict):
        return tool_error(f"{spec} takes one object of named arguments, like {spec}({{ name: value }}).")
    return value


def _one_object(args_json: str) -> Any:
    try:
        args = msgspec.json.decode(args_json)
    except msgspec.DecodeError:
        raise ArgumentMismatch("the arguments were not a JSON array") from None
    if not isinstance(args, list) or len(args) > 1:
        raise ArgumentMismatch("expected one object argument")
    return args[0] if args else {}
