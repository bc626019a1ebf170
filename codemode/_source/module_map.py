"""The ``modules`` field of a request: each entry validated into a :class:`ModuleSpec`.

A program imports what this map declares and nothing else; the map is checked before
anything runs, and a wrong entry is an :class:`~codemode.InvalidRequest` that names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from .._faults import InvalidRequest

__all__ = [
    "DYNAMIC_IMPORT",
    "SOURCE_URL_PREFIX",
    "ModuleSpec",
    "ModuleType",
    "normalize_module",
    "normalize_modules",
]

ModuleType = Literal["esm", "cjs", "json"]

DYNAMIC_IMPORT: Final = "__cmi_"
"""The global a rewritten program calls instead of ``import``: exactly as wide as ``import``."""

SOURCE_URL_PREFIX: Final = "codemode:module/"
"""Stack traces name a module's frames ``codemode:module/<specifier>:line:column``."""


@dataclass(frozen=True, slots=True)
class ModuleSpec:
    """One validated entry of ``modules``. For ``json`` the source is always JSON text."""

    specifier: str
    type: ModuleType
    source: str


_TYPES: Final = ("esm", "cjs", "json")
_EXPECTED: Final = (
    "a source string, {'type': 'esm' | 'cjs', 'source': str}, "
    "{'type': 'json', 'source': str} or {'type': 'json', 'value': <JSON data>}"
)


def _check_specifier(specifier: object) -> str:
    if not isinstance(specifier, str) or not specifier:
        raise InvalidRequest(f"modules: every specifier must be a non-empty string, not {specifier!r}.")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in specifier):
        # The specifier ends up in a `//# sourceURL=` comment: a line break would end it.
        raise InvalidRequest(
            f"modules: the specifier {specifier!r} must not contain whitespace or control characters."
        )
    return specifier


def normalize_module(specifier: object, module: object) -> ModuleSpec:
    """Validate one ``modules`` entry; raise :class:`InvalidRequest` naming it otherwise."""
    name = _check_specifier(specifier)
    where = f"modules[{name!r}]"
    if isinstance(module, ModuleSpec):
        if module.specifier != name:
            raise InvalidRequest(f"{where} is a ModuleSpec for {module.specifier!r}.")
        return module
    if isinstance(module, str):
        return ModuleSpec(name, "esm", module)
    if not isinstance(module, Mapping):
        raise InvalidRequest(f"{where} must be {_EXPECTED}; got {type(module).__name__}.")
    kind = module.get("type", "esm")
    if kind not in _TYPES:
        raise InvalidRequest(f"{where}['type'] must be 'esm', 'cjs' or 'json', not {kind!r}.")
    allowed = {"type", "source", "value"} if kind == "json" else {"type", "source"}
    unknown = sorted(str(key) for key in module if key not in allowed)
    if unknown:
        raise InvalidRequest(f"{where} has unknown keys {unknown}; expected {_EXPECTED}.")
    if kind == "json" and "value" in module:
        if "source" in module:
            raise InvalidRequest(f"{where} must give either 'source' (JSON text) or 'value', not both.")
        try:
            text = json.dumps(module["value"], ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"{where}['value'] must be JSON data: {exc}.") from None
        return ModuleSpec(name, "json", text)
    source = module.get("source")
    if not isinstance(source, str):
        what = "JSON text" if kind == "json" else "JavaScript source text"
        raise InvalidRequest(f"{where}['source'] must be a string of {what}; got {type(source).__name__}.")
    return ModuleSpec(name, cast(ModuleType, kind), source)


def normalize_modules(modules: Mapping[str, Any] | None) -> dict[str, ModuleSpec]:
    """Validate a whole ``modules`` map (``None`` means no modules), keeping its order."""
    if modules is None:
        return {}
    if not isinstance(modules, Mapping):
        raise InvalidRequest(
            f"modules must be a mapping of specifier -> module; got {type(modules).__name__}."
        )
    return {str(name): normalize_module(name, module) for name, module in modules.items()}
