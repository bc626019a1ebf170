"""pydantic models as tool parameters and results, when the host uses pydantic.

codemode never imports pydantic: a class can only be a pydantic model once the host has
imported pydantic, so a model is recognised through ``sys.modules`` and a host without
pydantic pays nothing. msgspec hands each model to the hooks here (a "custom type" to
msgspec): its schema comes from ``Model.model_json_schema()``, a call's value is checked
and converted by ``Model.model_validate_json`` (JSON mode: the value came as JSON), and
a refusal is told in msgspec's own shape (``<detail> - at `<path>```), so ``_check.py``
words it like any other mismatch: where, what was expected, what came.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

__all__ = ["ModelSchemas", "NameClash", "decode_model", "is_model", "model_json_data"]

_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)
_SHOWN = 40  # the longest value quoted back in a refusal, in characters


class NameClash(ValueError):
    """Two different types by one name: the declarations could not tell them apart."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def is_model(cls: object) -> bool:
    """Whether ``cls`` is a pydantic model class (False, without importing pydantic, when
    the host never imported it)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(cls, type) and issubclass(cls, pydantic.BaseModel)


class ModelSchemas:
    """msgspec's ``schema_hook`` for pydantic models: each model reads as a ``$ref`` to a
    declaration of its own name, and the models' schemas (their nested models included)
    are collected in ``defs``, to merge with msgspec's own."""

    def __init__(self, ref_template: str) -> None:
        self._ref_template = ref_template
        self.defs: dict[str, Any] = {}

    def __call__(self, cls: type) -> dict[str, Any]:
        if not is_model(cls):
            raise NotImplementedError
        name = cls.__name__
        template = self._ref_template.replace("{name}", "{model}")  # pydantic's placeholder
        schema = dict(cls.model_json_schema(ref_template=template))  # type: ignore[attr-defined]
        nested = schema.pop("$defs", {})
        for key, body in {**nested, name: schema}.items():
            self.add(key, body)
        return {"$ref": self._ref_template.format(name=name)}

    def add(self, name: str, schema: Any) -> None:
        """Declare ``name``; two different schemas by one name are a mistake to rename."""
        known = self.defs.setdefault(name, schema)
        if known != schema:
            raise NameClash(name)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    for cls, name in _JSON_TYPES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


def _came(kind: str, value: object) -> str:
    """What came: its JSON type for a type error, else the value itself when it is short."""
    if kind.endswith(("_type", "_parsing")) or isinstance(value, list | dict):
        return _json_type(value)
    shown = (
        msgspec.json.encode(value).decode()
        if value is None or isinstance(value, bool | int | float | str)
        else ""
    )
    return shown if shown and len(shown) <= _SHOWN else _json_type(value)


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _refusal(error: Any) -> str:
    """pydantic's first error in msgspec's shape: ``<detail> - at `<path>```."""
    kind, loc, message = error["type"], tuple(error["loc"]), str(error["msg"])
    if kind == "missing" and loc:
        detail, loc = f"object missing required field {loc[-1]}", loc[:-1]
    elif kind == "extra_forbidden" and loc:
        detail, loc = f"object contains unknown field {loc[-1]}", loc[:-1]
    else:
        if message.startswith("Input should be "):
            expected = "expected " + message.removeprefix("Input should be ")
            if kind.endswith("_parsing"):
                expected = expected.split(", ", 1)[0]  # "..., unable to parse string as an integer"
        else:
            expected = message[:1].lower() + message[1:]
        detail = f"{expected}, got {_came(kind, error.get('input'))}"
    return f"{detail} - at `{_path(loc)}`" if loc else detail


def decode_model(cls: type, value: Any) -> Any:
    """msgspec's ``dec_hook``: ``value`` (decoded JSON) as an instance of the model ``cls``;
    a ValueError in msgspec's shape when it does not fit (msgspec adds the outer path)."""
    if not is_model(cls):
        raise TypeError(f"{cls!r} is not a type a tool's arguments can hold")
    pydantic = sys.modules["pydantic"]
    try:
        return cls.model_validate_json(msgspec.json.encode(value))  # type: ignore[attr-defined]
    except pydantic.ValidationError as exc:
        raise ValueError(_refusal(exc.errors(include_url=False)[0])) from None


def model_json_data(value: object) -> Any:
    """A pydantic model a tool returned, as JSON data (``model_dump(mode="json")``)."""
    if not is_model(type(value)):
        raise TypeError(f"{type(value).__name__} is not JSON data")
    return value.model_dump(mode="json")  # type: ignore[attr-defined]
