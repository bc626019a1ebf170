"""Names on both sides of the boundary: the provider a server is mounted under must be a
global the runtime accepts, and a tool's MCP name (``get-forecast``, ``files.read``) becomes
a JavaScript identifier the program can write as ``weather.get_forecast(...)``.

The mapping is shown in the declarations; a call arrives under the identifier and goes to
the server under its own name.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable

from .._request import _JS_RESERVED_WORDS, _RESERVED

__all__ = ["check_provider_name", "js_names"]

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_NOT_IDENTIFIER_CHAR = re.compile(r"[^A-Za-z0-9_$]")


def check_provider_name(name: object) -> None:
    """Raise ``ValueError`` unless ``name`` can be a provider global (the executor's own rule)."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or keyword.iskeyword(name):
        raise ValueError(
            "An MCP server's name is the global its tools are reached through, so it must be a "
            f"JavaScript identifier (letters, digits, _ or $, not starting with a digit), got {name!r}."
        )
    if name in _RESERVED or name in _JS_RESERVED_WORDS:
        raise ValueError(
            f"The MCP server name {name!r} would shadow a name the runtime installs; choose another."
        )


def _identifier(name: str) -> str:
    if _IDENTIFIER.match(name):
        return name
    text = _NOT_IDENTIFIER_CHAR.sub("_", name)
    return f"_{text}" if text[:1].isdigit() or not text else text


def js_names(tool_names: Iterable[str]) -> dict[str, str]:
    """``{identifier: tool name}`` for a server's tools, in their order. A name that is an
    identifier keeps it; any other gets its other characters as ``_`` (a leading digit gets a
    ``_`` before it), and a clash gets ``_2``, ``_3``, ... after it."""
    names = list(tool_names)
    taken = {name for name in names if _IDENTIFIER.match(name)}
    mapping: dict[str, str] = {}
    for name in names:
        js = _identifier(name)
        if js != name:
            base, n = js, 2
            while js in taken:
                js, n = f"{base}_{n}", n + 1
            taken.add(js)
        mapping[js] = name
    return mapping
