"""The declared sentences a program's model reads. Tests assert them exactly.

One place for each text, so the executor, the fleet and the docs agree word for word.
"""

from __future__ import annotations

__all__ = [
    "NETWORK_DISABLED",
    "format_bytes",
    "host_gone_text",
    "logs_dropped_text",
    "memory_text",
    "message_ceiling_text",
    "timeout_text",
]

NETWORK_DISABLED = (
    "Outbound fetch is disabled for this execution. "
    "Anything this run needs from outside has to arrive through a tool call."
)


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
