"""A Python function's description and JSON Schemas, read from its signature, type hints
and docstring.

msgspec writes the schemas (``msgspec.json.schema_components``): it knows dataclasses,
TypedDict, NamedTuple, ``Literal``, optional and union types, lists, tuples, dicts, enums
and msgspec Structs, and the same types later check a call's arguments (``_check.py``), so
what the model is told and what is enforced cannot drift apart. pydantic models, when the
host uses pydantic, are described by pydantic itself (``_pydantic.py``).
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from ._pydantic import ModelSchemas, NameClash
from ._spec import JSONSchema

__all__ = ["Parameter", "Signature", "read_signature"]

_REF_TEMPLATE = "#/$defs/{name}"
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|See Also)\s*:?\s*$"
)
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(?P<name>\w+)\s*:\s*(?P<text>.*)$")
_GOOGLE_PARAM = re.compile(r"^(?P<name>\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")
_NUMPY_PARAM = re.compile(r"^(?P<name>\w+)\s*:\s*[^\s].*$")


@dataclass(frozen=True)
class Parameter:
    name: str
    annotation: Any
    required: bool


@dataclass(frozen=True)
class Signature:
    """What a function tells about itself, ready for a ToolSpec and an argument check."""

    description: str
    parameters: JSONSchema
    result: JSONSchema | None
    positional: tuple[Parameter, ...]


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and each parameter's description, from
    Google (``Args:``), NumPy (``Parameters`` with a dashed line) or Sphinx (``:param x:``)
    style docstrings."""
    text = inspect.getdoc(fn) or ""
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    param_depth = 0  # the indentation of a parameter's first line in its section
    for raw in text.splitlines():
        line = raw.strip()
        if set(line) == {"-"}:
            continue  # a NumPy section's underline
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current, section = sphinx["name"], "params"
            params[current] = sphinx["text"].strip()
            continue
        if line.startswith(":"):
            section, current = "other", None
            continue
        header = _SECTION.match(line)
        if header:
            name = header[1].lower()
            section = "params" if name.startswith("arg") or name.startswith("param") else "other"
            current = None
            continue
        if section is None:
            summary.append(raw)
        elif section == "params" and line:
            depth = len(raw) - len(raw.lstrip())
            if current is None:
                param_depth = depth
            indented = current is not None and depth > param_depth
            google = None if indented else _GOOGLE_PARAM.match(line)
            if google:
                current = google["name"].lstrip("*")
                params[current] = google["text"].strip()
            elif not indented and _NUMPY_PARAM.match(line):
                current = line.split(":", 1)[0].strip()
                params[current] = ""
            elif current is not None:
                params[current] = (params[current] + " " + line).strip()
    paragraphs = "\n".join(summary).strip().split("\n\n")
    description = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return description, params


def _unsupported(where: str, annotation: object, exc: Exception) -> ValueError:
    return ValueError(
        f"{where} is annotated with {annotation!r}, which has no JSON Schema ({exc}). Annotate "
        "it with JSON-like types (str, int, float, bool, None, list, dict, Literal, a dataclass, "
        "a TypedDict, a msgspec Struct or a pydantic model), or pass parameters= as a JSON Schema."
    )


class _SchemaHook(ModelSchemas):
    """msgspec's ``schema_hook``: ``object`` is any JSON value (msgspec decodes it as such
    but has no schema for it); a pydantic model is its own schema, declared in $defs."""

    def __call__(self, cls: type) -> JSONSchema:
        if cls is object:
            return {"$comment": "any JSON value"}
        return super().__call__(cls)


def _components(types: list[Any]) -> tuple[tuple[JSONSchema, ...], dict[str, JSONSchema]]:
    hook = _SchemaHook(_REF_TEMPLATE)
    schemas, defs = msgspec.json.schema_components(types, schema_hook=hook, ref_template=_REF_TEMPLATE)
    for name, schema in defs.items():
        hook.add(name, schema)
    return schemas, hook.defs


def _schemas(
    types: list[Any], result_type: Any, positional: list[Parameter], where: str
) -> tuple[tuple[JSONSchema, ...], dict[str, JSONSchema]]:
    """The schemas of the parameters (and of the result, when it has one: a return type
    without a JSON Schema only leaves the result undescribed), with their shared $defs."""
    if result_type is not None:
        try:
            return _components([*types, result_type])
        except (TypeError, ValueError):
            pass
    try:
        return _components(types)
    except NameClash as clash:
        raise ValueError(
            f"The parameters of {where} name two different types {clash.name}: the declarations "
            "would not tell them apart, so rename one of them."
        ) from None
    except (TypeError, ValueError) as exc:
        for p in positional:
            try:
                _components([p.annotation])
            except (TypeError, ValueError) as inner:
                raise _unsupported(f"The parameter {p.name} of {where}", p.annotation, inner) from None
        raise _unsupported(f"A parameter of {where}", types, exc) from None


def read_signature(fn: Callable[..., Any], where: str) -> Signature:
    """The description, parameter schema and result schema of ``fn``. ``where`` names the
    tool in errors. Raises ValueError for a signature a program cannot call by position."""
    # An object with a __call__ method: its hints are that method's.
    target = fn if inspect.isroutine(fn) or inspect.isclass(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, ...
        raise ValueError(f"The type hints of {where} cannot be read: {exc}.") from None
    description, described = _docstring(fn)
    positional: list[Parameter] = []
    for given in inspect.signature(fn).parameters.values():
        if given.kind in (given.POSITIONAL_ONLY, given.POSITIONAL_OR_KEYWORD):
            annotation = hints.get(given.name, Any)
            positional.append(Parameter(given.name, annotation, given.default is given.empty))
        elif given.kind is given.VAR_POSITIONAL:
            raise ValueError(
                f"{where} takes *{given.name}: a tool's arguments are declared one by one; take "
                f"a list instead ({given.name}: list[...])."
            )
        elif given.kind is given.KEYWORD_ONLY and given.default is given.empty:
            raise ValueError(
                f"{where} has a keyword-only parameter {given.name} without a default: a program "
                "passes arguments by position, so make it positional or give it a default."
            )
    returns = hints.get("return", inspect.Signature.empty)
    result_type: Any = (
        None if returns is inspect.Signature.empty else (type(None) if returns is None else returns)
    )
    schemas, defs = _schemas([p.annotation for p in positional], result_type, positional, where)
    properties: dict[str, JSONSchema] = {}
    for p, schema in zip(positional, schemas, strict=False):
        if described.get(p.name):
            schema = {**schema, "description": described[p.name]}
        properties[p.name] = schema
    parameters: JSONSchema = {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in positional if p.required],
    }
    if defs:
        parameters["$defs"] = defs
    result: JSONSchema | None = None
    if len(schemas) > len(positional):
        result = dict(schemas[-1])
        if defs:
            result["$defs"] = defs
    return Signature(description, parameters, result, tuple(positional))
