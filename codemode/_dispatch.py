"""Tool calls on the host's side: envelopes, a registry worth copying, and the one place
where whatever a dispatch does (returns, raises, returns garbage) becomes an envelope.

A tool call leaves the isolate as three strings (provider, tool, JSON argument list) and
comes back as one: ``{"result": ...}`` or ``{"error": "..."}``. The declaration given to the
model is not a boundary: a program may call any name, and that call arrives here under
the name it used. Refusing it is the dispatch's job; :class:`ToolRegistry` does it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from ._request import Provider

__all__ = ["ToolRegistry", "call_dispatch", "tool_error", "tool_result"]

log = logging.getLogger("codemode.tools")
_encoder = msgspec.json.Encoder()


def tool_result(value: Any) -> str:
    """The envelope for a successful call: ``{"result": value}`` (value must be JSON data)."""
    return _encoder.encode({"result": value}).decode()


def tool_error(message: str) -> str:
    """The envelope that rejects the program's call with ``message`` (for the model to read)."""
    return _encoder.encode({"error": str(message)}).decode()


class _Envelope(msgspec.Struct, forbid_unknown_fields=False):
    result: Any = msgspec.UNSET
    error: str | msgspec.UnsetType = msgspec.UNSET


_envelope_decoder = msgspec.json.Decoder(_Envelope)


def _checked(provider: str, tool: str, reply: object, max_bytes: int) -> str:
    name = f"{provider}.{tool}"
    if not isinstance(reply, str):
        return tool_error(
            f"The tool {name} failed in the host: its dispatch returned {type(reply).__name__}, "
            'not an envelope string like {"result": ...}.'
        )
    if len(reply) > max_bytes or len(reply.encode("utf-8", "surrogatepass")) > max_bytes:
        return tool_error(
            f"The tool {name} answered with more than the {max_bytes}-byte ceiling on one "
            "message. Ask it for less per call (page, filter or summarize)."
        )
    try:
        envelope = _envelope_decoder.decode(reply)
    except msgspec.DecodeError:
        return tool_error(
            f"The tool {name} failed in the host: its dispatch returned text that is not a JSON "
            'envelope ({"result": ...} or {"error": "..."}).'
        )
    if envelope.error is msgspec.UNSET and envelope.result is msgspec.UNSET:
        return tool_error(
            f"The tool {name} failed in the host: its envelope has neither \"result\" nor \"error\"."
        )
    return reply


async def call_dispatch(
    dispatch: Callable[[str, str, str], Any] | None,
    provider: str,
    tool: str,
    args_json: str,
    max_bytes: int,
) -> str:
    """Run the host's dispatch for one call and always come back with a valid envelope.

    Async dispatch runs on the loop; sync dispatch runs in a thread, so calls a program
    makes with ``Promise.all`` run concurrently in the host.
    """
    if dispatch is None:
        return tool_error(f"No tools are served to this run, so {provider}.{tool} cannot be called.")
    try:
        if inspect.iscoroutinefunction(dispatch) or inspect.iscoroutinefunction(
            getattr(dispatch, "__call__", None)  # noqa: B004
        ):
            reply = await dispatch(provider, tool, args_json)
        else:
            reply = await asyncio.to_thread(dispatch, provider, tool, args_json)
            if inspect.isawaitable(reply):
                reply = await reply
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("dispatch for %s.%s raised", provider, tool, exc_info=True)
        return tool_error(
            f"The tool {provider}.{tool} failed in the host ({type(exc).__name__}). "
            "Try another approach, or report that this tool is failing."
        )
    return _checked(provider, tool, reply, max_bytes)


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
