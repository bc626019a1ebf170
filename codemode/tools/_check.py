"""A call's arguments, checked against the tool's declaration before the tool runs.

A tool inferred from Python is checked by msgspec: the JSON argument list is decoded
straight into an array-like Struct built from the function's parameter types, so a call
that fits comes out as the values the function expects (dataclasses as dataclasses), and
one that does not is refused with msgspec's path (a pydantic model in the types is checked
by pydantic, its refusal worded alike: ``_pydantic.py``). A tool declared only by JSON Schema is
checked with ``jsonschema``. benchmarks/tool_args.py measures both (benchmarks/README.md,
"Checking a tool's arguments").

A mismatch becomes :class:`ArgumentMismatch`, whose text says where (the argument's name
and the path inside it), what was expected and what came, for the model to fix its call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Union

import msgspec

from ._infer import Parameter
from ._pydantic import decode_model
from ._spec import JSONSchema

__all__ = ["ArgumentMismatch", "ObjectArguments", "PositionalArguments"]


class ArgumentMismatch(Exception):
    """The call's arguments do not match the declaration; the text says how."""


_MSGSPEC = re.compile(r"^(?P<detail>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)
# A pydantic model's refusal carries the path inside the model (see _pydantic.py).
_INNER = re.compile(r"^(?P<detail>.*) - at `(?P<inner>[^`]*)`$", re.DOTALL)
_LENGTH = re.compile(
    r"^Expected `array` of at (?P<bound>least|most) length (?P<n>\d+)(?:, got (?P<got>\d+))?$"
)
_JSON_NAMES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "None": "null"}
_TYPE_WORD = re.compile(r"\b(str|int|float|bool|None)\b")


def _json_words(detail: str) -> str:
    """msgspec's message with JSON type names (``integer``, not ``int``), the way the
    model reads types; backticks dropped."""

    def named(match: re.Match[str]) -> str:
        return _TYPE_WORD.sub(lambda word: _JSON_NAMES[word[1]], match[1])

    text = re.sub(r"`([^`]*)`", named, detail)
    return text[:1].lower() + text[1:]


def _plural(n: int) -> str:
    return "argument" if n == 1 else "arguments"


class PositionalArguments:
    """Decodes a call's JSON argument list into the values for a Python function's
    positional parameters; arguments left out at the end stay out (the function's own
    defaults apply)."""

    __slots__ = ("_decoder", "_names")

    def __init__(self, parameters: Sequence[Parameter]) -> None:
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        for p in parameters:
            if p.required:
                fields.append((p.name, p.annotation))
            else:
                fields.append((p.name, Union[p.annotation, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007
        struct = msgspec.defstruct(
            "Arguments", fields, array_like=True, forbid_unknown_fields=True, rename=None
        )
        self._decoder = msgspec.json.Decoder(struct, dec_hook=decode_model)
        self._names = tuple(p.name for p in parameters)

    def values(self, args_json: str) -> list[Any]:
        try:
            decoded = self._decoder.decode(args_json)
        except msgspec.ValidationError as exc:
            raise ArgumentMismatch(self._explain(str(exc))) from None
        except msgspec.DecodeError:
            raise ArgumentMismatch("the arguments were not a JSON array") from None
        values: list[Any] = []
        for name in self._names:
            value = getattr(decoded, name)
            if value is msgspec.UNSET:
                break
            values.append(value)
        return values

    def _explain(self, message: str) -> str:
        match = _MSGSPEC.match(message)
        assert match is not None
        detail, path = match["detail"], match["path"]
        inner = _INNER.match(detail) if path is not None else None
        if inner is not None:
            detail, path = inner["detail"], path + inner["inner"]
        length = _LENGTH.match(detail) if path is None else None
        if length is not None:
            n = int(length["n"])
            names = ", ".join(self._names[:n]) if length["bound"] == "least" else ", ".join(self._names)
            got = f", got {length['got']}" if length["got"] else ", got more"
            return f"expected at {length['bound']} {n} {_plural(n)} ({names}){got}"
        if path is None:
            return _json_words(detail)
        index = re.match(r"^\$\[(\d+)\]", path)
        if index is not None and int(index[1]) < len(self._names):
            path = self._names[int(index[1])] + path[index.end() :]
        return f"at {path}: {_json_words(detail)}"


def _json_path(parts: Sequence[str | int]) -> str:
    out = "arguments"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class ObjectArguments:
    """Checks a call of a tool declared by JSON Schema: the program passes one object (or
    nothing, when no property is required), checked against ``parameters``."""

    __slots__ = ("_validator",)

    def __init__(self, parameters: JSONSchema) -> None:
        import jsonschema  # only hosts with schema-declared tools pay for importing it

        cls = jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator)
        cls.check_schema(parameters)
        self._validator = cls(parameters)

    def value(self, args_json: str) -> Any:
        try:
            args = msgspec.json.decode(args_json)
        except msgspec.DecodeError:
            raise ArgumentMismatch("the arguments were not a JSON array") from None
        if not isinstance(args, list):
            args = [args]
        if len(args) > 1:
            raise ArgumentMismatch(f"expected one object argument, got {len(args)} arguments")
        value = args[0] if args else {}
        error = _best_error(self._validator, value)
        if error is not None:
            raise ArgumentMismatch(error)
        return value


def _best_error(validator: Any, value: Any) -> str | None:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    return f"at {_json_path(list(error.absolute_path))}: {error.message}"
