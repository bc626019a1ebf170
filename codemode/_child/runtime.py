"""The JavaScript runtime (runtime.js) as this child configures it: the layout of each
isolate's shared channel, the runtime's settings and fixed texts, and the standard
library's sources it loads from.

The configuration is the same for every isolate of a child, so it is encoded once and
built into the runtime's snapshot (see engine.install_runtime).
"""

from __future__ import annotations

import os

import msgspec

from .. import _texts

__all__ = [
    "BUNDLE_CACHE",
    "COPIER_REQUEST",
    "INBOUND_UNITS",
    "JOURNAL_UNITS",
    "LAYOUT",
    "MAX_TIMERS",
    "SYNC_TIMEOUT_MS",
    "SYNC_UNITS",
    "USER_AGENT",
    "config_json",
    "load_stdlib",
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
            "modules": stdlib_modules,
        }
    ).decode()


def load_stdlib() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The standard library's sources by request name (the copier's included) and its
    modules' exported names. ``CODEMODE_CHILD_STDLIB=off`` leaves the library out: a
    diagnostic switch for the benchmark that measures what the library costs."""
    from ..stdlib import MODULES, sources
    from .engine import child_source

    if os.environ.get("CODEMODE_CHILD_STDLIB", "on") == "off":
        stdlib_sources: dict[str, str] = {}
        stdlib_modules: dict[str, list[str]] = {}
    else:
        stdlib_sources = sources()
        stdlib_modules = {k: list(v) for k, v in MODULES.items()}
    stdlib_sources[COPIER_REQUEST] = child_source("copier.js")
    return stdlib_sources, stdlib_modules
