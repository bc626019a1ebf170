"""A run's log entries and their budget.

The runtime keeps at most ``max_log_entries`` entries and cuts each line at the message
ceiling (by code units); the child checks each line in UTF-8 bytes, and keeps at most
:data:`LOG_BUDGET_MESSAGES` message ceilings of text per run, so that a run's ``Done``
stays well within a frame. What goes over the budget is counted, and one warning entry at
the end says how much was dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import _texts
from .._outcome import LogEntry

__all__ = ["LOG_BUDGET_MESSAGES", "RunLogs", "log_text"]

LOG_BUDGET_MESSAGES = 4
"""A run's logs carry at most this many message ceilings of text (4 MB by default)."""


def log_text(text: str, limit: int) -> str:
    """A log line within the message ceiling ``limit`` in UTF-8 bytes (the runtime cuts by
    code units, which undercounts multi-byte text)."""
    text = _texts.well_formed(text)
    if len(text) * 3 <= limit:
        return text
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    marker = f" ... [truncated: a log line may carry at most {_texts.format_bytes(limit)}]"
    return raw[: limit - len(marker.encode())].decode("utf-8", "ignore") + marker


class RunLogs:
    """One run's log entries, within the child's budget of text."""

    __slots__ = ("_bytes", "_dropped", "_line_limit", "_max_bytes", "entries", "on_entry")

    def __init__(self, max_message_bytes: int, on_entry: Callable[[LogEntry], None] | None = None) -> None:
        self.entries: list[LogEntry] = []
        self.on_entry = on_entry
        """Told of each entry as it is kept (the run streams its logs: ``Run.stream_logs``)."""
        self._line_limit = max_message_bytes
        self._max_bytes = LOG_BUDGET_MESSAGES * max_message_bytes
        self._bytes = 0
        self._dropped = 0

    def add(self, level: str, text: str) -> None:
        """A ``["l", level, text]`` line: kept, or counted as dropped once the budget is spent."""
        text = log_text(text, self._line_limit)
        size = len(text)
        if self._bytes + size > self._max_bytes:
            self._dropped += 1
            return
        self._bytes += size
        self._keep(LogEntry(_texts.well_formed(level), text))

    def _keep(self, entry: LogEntry) -> None:
        self.entries.append(entry)
        if self.on_entry is not None:
            self.on_entry(entry)

    def final(self) -> tuple[LogEntry, ...]:
        """The entries to report, with the warning of what the budget dropped, if anything."""
        if self._dropped:
            self._keep(
                LogEntry(
                    "warn",
                    (
                        f"[codemode] {self._dropped} more log entries were dropped: a run's logs "
                        f"carry at most {_texts.format_bytes(self._max_bytes)} of text."
                    ),
                )
            )
            self._dropped = 0
        return tuple(self.entries)
