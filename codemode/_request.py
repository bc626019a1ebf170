"""The request: validation of every field before anything runs.

A malformed request raises INVALID_REQUEST naming the field and what was expected; an
operator ceiling is named with its value. Nothing is clamped silently.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

from ._config import UNSET, ExecutorConfig
from ._faults import InvalidRequest
from ._source.module_map import normalize_modules

__all__ = [
    "Dispatch",
    "Provider",
    "ResolvedRequest",
    "check_inputs",
    "check_modules",
    "check_outbound",
    "resolve_request",
    "resolve_timeout",
]

Dispatch: TypeAlias = Callable[[str, str, str], "str | Awaitable[str]"]
"""``(provider, tool, args_json) -> envelope`` — sync or async, runs in the host."""

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
# Names a provider may not take: they would shadow what the runtime installs.
_RESERVED = frozenset(
    {
        "globalThis",
        "self",
        "console",
        "setTimeout",
        "clearTimeout",
        "setInterval",
        "clearInterval",
        "queueMicrotask",
        "fetch",
        "undefined",
        "NaN",
        "Infinity",
        "eval",
        "Object",
        "Function",
        "Array",
        "Promise",
        "JSON",
        "Math",
        "Symbol",
        "Reflect",
        "Proxy",
        "Error",
        "String",
        "Number",
        "Boolean",
        "Date",
        "RegExp",
        "Map",
        "Set",
        "WeakMap",
        "WeakSet",
        "BigInt",
        "Atomics",
        "SharedArrayBuffer",
        "ArrayBuffer",
        "WebAssembly",
    }
)
_JS_RESERVED_WORDS = frozenset(
    (
        "break case catch class const continue debugger default delete do else enum export extends "
        "false finally for function if import in instanceof new null return super switch this "
        "throw true try typeof var void while with yield let static implements interface package "
        "private protected public await arguments"
    ).split()
)


class Provider(msgspec.Struct, frozen=True):
    """One global in the isolate; every property is an async tool function."""

    name: str
    tools: tuple[str, ...] = ()


def _utf8(field: str, text: str) -> None:
    """Text crosses to the child as UTF-8: a lone surrogate cannot, so say where it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        raise InvalidRequest(
            f"{field} contains a lone surrogate (U+{ord(char):04X}) at index {exc.start}, which "
            "cannot be encoded as UTF-8; write it as an escape in the JavaScript source "
            f"(\\u{ord(char):04x})."
        ) from None


def _provider(value: object, index: int) -> Provider:
    name: object
    tools: object
    if isinstance(value, Provider):
        name, tools = value.name, value.tools
    elif isinstance(value, Mapping):
        name = value.get("name")
        tools = value.get("tools", ())
    else:
        raise InvalidRequest(
            f"providers[{index}] must be a mapping like {{'name': 'store', 'tools': ['get']}}, "
            f"got {type(value).__name__}."
        )
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or keyword.iskeyword(name):
        raise InvalidRequest(
            f"providers[{index}].name must be a JavaScript identifier (letters, digits, _ or $, "
            f"not starting with a digit), got {name!r}."
        )
    if name in _RESERVED or name in _JS_RESERVED_WORDS:
        raise InvalidRequest(
            f"providers[{index}].name {name!r} would shadow a name the runtime installs; choose another name."
        )
    if isinstance(tools, str) or not isinstance(tools, Sequence):
        raise InvalidRequest(f"providers[{index}].tools must be a list of tool names, got {tools!r}.")
    for tool in tools:
        if not isinstance(tool, str) or not tool:
            raise InvalidRequest(f"providers[{index}].tools must hold non-empty strings, got {tool!r}.")
        _utf8(f"providers[{index}].tools", tool)
    return Provider(name, tuple(tools))


@dataclass(frozen=True)
class ResolvedRequest:
    """A request with every executor default applied and every field checked."""

    code: str
    providers: tuple[Provider, ...]
    dispatch: Dispatch | None
    outbound: Any
    modules: Mapping[str, Any] | None
    timeout_ms: int
    count_host_waits: bool
    retain_handles: bool
    inputs_json: str | None = None
    """The entry function's one argument as JSON text (None: it is called with none)."""


def check_outbound(outbound: object) -> None:
    """The one check of an outbound setting, on a request or as an executor's default."""
    if outbound is not UNSET and outbound is not None and not callable(outbound):
        raise InvalidRequest(
            "outbound must be left out (the executor's network), None (no network) or a callable "
            f"policy, got {outbound!r}."
        )


_inputs_encoder = msgspec.json.Encoder()


def check_inputs(inputs: object) -> str | None:
    """A request's ``inputs`` as the JSON text the entry function gets (None: left out).
    InvalidRequest says what in it is not JSON data."""
    if inputs is UNSET or inputs is None:
        return None
    try:
        return _inputs_encoder.encode(inputs).decode()
    except UnicodeEncodeError as exc:
        raise InvalidRequest(
            f"inputs contain a lone surrogate (U+{ord(exc.object[exc.start]):04X}), which cannot "
            "be encoded as UTF-8 JSON; pass well-formed text."
        ) from None
    except (TypeError, msgspec.EncodeError, RecursionError, OverflowError) as exc:
        raise InvalidRequest(
            f"inputs must be JSON data (a dict, list, str, int, float, bool or None, nested freely); {exc}."
        ) from None


