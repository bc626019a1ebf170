"""Module loading for programs: the ``modules`` map, turned into one JavaScript bundle.

mini-racer's dynamic ``import()`` rejects with "Not supported", so loading is ours, in plain
JavaScript inside the run's isolate. Everything here is pure Python: the executor calls

* :func:`~codemode._source.module_map.normalize_modules` to validate the request's
  ``modules`` field,
* :func:`~codemode._source.transform.rewrite_dynamic_imports` on the program, which turns
  each real ``import(`` call into ``__cmi_(`` (same width, so every line and column stays
  put), and
* :func:`build_module_bundle`, one function expression ``(host) => loader`` it evaluates in
  the isolate before the program runs; ``loader.import`` is what ``__cmi_`` must call.

How a module runs (the reasons are positions and speed):

* Each module's source is evaluated by a *direct* ``eval`` inside a small wrapper function
  generated for it. Direct eval numbers lines and columns from the module's own first
  character and honours ``//# sourceURL=codemode:module/<specifier>``, so stack traces point
  into the original source, and a strict wrapper keeps every lookup as fast as in a plain
  function (no ``with``, no sloppy ``var`` leaking into the wrapper).
* ESM (``esm.py``): import and export statements are overwritten in place with spaces (line
  breaks kept), or with same-width code; imports are ``let`` bindings of the wrapper that
  the loader writes whenever they can change, so cycles and live bindings behave as in JS.
* CJS (``cjs.py``): sloppy, ``this`` = ``module.exports``, ``module, exports, require`` as
  parameters. A JSON module is ``JSON.parse``.
* tree-sitter (``syntax.py``) finds what to rewrite. A problem it sees at the top level
  fails the module with its position; one inside a function is only a hint, since V8
  decides what compiles.
* The loader (``loader.js``) links every specifier and imported name before anything runs,
  evaluates each module once per run and builds live namespace objects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any, Final

from .module_map import SOURCE_URL_PREFIX, normalize_modules
from .transform import transform_module
from .transformed import ANON_DEFAULT, BUNDLE_URL, DEFAULT_LOCAL, DEFAULT_SLOT, LOADER_URL, MAX_LISTED

__all__ = ["build_module_bundle"]


def build_module_bundle(modules: Mapping[str, Any] | None) -> str:
    """One JavaScript function expression ``(host) => loader`` for the run's module map.

    In the isolate, before the program runs (while ``globalThis.eval`` is still the
    built-in)::

        const loader = (0, eval)(bundle)();          // indirect eval of the bundle alone
        Object.defineProperty(globalThis, '__cmi_', { value: loader.import });

    and run ``rewrite_dynamic_imports(code)`` instead of ``code``. ``loader.import(specifier)``
    returns a Promise of the module namespace; ``loader.specifiers`` lists the map. ``host``
    may be omitted; ``host.eval`` replaces the ``eval`` the loader would capture from the
    global (it must be the built-in ``eval`` itself, so module evaluation stays direct).
    The bundle ends in a ``//# sourceURL`` comment and a line break: evaluate it on its own.
    """
    specs = normalize_modules(modules)
    records = ",".join(transform_module(spec).record for spec in specs.values())
    return f"(host) => ({_LOADER})(host, {_CONFIG}, [{records}])\n//# sourceURL={BUNDLE_URL}\n"


_CONFIG: Final = json.dumps(
    {
        "loaderUrl": LOADER_URL,
        "sourceUrlPrefix": SOURCE_URL_PREFIX,
        "defaultSlot": DEFAULT_SLOT[:-1],
        "defaultLocal": DEFAULT_LOCAL,
        "anonDefault": ANON_DEFAULT,
        "maxListed": MAX_LISTED,
    }
)

_LOADER: Final = (
    resources.files(__package__).joinpath("loader.js").read_text(encoding="utf-8").removesuffix("\n")
)
"""The loader, one JavaScript function ``(host, config, records) => loader`` (``loader.js``).

Everything it uses is captured when the bundle is called, before the program can touch a
built-in; plain index loops (no iterators) and null-prototype descriptors keep a program
that monkeypatches prototypes from reaching into it."""
