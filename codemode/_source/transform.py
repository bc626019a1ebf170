"""The transforms' entry points: the program's dynamic imports rewritten, and one module
turned into what the loader needs, cached per process on (specifier, type, sha256(source)).
"""

from __future__ import annotations

import functools
import hashlib
import json

from tree_sitter import QueryCursor

from .cjs import transform_cjs
from .esm import transform_esm
from .module_map import DYNAMIC_IMPORT, ModuleSpec, ModuleType
from .syntax import IMPORT_CALLS, ModuleSyntaxError, thread_parser
from .transformed import TransformedModule

__all__ = ["rewrite_dynamic_imports", "transform_module"]


def rewrite_dynamic_imports(code: str) -> str:
    """``code`` with every real ``import(`` call turned into ``__cmi_(``; nothing else changes.

    Found with tree-sitter, so ``import(`` inside strings, comments, template text and regex
    literals stays as written. The replacement is as wide as ``import``: lines and columns of
    everything in the program are unchanged.
    """
    if "import" not in code:
        return code
    data = bytearray(code.encode("utf-8", "surrogatepass"))
    tree = thread_parser().parse(bytes(data))
    found = QueryCursor(IMPORT_CALLS).captures(tree.root_node).get("import", [])
    if not found:
        return code
    replacement = DYNAMIC_IMPORT.encode("ascii")
    for node in found:
        data[node.start_byte : node.end_byte] = replacement
    return data.decode("utf-8", "surrogatepass")


class _SourceKey:
    """The cache key for a source: its sha256. Holds the text until the transform has run."""

    __slots__ = ("digest", "text")

    def __init__(self, text: str) -> None:
        self.text: str | None = text
        self.digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SourceKey) and other.digest == self.digest


def transform_module(spec: ModuleSpec) -> TransformedModule:
    """The loader's view of one module, cached on (specifier, type, sha256(source))."""
    return _transform_cached(spec.specifier, spec.type, _SourceKey(spec.source))


@functools.lru_cache(maxsize=4096)
def _transform_cached(specifier: str, kind: ModuleType, key: _SourceKey) -> TransformedModule:
    source = key.text
    assert source is not None
    key.text = None  # the cache keeps the digest, not a second copy of every source
    if kind == "json":
        module = _transform_json(specifier, source)
    else:
        try:
            module = (transform_esm if kind == "esm" else transform_cjs)(specifier, source)
        except ModuleSyntaxError as exc:
            module = TransformedModule(specifier, kind, None, f"SyntaxError in module '{specifier}': {exc}")
    return module


def _transform_json(specifier: str, source: str) -> TransformedModule:
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    try:
        json.loads(source, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        error = f"SyntaxError in module '{specifier}': {exc.msg} at {exc.lineno}:{exc.colno}"
        return TransformedModule(specifier, "json", None, error)
    except ValueError as exc:
        return TransformedModule(specifier, "json", None, f"SyntaxError in module '{specifier}': {exc}")
    return TransformedModule(specifier, "json", source)
