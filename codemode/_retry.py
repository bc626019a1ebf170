"""``RetryPolicy``: which executor faults to try again, how often, and how long to wait.

A program's own failure (``Outcome.error``: it threw, timed out, ran out of memory) is an
answer, not a fault, and is never retried. A fault of the executor is retried when all of
these hold:

- its code is one the policy names (by default: every fault whose ``retryable`` is set:
  QUEUE_FULL, WORKER_CRASHED, BROKER_UNREACHABLE, JOB_EXPIRED);
- no program code had started (``started=False``), or the request is marked idempotent
  (running it twice repeats no side effect the host cares about);
- attempts remain.

The wait before attempt ``n + 1`` is exponential, capped, with jitter so that many callers
that failed together do not come back together::

    cap = min(max_delay_s, base_delay_s * 2 ** (n - 1))
    wait = cap * (1 - jitter * random())
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ._faults import Disposed, ExecutorError, InvalidRequest
from ._outcome import Outcome

__all__ = [
    "DEFAULT_RETRY_ATTEMPTS",
    "DEFAULT_RETRY_BASE_DELAY_S",
    "DEFAULT_RETRY_JITTER",
    "DEFAULT_RETRY_MAX_DELAY_S",
    "RetryPolicy",
    "note_attempts",
    "with_metadata",
]

DEFAULT_RETRY_ATTEMPTS: Final = 3
"""Tries in all, the first included."""
DEFAULT_RETRY_BASE_DELAY_S: Final = 0.1
"""The wait after the first failed attempt, before jitter."""
DEFAULT_RETRY_MAX_DELAY_S: Final = 5.0
"""No wait between attempts is longer than this."""
DEFAULT_RETRY_JITTER: Final = 0.5
"""The share of each wait that is random (0: none, 1: anywhere from zero to the cap)."""

_NEVER_RETRIED: Final = frozenset({InvalidRequest.code, Disposed.code})
"""Codes that fail the same way every time: a malformed request, a closed executor."""


def _known_codes() -> frozenset[str]:
    found: set[str] = set()
    pending: list[type[ExecutorError]] = [ExecutorError]
    while pending:
        cls = pending.pop()
        found.add(cls.code)
        pending.extend(cls.__subclasses__())
    return frozenset(found)


@dataclass(frozen=True)
class RetryPolicy:
    """How a fault of the executor is retried (see the module docstring for the rule).

    ::

        policy = RetryPolicy(attempts=5, base_delay_s=0.2)
        outcome = await policy.execute(executor, "async () => 6 * 7")
        outcome.attempts  # 1 when the first try served it

    ``codes`` narrows (or widens) the faults retried; ``None`` means every fault whose
    ``retryable`` flag is set. INVALID_REQUEST and DISPOSED cannot be named: they fail the
    same way every time.
    """

    attempts: int = DEFAULT_RETRY_ATTEMPTS
    base_delay_s: float = DEFAULT_RETRY_BASE_DELAY_S
    max_delay_s: float = DEFAULT_RETRY_MAX_DELAY_S
    jitter: float = DEFAULT_RETRY_JITTER
    codes: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise InvalidRequest(
                f"RetryPolicy.attempts must be an integer >= 1 (1: never retry), got {self.attempts!r}."
            )
        for name in ("base_delay_s", "max_delay_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InvalidRequest(f"RetryPolicy.{name} must be a number of seconds >= 0, got {value!r}.")
        jitter = self.jitter
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter <= 1:
            raise InvalidRequest(f"RetryPolicy.jitter must be a number from 0 to 1, got {jitter!r}.")
        if self.codes is not None:
            self._check_codes(self.codes)

    def _check_codes(self, codes: object) -> None:
        if isinstance(codes, str) or not isinstance(codes, (set, frozenset, list, tuple)):
            raise InvalidRequest(
                f"RetryPolicy.codes must be a set of fault codes such as {{'WORKER_CRASHED'}}, got {codes!r}."
            )
        known = _known_codes() - {ExecutorError.code}
        unknown = sorted(str(c) for c in codes if c not in known)
        if unknown:
            raise InvalidRequest(
                f"RetryPolicy.codes names unknown fault codes {unknown}; the codes are {sorted(known)}."
            )
        never = sorted(_NEVER_RETRIED & set(codes))
        if never:
            raise InvalidRequest(
                f"RetryPolicy.codes cannot name {never}: such a call fails the same way every time. "
                "Fix the request (or create a new executor) instead."
            )
        object.__setattr__(self, "codes", frozenset(codes))

    @classmethod
    def never(cls) -> RetryPolicy:
        """One attempt: every fault is reported as it came."""
        return cls(attempts=1)

    # ---- the decision ---------------------------------------------------------------

    def retries(self, fault: BaseException, attempt: int, *, idempotent: bool = False) -> bool:
        """Whether ``fault``, raised by try number ``attempt`` (from 1), is tried again."""
        if not isinstance(fault, ExecutorError) or attempt >= self.attempts:
            return False
        if fault.code in _NEVER_RETRIED:
            return False
        named = fault.retryable if self.codes is None else fault.code in self.codes
        return named and (not fault.started or idempotent)

    def delay_s(self, attempt: int) -> float:
        """The wait after try number ``attempt`` (from 1) failed."""
        cap = min(float(self.max_delay_s), float(self.base_delay_s) * 2.0 ** (attempt - 1))
        return cap * (1.0 - float(self.jitter) * random.random())

    # ---- around one execute ---------------------------------------------------------

    async def execute(
        self, executor: Any, code: Any = None, *, idempotent: bool = False, **options: Any
    ) -> Outcome:
        """``await executor.execute(code, **options)`` under this policy.

        Returns the outcome with ``attempts`` and ``duration_ms`` (every try and wait
        included) filled in; raises the last fault when it is not retried or no attempt is
        left (a note on it says how many tries were made).
        """
        started = time.monotonic()
        attempt = 1
        while True:
            try:
                outcome = await executor.execute(code, **options)
            except ExecutorError as fault:
                if not self.retries(fault, attempt, idempotent=idempotent):
                    note_attempts(fault, attempt)
                    raise
                await asyncio.sleep(self.delay_s(attempt))
                attempt += 1
                continue
            return with_metadata(outcome, attempt, started)

    def execute_sync(
        self, executor: Any, code: Any = None, *, idempotent: bool = False, **options: Any
    ) -> Outcome:
        """:meth:`execute` for a :class:`codemode.SyncIsolateExecutor` (blocking waits)."""
        return self._sync(lambda: executor.execute(code, **options), idempotent)

    def _sync(self, call: Callable[[], Outcome], idempotent: bool) -> Outcome:
        started = time.monotonic()
        attempt = 1
        while True:
            try:
                outcome = call()
            except ExecutorError as fault:
                if not self.retries(fault, attempt, idempotent=idempotent):
                    note_attempts(fault, attempt)
                    raise
                time.sleep(self.delay_s(attempt))
                attempt += 1
                continue
            return with_metadata(outcome, attempt, started)


def with_metadata(outcome: Outcome, attempts: int, started: float) -> Outcome:
    """``outcome`` with the tries it took and the host's wall time since ``started``."""
    return msgspec.structs.replace(
        outcome, attempts=attempts, duration_ms=round((time.monotonic() - started) * 1000, 3)
    )


def note_attempts(fault: ExecutorError, attempts: int) -> None:
    """``fault`` ended a call after ``attempts`` tries: counted on it (``fault.attempts``,
    and its wire form), and said in its traceback once there was more than one."""
    fault.attempts = attempts
    if attempts > 1:
        fault.add_note(f"Given up after {attempts} attempts.")