def check_modules(modules: object) -> Mapping[str, Any] | None:
    """A ``modules`` setting (a request's, or an executor's default): None, or a mapping whose
    every entry is a module; InvalidRequest names the entry that is not."""
    if modules is None:
        return None
    if not isinstance(modules, Mapping):
        raise InvalidRequest(
            f"modules must be a mapping of specifier -> module (or None), got {type(modules).__name__}."
        )
    normalize_modules(modules)
    return modules


def resolve_timeout(config: ExecutorConfig, timeout: object, default_ms: int) -> int:
    """A request's timeout in ms (``default_ms`` when left out), held to the operator ceiling.
    The one check for every entry point that takes a timeout (runs and handle invocations)."""
    if timeout is UNSET or timeout is None:
        timeout_ms = default_ms
    else:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout < math.inf  # (NaN fails this too)
        ):
            raise InvalidRequest(f"timeout must be a positive number of milliseconds, got {timeout!r}.")
        timeout_ms = int(timeout)
        if timeout_ms < 1:
            raise InvalidRequest(f"timeout must be at least 1 ms, got {timeout!r}.")
    if timeout_ms > config.ceilings.max_timeout_ms:
        raise InvalidRequest(
            f"timeout {timeout_ms} ms is above the operator ceiling max_timeout_ms="
            f"{config.ceilings.max_timeout_ms}; ask for less time per run."
        )
    return timeout_ms


def resolve_request(
    config: ExecutorConfig,
    *,
    code: object,
    providers: object = None,
    dispatch: object = None,
    outbound: object = UNSET,
    modules: object = UNSET,
    timeout: object = UNSET,
    count_host_waits: object = UNSET,
    retain_handles: object = False,
    inputs: object = UNSET,
    default_outbound: Any = UNSET,
    default_modules: Mapping[str, Any] | None = None,
) -> ResolvedRequest:
    """Check one request against the config; raise InvalidRequest before anything runs."""
    if not isinstance(code, str):
        raise InvalidRequest(
            f"code must be a string holding an arrow or function expression, got {type(code).__name__}."
        )
    code = str(code)  # a str subclass (normalize_code's NormalizedCode) travels as plain text
    if not code.strip():
        raise InvalidRequest("code is empty; pass an arrow function such as 'async () => 6 * 7'.")
    _utf8("code", code)
    provider_list: tuple[Provider, ...] = ()
    if providers is not None:
        if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Sequence):
            raise InvalidRequest(
                f"providers must be a list of {{'name': ..., 'tools': [...]}}, got {type(providers).__name__}."
            )
        provider_list = tuple(_provider(p, i) for i, p in enumerate(providers))
        names = [p.name for p in provider_list]
        if len(set(names)) != len(names):
            raise InvalidRequest(f"providers declare the same name twice: {names}.")
    if dispatch is not None and not callable(dispatch):
        raise InvalidRequest(
            f"dispatch must be a callable (provider, tool, args_json) -> str, got {dispatch!r}."
        )
    if provider_list and dispatch is None:
        raise InvalidRequest(
            "providers were declared but no dispatch was given: pass dispatch=(provider, tool, "
            "args_json) -> envelope so tool calls have somewhere to go."
        )
    check_outbound(outbound)
    timeout_ms = resolve_timeout(config, timeout, config.timeout_ms)
    if count_host_waits is UNSET or count_host_waits is None:
        chw = config.count_host_waits
    elif isinstance(count_host_waits, bool):
        chw = count_host_waits
    else:
        raise InvalidRequest(f"count_host_waits must be a bool, got {count_host_waits!r}.")
    if not isinstance(retain_handles, bool):
        raise InvalidRequest(f"retain_handles must be a bool, got {retain_handles!r}.")
    resolved_modules: Mapping[str, Any] | None
    if modules is UNSET:
        resolved_modules = default_modules
    elif modules is None:
        resolved_modules = None
    else:
        resolved_modules = check_modules(modules)
    inputs_json = check_inputs(inputs)
    size = len(code.encode("utf-8", "surrogatepass"))
    size += sum(len(p.name) + sum(len(t) for t in p.tools) for p in provider_list)
    if inputs_json is not None:
        size += len(inputs_json.encode("utf-8"))
    if resolved_modules:
        try:
            size += len(msgspec.json.encode(dict(resolved_modules)))
        except (TypeError, msgspec.EncodeError) as exc:
            raise InvalidRequest(
                f"modules must map each specifier to JSON data (a source string or a mapping); {exc}."
            ) from None
    if size > config.ceilings.max_request_bytes:
        raise InvalidRequest(
            f"the request is {size} bytes, above the operator ceiling max_request_bytes="
            f"{config.ceilings.max_request_bytes}; send less code, fewer modules or smaller inputs."
        )
    return ResolvedRequest(
        code=code,
        providers=provider_list,
        dispatch=dispatch,
        outbound=default_outbound if outbound is UNSET else outbound,
        modules=resolved_modules,
        timeout_ms=timeout_ms,
        count_host_waits=chw,
        retain_handles=retain_handles,
        inputs_json=inputs_json,
    )
