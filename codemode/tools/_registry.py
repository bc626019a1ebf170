"""The tool registry: a dispatch keyed on (provider, tool) that refuses every other name."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import msgspec

from .._dispatch import tool_error, tool_result
from .._request import Provider

__all__ = ["ToolRegistry"]

ToolFunction = Callable[..., Any]


class ToolRegistry:
    """A dispatch keyed on (provider, tool) that refuses every other name.

    ::

        tools = ToolRegistry()

        @tools.tool("store", "listOrders")
        def list_orders(user: str) -> list[dict]:
            return [o for o in ORDERS if o["user"] == user]

        await executor.execute(code, providers=tools.providers(), dispatch=tools.dispatch)

    Arguments arrive as the JSON array the program passed and are spread into the function;
    its return value (sync or async) becomes ``{"result": ...}``. A function that raises
    :class:`ToolRegistry.Refusal` sends its text to the program; any other exception sends
    a short message naming the tool, never a traceback.
    """

    class Refusal(Exception):
        """Raise inside a tool to reject the program's call with this exact text."""

    def __init__(self) -> None:
        self._tools: dict[tuple[str, str], ToolFunction] = {}

    def tool(self, provider: str, name: str) -> Callable[[ToolFunction], ToolFunction]:
        def register(fn: ToolFunction) -> ToolFunction:
            self.add(provider, name, fn)
            return fn

        return register

    def add(self, provider: str, name: str, fn: ToolFunction) -> None:
        self._tools[(provider, name)] = fn

    def providers(self) -> list[Provider]:
        grouped: dict[str, list[str]] = {}
        for provider, name in self._tools:
            grouped.setdefault(provider, []).append(name)
        return [Provider(p, tuple(names)) for p, names in grouped.items()]

    async def dispatch(self, provider: str, tool: str, args_json: str) -> str:
        fn = self._tools.get((provider, tool))
        if fn is None:
            served = ", ".join(sorted(f"{p}.{t}" for p, t in self._tools if p == provider))
            hint = f" This host serves: {served}." if served else ""
            return tool_error(f"{provider}.{tool} is not a tool this host serves.{hint}")
        try:
            args = msgspec.json.decode(args_json)
        except msgspec.DecodeError:
            return tool_error(f"The arguments to {provider}.{tool} were not a JSON array.")
        if not isinstance(args, list):
            args = [args]
        try:
            value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
        except ToolRegistry.Refusal as refusal:
            return tool_error(str(refusal))
        except TypeError as exc:
            if "positional argument" in str(exc) or "required" in str(exc):
                return tool_error(f"{provider}.{tool} was called with the wrong arguments: {exc}")
            raise
        try:
            return tool_result(value)
        except (TypeError, msgspec.EncodeError):
            return tool_error(f"{provider}.{tool} produced a value that is not JSON data.")
