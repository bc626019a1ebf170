"""The declared sentences a program's model reads. Tests assert them exactly.

One place for each text, so the executor, the fleet and the docs agree word for word.
"""

from __future__ import annotations

__all__ = [
    "ENTRY_FORM",
    "NETWORK_DISABLED",
    "format_bytes",
    "host_gone_text",
    "logs_dropped_text",
    "memory_text",
    "message_ceiling_text",
    "timeout_text",
    "well_formed",
]

NETWORK_DISABLED = (
    "Outbound fetch is disabled for this execution. "
    "Anything this run needs from outside has to arrive through a tool call."
)


ENTRY_FORM = (
    "The code must be one arrow or function expression, such as `async () => { ... }`; "
    "pass model output through normalize_code() first."
)


def well_formed(text: str) -> str:
    """``text`` with any lone surrogate replaced by U+FFFD: JavaScript strings may hold them,
    UTF-8 (and so every frame and every host that prints) may not."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def timeout_text(bound_ms: int) -> str:
    return (
        f"Execution timed out at its {bound_ms} ms bound. "
        "Do less work per run and return the part that is already finished."
    )


def memory_text(limit_mb: int) -> str:
    return (
        f"Execution ran out of memory at its {limit_mb} MB bound. "
        "Work on smaller pieces of data per run and return a summary instead of everything."
    )


def format_bytes(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MB"
    if n % 1024 == 0:
        return f"{n // 1024} KB"
    return f"{n} bytes"


def message_ceiling_text(what: str, ceiling_bytes: int) -> str:
    return (
        f"The {what} exceeded the {format_bytes(ceiling_bytes)} ceiling on a single message "
        "a run sends out. Send less at once: page through the data, or return a summary."
    )


def logs_dropped_text(dropped: int, kept: int) -> str:
    return f"[codemode] {dropped} more log entries were dropped: a run keeps at most {kept}."


def host_gone_text() -> str:
    return (
        "The host that started this run stopped answering, so this tool call cannot complete. "
        "Stop here and return what is already finished."
    )
