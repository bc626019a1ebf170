"""The tool registry: Python functions served as tools, keyed on (provider, tool), every
other name refused; each tool described (``ToolSpec``) and its arguments checked before it
runs.

A registry's ``dispatch`` is a :class:`~codemode._dispatch.Router`: for each call it names
the tool's function and whether it is async, and the executor runs it the way it runs a
whole dispatch of that kind: an async tool on the loop, a sync one on the run's dispatch
threads (never on the loop, where one blocking tool would hold every run).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .._dispatch import DispatchFunction, Router, tool_error
from .._request import Provider
from ._approval import Approve, ToolCall, ask
from ._check import ArgumentMismatch, ObjectArguments, PositionalArguments
from ._infer import read_signature
from ._prompt import prompt_block
from ._pydantic import model_json_data
from ._spec import JSONSchema, ToolSpec
from ._typescript import method_signature, typescript_declarations

__all__ = ["ToolRegistry"]

ToolFunction = Callable[..., Any]


class Refusal(Exception):
    """Raise inside a tool to reject the program's call with this exact text."""


_encoder = msgspec.json.Encoder(enc_hook=model_json_data)


class _Tool:
    """One served tool: its spec, its function, and how a call's arguments become the
    function's (checked first; a mismatch never reaches the function)."""

    __slots__ = ("_arguments", "_fn", "_signature", "approval", "is_async", "spec")

    def __init__(
        self,
        spec: ToolSpec,
        fn: ToolFunction,
        arguments: PositionalArguments | ObjectArguments,
        approval: bool = False,
    ):
        self.spec = spec
        self.approval = approval
        self._fn = fn
        self._arguments = arguments
        self._signature: str | None = None
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
        )

    def _values(self, args_json: str) -> list[Any]:
        arguments = self._arguments
        if isinstance(arguments, PositionalArguments):
            return arguments.values(args_json)
        return [arguments.value(args_json)]

    def _mismatch(self, exc: ArgumentMismatch) -> str:
        if self._signature is None:
            self._signature = method_signature(self.spec)
        return tool_error(
            f"{self.spec} was called with the wrong arguments: {exc}. It is declared as {self._signature}."
        )

    def _answer(self, value: object) -> str:
        try:
            return (b'{"result":' + _encoder.encode(value) + b"}").decode()
        except (TypeError, msgspec.EncodeError) as exc:
            return tool_error(f"{self.spec} produced a value that is not JSON data ({exc}).")

    def serve(self, provider: str, tool: str, args_json: str) -> str:
        """A sync tool's call, start to envelope (on a dispatch thread)."""
        try:
            value = self._fn(*self._values(args_json))
        except ArgumentMismatch as exc:
            return self._mismatch(exc)
        except Refusal as refusal:
            return tool_error(str(refusal))
        return self._answer(value)

    async def serve_async(self, provider: str, tool: str, args_json: str) -> str:
        """An async tool's call, start to envelope (on the loop)."""
        try:
            value = await self._fn(*self._values(args_json))
        except ArgumentMismatch as exc:
            return self._mismatch(exc)
        except Refusal as refusal:
            return tool_error(str(refusal))
        return self._answer(value)

    async def serve_approved(self, approve: Approve, provider: str, tool: str, args_json: str) -> str:
        """A call of a tool that needs approval: its arguments checked, then ``approve``
        asked, then (on True) the tool run, on the loop or on a thread as it is async or not."""
        try:
            values = self._values(args_json)
        except ArgumentMismatch as exc:
            return self._mismatch(exc)
        call = ToolCall(provider, tool, msgspec.json.decode(args_json), self.spec)
        rejected = await ask(approve, call)
        if rejected is not None:
            return tool_error(rejected)
        try:
            if self.is_async:
                value = await self._fn(*values)
            else:
                value = await asyncio.to_thread(self._fn, *values)
        except Refusal as refusal:
            return tool_error(str(refusal))
        return self._answer(value)


class _RegistryDispatch(Router):
    """The registry as a dispatch: a lookup per call, the executor runs what it finds."""

    def __init__(self, tools: Mapping[tuple[str, str], _Tool], approve: Approve | None) -> None:
        self._tools = tools
        self._approve = approve

    def route(self, provider: str, tool: str) -> tuple[DispatchFunction, bool]:
        found = self._tools.get((provider, tool))
        if found is None:
            return self._unknown, True
        if found.approval and self._approve is not None:
            return functools.partial(found.serve_approved, self._approve), True
        if found.is_async:
            return found.serve_async, True
        return found.serve, False

    async def _unknown(self, provider: str, tool: str, args_json: str) -> str:
        served = ", ".join(sorted(f"{p}.{t}" for p, t in self._tools if p == provider))
        hint = f" This host serves: {served}." if served else ""
        return tool_error(f"{provider}.{tool} is not a tool this host serves.{hint}")


