"""The guest standard library: ECMA-429 (Minimum Common Web API) written in plain JavaScript.

A bare V8 isolate has only the ECMAScript built-ins. Everything a web-interoperable program
expects beyond them (``console``, ``URL``, ``fetch``, ``TextEncoder``, ``crypto``...) is written
here, one module per concept, as files under ``codemode/stdlib/js/<id>.js``.

Module contract (the executor's loader relies on it)::

    <id>.js  ==  one JS function expression  (host) => { ...; return { GlobalName: value } }

    loader, on first touch of any global listed in MODULES[id]:
        factory = (0, eval)(sources()[id])          # indirect eval, global scope
        exports = factory(host)                     # called once per isolate
        for name in MODULES[id]:                    # writable, configurable, non-enumerable
            define globalThis[name] = exports[name]

``host`` carries ``require(id)`` (another module's exports, loaded once), ``log(level, text)``,
``seed`` (64 hex chars of OS entropy), ``timeOrigin`` (ms since epoch), ``userAgent`` and
``fetch(plainRequest) -> Promise<plainResponse>``.

Modules whose global tuple is empty (``idna``) are internal: they are only reached through
``host.require`` and define no global. Module-to-module internals travel on the exports object
under the symbol key ``Symbol.for('codemode.stdlib.internal')``; a loader copies only the names
listed in :data:`MODULES`, so those never reach ``globalThis``.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["MODULES", "blank_comment_lines", "global_names", "module_for", "sources"]

MODULES: dict[str, tuple[str, ...]] = {
    "console": ("console",),
    "domexception": ("DOMException",),
    "events": ("Event", "EventTarget", "CustomEvent"),
    "abort": ("AbortController", "AbortSignal"),
    "encoding": ("TextEncoder", "TextDecoder", "TextEncoderStream", "TextDecoderStream"),
    "base64": ("atob", "btoa"),
    "idna": (),
    "url": ("URL", "URLSearchParams"),
    "structuredclone": ("structuredClone",),
    "blob": ("Blob", "File"),
    "formdata": ("FormData",),
    "streams": (
        "ReadableStream",
        "ReadableStreamDefaultReader",
        "ReadableStreamDefaultController",
        "WritableStream",
        "WritableStreamDefaultWriter",
        "WritableStreamDefaultController",
        "TransformStream",
        "TransformStreamDefaultController",
        "ByteLengthQueuingStrategy",
        "CountQueuingStrategy",
    ),
    "fetch": ("Headers", "Request", "Response", "fetch"),
    "crypto": ("crypto", "Crypto", "SubtleCrypto", "CryptoKey"),
    "performance": ("performance", "Performance"),
    "navigator": ("navigator", "Navigator"),
    "globals": ("self", "reportError"),
}
"""Module id -> the global names it provides (an empty tuple marks an internal module)."""


_COMMENT_LINE = re.compile(r"^[ \t]*//[^\n]*$", re.MULTILINE)


def blank_comment_lines(source: str) -> str:
    """``source`` with every line that holds only a ``//`` comment emptied.

    Every isolate parses what it is given from scratch (V8 keeps no code across isolates),
    and the comments are a quarter of these files: blanking them saves that much scanning
    on every run, while line numbers in stack traces stay those of the files. Our sources
    have no multi-line template literal a blanked line could belong to (a test checks it).
    """
    return _COMMENT_LINE.sub("", source)


@functools.cache
def sources() -> dict[str, str]:
    """Return module id -> JavaScript source, read once from the package files, with its
    comment lines blanked (see :func:`blank_comment_lines`)."""
    root = resources.files(__package__).joinpath("js")
    return {
        module_id: blank_comment_lines(root.joinpath(f"{module_id}.js").read_text(encoding="utf-8"))
        for module_id in MODULES
    }


def global_names() -> tuple[str, ...]:
    """Every global name the standard library installs, in module order."""
    return tuple(name for names in MODULES.values() for name in names)


def module_for(name: str) -> str:
    """The id of the module providing global ``name`` (``KeyError`` if none does)."""
    for module_id, names in MODULES.items():
        if name in names:
            return module_id
    raise KeyError(name)
