"""The outcome envelope: one shape for a run that worked and a run that failed."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["LogEntry", "Outcome"]


class LogEntry(msgspec.Struct, frozen=True):
    """One ``console.*`` line: ``level`` is log, info, warn, error or debug."""

    level: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"level": self.level, "text": self.text}


class Outcome(msgspec.Struct, frozen=True):
    """What a run produced.

    ``result`` is the program's return value as JSON-compatible data (``None`` for
    ``undefined``); ``error`` is a sentence for the model when the program threw, timed
    out, ran out of memory or hit a ceiling (``None`` when it worked); ``logs`` keeps every
    console line written before the end, including before a throw or a timeout.
    ``handle`` names a retained isolate when the request asked for one.
    """

    result: Any = None
    error: str | None = None
    logs: list[LogEntry] = msgspec.field(default_factory=list)
    handle: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "result": self.result,
            "error": self.error,
            "logs": [entry.to_dict() for entry in self.logs],
        }
        if self.handle is not None:
            out["handle"] = self.handle
        return out
