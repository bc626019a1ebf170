"""What a module transform produces (:class:`TransformedModule`), and the hidden names the
generated code and the loader (``loader.js``) agree on.

Every hidden name starts with ``__cmi``; the ones written into a module's own text are as
wide as what they replace, so lines and columns stay put.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Final

from .module_map import SOURCE_URL_PREFIX, ModuleType

PREFIX: Final = "__cmi_();"  # registers the module's exports, then evaluates its dependencies
DEFAULT_SLOT: Final = "__cmi_d="  # `export default <expr>` assigns the wrapper's `__cmi_d`
ANON_DEFAULT: Final = "__cmi_f"  # the name given to `export default function () {}`
DEFAULT_LOCAL: Final = "*default*"  # the loader's name for the value stored through __cmi_d
META: Final = "__cmiM"  # `import.meta` (blank-padded to the same width)
LOADER_URL: Final = "codemode:module-loader"  # the wrappers: compile errors are thrown there
BUNDLE_URL: Final = "codemode:module-bundle"  # the bundle itself
MAX_LISTED: Final = 20  # the specifiers an unknown import's error lists at most


@dataclass(frozen=True)
class TransformedModule:
    """What the loader needs of one module; ``error`` set means importing it throws that text.

    ``code`` is the JavaScript the loader evaluates (ESM and CJS: the rewritten source plus a
    tail after its last line; JSON: the JSON text); ``wrapper`` is the function it runs in
    (None: ``code`` is itself a function expression); ``hint`` is where tree-sitter saw a
    problem inside a function, for V8's error if the module does not compile.
    ``imports`` rows are ``(local, specifier, imported name or '*', position)``, ``exports``
    rows ``(exported name, local)``, ``indirect`` rows ``(exported name, specifier, imported
    name or '*', position)``.
    """

    specifier: str
    type: ModuleType
    code: str | None
    error: str | None = None
    wrapper: str | None = None
    hint: str | None = None
    deps: tuple[str, ...] = ()
    imports: tuple[tuple[str, str, str, str], ...] = ()
    exports: tuple[tuple[str, str], ...] = ()
    indirect: tuple[tuple[str, str, str, str], ...] = ()
    stars: tuple[str, ...] = ()
    anon_default: bool = False

    @functools.cached_property
    def record(self) -> str:
        """The module as a JavaScript array literal, the loader's input (computed once)."""
        return json.dumps(
            [
                self.specifier,
                self.type,
                {
                    "code": self.code,
                    "error": self.error,
                    "wrapper": self.wrapper,
                    "hint": self.hint,
                    "deps": self.deps,
                    "imports": self.imports,
                    "exports": self.exports,
                    "indirect": self.indirect,
                    "stars": self.stars,
                    "anon": self.anon_default,
                },
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )


def source_url(specifier: str) -> str:
    """The comment that names a module's frames in stack traces (after its last line)."""
    return f"\n//# sourceURL={SOURCE_URL_PREFIX}{specifier}"


def wrapper_factory(function: str) -> str:
    """A factory that binds the real ``eval`` (so calls stay direct) around ``function``."""
    return (
        f"(function (__cmiEval) {{ var eval = __cmiEval; return {function}; }})\n//# sourceURL={LOADER_URL}"
    )
