"""The JavaScript runtime (runtime.js) as this child configures it: the layout of each
isolate's shared channel, the runtime's settings and fixed texts, and the standard
library's sources it loads from.

The configuration is the same for every isolate of a child, so it is encoded once and
built into the runtime's snapshot (see :func:`install_runtime`).
"""

from __future__ import annotations

import json
import os
from importlib import resources

import msgspec

from .. import _texts
from .._positions import MAX_STACK_CHARS, PROGRAM_URL
from .._protocol import SNAPSHOT_TURNED_OFF
from ..stdlib import blank_comment_lines

__all__ = [
    "BOOT_HOOK",
    "BUNDLE_CACHE",
    "COPIER_REQUEST",
    "INBOUND_UNITS",
    "JOURNAL_UNITS",
    "LAYOUT",
    "MAX_TIMERS",
    "SNAPSHOT_MODULES",
    "SYNC_TIMEOUT_MS",
    "SYNC_UNITS",
    "USER_AGENT",
    "boot_values",
    "child_source",
    "config_json",
    "install_runtime",
    "load_stdlib",
    "per_isolate_source",
    "with_config",
]

MAX_TIMERS = 10_000
INBOUND_UNITS = 64 * 1024
"""UTF-16 units of each isolate's inbound buffer; larger texts go in several feeds."""
SYNC_UNITS = 128 * 1024
"""UTF-16 units of each isolate's synchronous-answer buffer (every stdlib module fits)."""
SYNC_TIMEOUT_MS = 5_000
"""How long an isolate waits for a synchronous answer before it throws."""
JOURNAL_UNITS = 256 * 1024
"""UTF-16 units of outbound journal per isolate; later messages travel in the outbox."""
USER_AGENT = "codemode/0.1"
COPIER_REQUEST = "codemode:copier"
"""What an isolate's synchronous request for the long-line copier (copier.js) names: not a
module of the standard library, so no program reaches it through a global."""
BUNDLE_CACHE = 64
"""Module bundles a child keeps (the host sends each once per child, then names it)."""


def _layout() -> dict[str, int]:
    """Byte offsets of the channels inside each isolate's one SharedArrayBuffer."""
    inbound = 16
    journal = inbound + 8 + 2 * INBOUND_UNITS
    journal += -journal % 16
    sync = journal + 16 + 2 * JOURNAL_UNITS
    sync += -sync % 16
    total = sync + 16 + 2 * SYNC_UNITS
    return {
        "inbound": inbound,
        "journal": journal,
        "sync": sync,
        "total": total,
        "inbound_units": INBOUND_UNITS,
        "journal_units": JOURNAL_UNITS,
        "sync_units": SYNC_UNITS,
    }


LAYOUT = _layout()


def _texts_for(max_message_bytes: int) -> dict[str, str]:
    return {
        "entryForm": _texts.ENTRY_FORM,
        "resultBad": (
            "The program's return value cannot cross to the host as JSON data. Return plain "
            "objects, arrays, strings, numbers, booleans or null."
        ),
        "resultCycle": (
            "The program's return value cannot cross to the host: it contains a cycle. "
            "Return a tree of plain data instead"
        ),
        "resultCeiling": _texts.message_ceiling_text("return value", max_message_bytes),
        "argsCeiling": _texts.message_ceiling_text("tool call's argument list", max_message_bytes),
        "fetchCeiling": _texts.message_ceiling_text("outbound request", max_message_bytes),
        "logTruncated": (
            f" ... [truncated: a log line may carry at most {_texts.format_bytes(max_message_bytes)}]"
        ),
        "logsDropped": "[codemode] {n} more log entries were dropped: a run keeps at most " + "{kept}.",
        "badEnvelope": (
            "the host's dispatch answered with something that is not a tool envelope "
            '({"result": ...} or {"error": "..."}).'
        ),
        "runEnded": "This run has already ended; nothing more can leave it.",
        "networkDisabled": _texts.NETWORK_DISABLED,
        "timerFlood": f"Too many pending timers: a run may keep at most {MAX_TIMERS}.",
        "handlerResponse": "The request handler must return (or resolve to) a Response.",
        "responseCeiling": _texts.message_ceiling_text("response", max_message_bytes),
    }


