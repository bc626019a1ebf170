"""The outcome envelope: one shape for a run that worked and a run that failed."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["LogEntry", "Outcome", "ProgramError"]


class LogEntry(msgspec.Struct, frozen=True):
    """One ``console.*`` line: ``level`` is log, info, warn, error or debug."""

    level: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"level": self.level, "text": self.text}


class ProgramError(msgspec.Struct, frozen=True):
    """Where and how a program failed, beside :attr:`Outcome.error` (which stays the
    sentence for the model).

    ``name`` is the thrown error's name (``TypeError``, ``SyntaxError``; ``""`` for a value
    that is not an error), ``message`` its message. ``line`` and ``column`` (1-based) are
    where it was thrown, in ``code`` as the caller passed it to ``execute`` (the executor's
    own wrapping taken off; ``None`` when no frame of the program is on the stack, e.g. a
    rejected tool call that was never caught, or a value thrown from outside it). ``stack``
    holds the program's own frames, innermost first, each ``at <function> (<where>:<line>:
    <column>)`` where ``<where>`` is ``program`` or the specifier of one of the run's
    modules; frames of the runtime and the standard library are left out.
    """

    name: str
    message: str
    line: int | None = None
    column: int | None = None
    stack: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "stack": list(self.stack),
        }


class Outcome(msgspec.Struct, frozen=True):
    """What a run produced.

    ``result`` is the program's return value as JSON-compatible data (``None`` for
    ``undefined``); ``error`` is a sentence for the model when the program threw, timed
    out, ran out of memory or hit a ceiling (``None`` when it worked); ``logs`` keeps every
    console line written before the end, including before a throw or a timeout.
    ``handle`` names a retained isolate when the request asked for one.
    ``error_detail`` says more about an error the program threw (:class:`ProgramError`:
    its name, line, column and stack); ``None`` when it worked, or when the run ended at a
    bound (time, memory, a ceiling) rather than by a throw.

    Metadata: ``duration_ms`` is the host's wall time from the call to this outcome
    (``execute`` measures its own call; ``map`` and :class:`codemode.RetryPolicy` measure
    from the first try, the waits between tries included; ``None``: not measured);
    ``tool_calls`` is how many tool calls the run made, counted by the host's side as
    each arrives; ``ran_on`` names the child process that ran it (in process ``"child 2
    (pid 4242)"``; on a fleet the worker comes first, ``"<host>:<pid>/child 2 (pid
    4242)"``; ``None`` when no child ran anything); ``attempts`` is how many tries it
    took (1: the first served it; ``map`` and ``RetryPolicy`` fill it in).

    The wire formats carry this struct: a field added here gets a default and is never
    retyped, so an older peer still reads it.
    """

    result: Any = None
    error: str | None = None
    logs: list[LogEntry] = msgspec.field(default_factory=list)
    handle: str | None = None
    attempts: int = 1
    duration_ms: float | None = None
    error_detail: ProgramError | None = None
    tool_calls: int = 0
    ran_on: str | None = None

    @property
    def ok(self) -> bool:
        """True when the program finished without an error (``error is None``)."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data: ``result``, ``error``, ``logs`` (each ``{level,
        text}``), ``tool_calls``, and ``handle``, ``attempts``, ``duration_ms``, ``ran_on``
        and ``error_detail`` when they say something (a handle was retained, more than one
        try, a measured duration, a child ran it, a program error's position)."""
        out: dict[str, Any] = {
            "result": self.result,
            "error": self.error,
            "logs": [entry.to_dict() for entry in self.logs],
            "tool_calls": self.tool_calls,
        }
        if self.handle is not None:
            out["handle"] = self.handle
        if self.attempts != 1:
            out["attempts"] = self.attempts
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.ran_on is not None:
            out["ran_on"] = self.ran_on
        if self.error_detail is not None:
            out["error_detail"] = self.error_detail.to_dict()
        return out
