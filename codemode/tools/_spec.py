"""What a tool says about itself: its name, a description and JSON Schemas.

A :class:`ToolSpec` is the one form every description takes, whichever way it was made:
inferred from a Python function's type hints and docstring, or given as JSON Schema (as an
MCP server lists its tools). Declarations for the prompt are written from specs only, so
both kinds read the same to the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolSpec", "check_name"]

JSONSchema = dict[str, Any]

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_RESERVED = frozenset(
    "break case catch class const continue debugger default delete do else enum export extends "
    "false finally for function if import in instanceof let new null return super switch this "
    "throw true try typeof var void while with yield await implements interface package private "
    "protected public static".split()
)


def check_name(what: str, name: object) -> str:
    """``name`` when it can be a JavaScript global (a provider) or property (a tool)."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or name in _RESERVED:
        raise ValueError(
            f"The {what} name {name!r} is not a JavaScript identifier a program can write "
            "(letters, digits, _ and $, not starting with a digit, not a reserved word); "
            "rename it, e.g. 'listOrders'."
        )
    return name


def _object_schema(schema: object, what: str) -> JSONSchema:
    if not isinstance(schema, Mapping):
        raise ValueError(f"{what} must be a JSON Schema object (a dict), got {type(schema).__name__}.")
    found = dict(schema)
    kind = found.get("type", "object")
    if kind != "object":
        raise ValueError(
            f'{what} must describe an object ("type": "object") whose properties are the '
            f"arguments, got type {kind!r}."
        )
    found.setdefault("type", "object")
    return found


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the model is told about it.

    ``parameters`` is a JSON Schema of an object whose properties are the arguments (as
    MCP's ``inputSchema`` and every function-calling API have it); ``result``, when known,
    the schema of what the call resolves to. With ``positional`` the program passes the
    properties in their order as separate arguments (``store.listOrders('ada', 10)``, how
    Python functions are served); without it, one object (``github.search({ q: 'x' })``).
    """

    provider: str
    name: str
    description: str = ""
    parameters: JSONSchema = field(default_factory=lambda: {"type": "object", "properties": {}})
    result: JSONSchema | None = None
    positional: bool = False

    def __post_init__(self) -> None:
        check_name("provider", self.provider)
        check_name("tool", self.name)
        object.__setattr__(self, "parameters", _object_schema(self.parameters, f"The parameters of {self}"))

    def __str__(self) -> str:
        return f"{self.provider}.{self.name}"

    @classmethod
    def from_json(cls, provider: str, tool: Mapping[str, Any]) -> ToolSpec:
        """A spec from a tool as an MCP server lists it: ``name``, ``description``,
        ``inputSchema`` and optionally ``outputSchema`` (the program passes one object)."""
        return cls(
            provider=provider,
            name=tool["name"],
            description=str(tool.get("description") or ""),
            parameters=dict(tool.get("inputSchema") or {"type": "object", "properties": {}}),
            result=tool.get("outputSchema"),
        )