def config_json(
    max_message_bytes: int, max_log_entries: int, memory_limit_mb: int, stdlib_modules: dict[str, list[str]]
) -> str:
    """The runtime's configuration: the child's settings, the same for every isolate."""
    texts = _texts_for(max_message_bytes)
    texts["logsDropped"] = texts["logsDropped"].replace("{kept}", str(max_log_entries))
    texts["memory"] = _texts.memory_text(memory_limit_mb)
    return msgspec.json.encode(
        {
            "maxMessageBytes": max_message_bytes,
            "maxLogEntries": max_log_entries,
            "maxTimers": MAX_TIMERS,
            "inboundUnits": INBOUND_UNITS,
            "journalUnits": JOURNAL_UNITS,
            "syncUnits": SYNC_UNITS,
            "layout": LAYOUT,
            "syncTimeoutMs": SYNC_TIMEOUT_MS,
            "texts": texts,
            "userAgent": USER_AGENT,
            "copierRequest": COPIER_REQUEST,
            "programUrl": PROGRAM_URL,
            "maxStackChars": MAX_STACK_CHARS,
            "modules": stdlib_modules,
        }
    ).decode()


def load_stdlib() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The standard library's sources by request name (the copier's included) and its
    modules' exported names. ``CODEMODE_CHILD_STDLIB=off`` leaves the library out: a
    diagnostic switch for the benchmark that measures what the library costs."""
    from ..stdlib import MODULES, sources

    if os.environ.get("CODEMODE_CHILD_STDLIB", "on") == "off":
        stdlib_sources: dict[str, str] = {}
        stdlib_modules: dict[str, list[str]] = {}
    else:
        stdlib_sources = sources()
        stdlib_modules = {k: list(v) for k, v in MODULES.items()}
    stdlib_sources[COPIER_REQUEST] = child_source("copier.js")
    return stdlib_sources, stdlib_modules


_CONFIG_SLOT = "const configJson = CODEMODE_CONFIG;"
BOOT_HOOK = "__codemode_boot"
"""The accessor the runtime leaves on Function.prototype, read from the bell (see runtime.js)."""
_RUNTIME: tuple[str, str] | None = None
_per_isolate_source: str | None = None
"""What each isolate evaluates before its setup (see :func:`install_runtime`): empty when
isolates start from the runtime's snapshot, the whole runtime when they do not."""
SNAPSHOT_MODULES = ("console",)
"""Standard library modules loaded into the snapshot (see runtime.js, ``preload``): what
most programs use, cheap enough for every isolate to carry (a small part of each isolate's
start, against a much larger cost for the first log line of a run that loads it on first
touch). The rest load on first touch."""


def with_config(config_json: str) -> str:
    """The runtime's source with the child's configuration in its slot."""
    before, after = _runtime_parts()
    return f"{before}const configJson = {json.dumps(config_json)};{after}"


def install_runtime(config_json: str, stdlib_sources: dict[str, str], *, snapshot: bool = True) -> str | None:
    """Make the runtime, with the child's configuration (the same for all its isolates),
    part of every isolate this process creates from now on: run once into a startup
    snapshot (see miniracer_internals.install_snapshot), with the :data:`SNAPSHOT_MODULES`
    of ``stdlib_sources`` loaded, or, where that cannot be done or ``snapshot`` is False,
    evaluated in each isolate as it is prepared (modules then all load on first touch).
    Call once, before the first isolate. Returns None when isolates start from the
    snapshot, else why they do not."""
    from .miniracer_internals import engine_library, install_snapshot

    global _per_isolate_source
    source = with_config(config_json)
    dll = engine_library()
    reason: str | None = SNAPSHOT_TURNED_OFF
    if snapshot:
        preload = {m: stdlib_sources[m] for m in SNAPSHOT_MODULES if m in stdlib_sources}
        reason = install_snapshot(dll, f"{source}\n__codemode_preload({json.dumps(preload)});")
    _per_isolate_source = "" if reason is None else source + "\n"
    return reason


def per_isolate_source() -> str:
    """What each isolate evaluates before its setup (empty: it starts from the snapshot)."""
    if _per_isolate_source is None:
        raise RuntimeError("install_runtime() has not been called in this process")
    return _per_isolate_source


def boot_values(seed: str, time_origin_ms: float) -> str:
    """What one isolate gets of its own, as its runtime's setup takes it (see runtime.js,
    boot): 64 hex characters of entropy and its time origin in ms since the epoch."""
    if len(seed) != 64:
        raise ValueError("an isolate's seed is 64 hex characters")
    return f"{seed} {time_origin_ms!r}"


def child_source(name: str) -> str:
    """A JavaScript file of this package (runtime.js, copier.js), comment lines blanked."""
    return blank_comment_lines((resources.files("codemode._child") / name).read_text("utf-8"))


def _runtime_parts() -> tuple[str, str]:
    """runtime.js (comment lines blanked) split at its configuration slot, read once."""
    global _RUNTIME
    if _RUNTIME is None:
        text = child_source("runtime.js")
        before, slot, after = text.partition(_CONFIG_SLOT)
        if not slot:
            raise RuntimeError("runtime.js has lost its configuration slot")
        _RUNTIME = (before, after)
    return _RUNTIME