class ToolRegistry:
    """A dispatch keyed on (provider, tool) that refuses every other name, and describes
    what it serves.

    ::

        tools = ToolRegistry()

        @tools.tool("store", "listOrders")
        def list_orders(user: str, limit: int = 10) -> list[Order]:
            '''A user's orders, newest first.'''
            ...

        prompt = tools.prompt()  # the entry form, TypeScript declarations, the rules
        await executor.execute(code, providers=tools.providers(), dispatch=tools.dispatch)

    A function's description and parameter schema come from its docstring and type hints
    (see :func:`read_signature`); the program passes its arguments by position, and they
    are checked (and converted: a dataclass parameter gets a dataclass) before the function
    runs. A tool given ``parameters=`` (a JSON Schema of an object, as MCP servers declare
    tools) takes one object, checked against it, and its function gets that object. The
    function's return value (sync or async) becomes ``{"result": ...}``. A function that
    raises :class:`ToolRegistry.Refusal` sends its text to the program; any other exception
    sends a short message naming the tool, never a traceback.

    A tool added with ``approval=True`` runs only when ``approve`` (given to the registry)
    answers True for that call; see ``_approval.py`` and docs/agents.md, "Approvals".
    """

    Refusal = Refusal

    def __init__(self, *, approve: Approve | None = None) -> None:
        if approve is not None and not callable(approve):
            raise ValueError(f"approve must be a callable (call) -> bool, got {approve!r}.")
        self._tools: dict[tuple[str, str], _Tool] = {}
        self._approve = approve
        self.dispatch: Router = _RegistryDispatch(self._tools, approve)
        """Pass as ``dispatch=``: sync tools run on the executor's dispatch threads."""

    def tool(
        self,
        provider: str,
        name: str | None = None,
        *,
        description: str | None = None,
        parameters: JSONSchema | None = None,
        result: JSONSchema | None = None,
        approval: bool = False,
    ) -> Callable[[ToolFunction], ToolFunction]:
        """Register the decorated function as ``provider.name`` (its own name by default);
        ``approval=True``: each call waits for the registry's ``approve``."""

        def register(fn: ToolFunction) -> ToolFunction:
            self.add(
                provider,
                name,
                fn,
                description=description,
                parameters=parameters,
                result=result,
                approval=approval,
            )
            return fn

        return register

    def add(
        self,
        provider: str,
        name: str | None,
        fn: ToolFunction,
        *,
        description: str | None = None,
        parameters: JSONSchema | None = None,
        result: JSONSchema | None = None,
        approval: bool = False,
    ) -> ToolSpec:
        """Serve ``fn`` as ``provider.name`` and return how it is described. Raises
        ValueError when the tool cannot be described (names that are not identifiers, a
        type without a JSON Schema, a signature a program cannot call), or needs approval
        from a registry made without ``approve``."""
        if not callable(fn):
            raise ValueError(f"A tool must be a function, got {type(fn).__name__}.")
        name = name if name is not None else getattr(fn, "__name__", "")
        where = f"the tool {provider}.{name}"
        if not isinstance(approval, bool):
            raise ValueError(f"approval for {where} must be True or False, got {approval!r}.")
        if approval and self._approve is None:
            raise ValueError(
                f"{where} needs approval, but this registry has no approve callback: make it "
                "as ToolRegistry(approve=...), a function (call) -> bool, sync or async."
            )
        arguments: PositionalArguments | ObjectArguments
        if parameters is not None:
            spec = ToolSpec(
                provider,
                str(name),
                description if description is not None else (inspect.getdoc(fn) or "").split("\n\n")[0],
                parameters,
                result,
            )
            arguments = ObjectArguments(spec.parameters)
        else:
            signature = read_signature(fn, where)
            spec = ToolSpec(
                provider,
                str(name),
                description if description is not None else signature.description,
                signature.parameters,
                result if result is not None else signature.result,
                positional=True,
            )
            try:
                arguments = PositionalArguments(signature.positional)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"The arguments of {where} cannot be checked: {exc}.") from None
        self._tools[(spec.provider, spec.name)] = _Tool(spec, fn, arguments, approval)
        return spec

    def needs_approval(self) -> set[tuple[str, str]]:
        """The ``(provider, tool)`` of every tool whose calls wait for ``approve``."""
        return {key for key, tool in self._tools.items() if tool.approval}

    def specs(self) -> list[ToolSpec]:
        """Every tool served, as the model is told about it, in the order added."""
        return [tool.spec for tool in self._tools.values()]

    def providers(self) -> list[Provider]:
        """The ``providers=`` for a run: one global per provider, each tool a property."""
        grouped: dict[str, list[str]] = {}
        for provider, name in self._tools:
            grouped.setdefault(provider, []).append(name)
        return [Provider(p, tuple(names)) for p, names in grouped.items()]

    def declarations(self) -> str:
        """TypeScript declarations of every tool, for the prompt."""
        return typescript_declarations(self.specs())

    def prompt(self, *, network: bool = False) -> str:
        """A ready prompt block: the entry form, the declarations, the rules on errors and
        logs (``network``: whether runs may use fetch)."""
        return prompt_block(self.specs(), network=network)
