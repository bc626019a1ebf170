"""The consumer thread's hand-off waits for the job's start: :class:`StartGate`.

Celery's consumer thread hands each job to a pool thread, whose task body hands it on to the
runtime's loop (``runtime.py``); the consumer then goes back to its own work: re-arming
BRPOP, acking the job before, sending task events. The worker's threads take turns at one
interpreter, so whatever the consumer does right after the hand-off, the pool thread and the
loop wait for: it lands on the job's start, which is what the job's host is waiting for.
After the hand-off the consumer thread therefore waits until the job has started (claimed,
and its run begun), then does its own work while the isolate runs the program, when the
worker's threads are idle anyway. ``benchmarks/README.md`` has the A/B.

The wait is bounded (:data:`START_WAIT_S`), and it is only taken for a job Celery hands
straight to its pool (the default strategy's ``callbacks``, called right before; a job held
for its rate limit or its eta is not waited for) while the runtime has a free slot (a job
that must queue for one would keep the consumer waiting for nothing). A job that ends
without starting (refused at its claim, say) opens the gate as it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["START_WAIT_S", "StartGate"]

START_WAIT_S: Final = 0.002
"""The longest the consumer thread waits for a job to start: a few times a trivial job's
start, and short beside anything the consumer has to do next."""


class StartGate:
    """Where the consumer thread waits for a job's start, and the loop says it happened."""

    def __init__(self, has_free_slot: Callable[[], bool], bound_s: float = START_WAIT_S) -> None:
        self._has_free_slot = has_free_slot
        self.bound_s = bound_s
        self._waiting: dict[str, threading.Event] = {}

    def hand_off(self, job_id: str, hand: Callable[[Callable[[Any], None]], None]) -> None:
        """Consumer thread: ``hand(handed)`` gives the job to Celery's default strategy,
        which calls ``handed(request)`` right before its pool gets the job (one of the
        strategy's ``callbacks``), and not at all when it holds the job; if it did, wait
        for the job to start."""
        events: list[threading.Event] = []

        def handed(*request: Any) -> None:  # Celery passes the request; none is read
            event = self.expect(job_id)
            if event is not None:
                events.append(event)

        hand(handed)
        if events:
            self.wait(job_id, events[0])

    def expect(self, job_id: str) -> threading.Event | None:
        """Consumer thread, as Celery hands ``job_id`` to its pool: the event its start
        sets, or ``None`` when the runtime has no free slot for it."""
        if not self._has_free_slot():
            return None
        event = threading.Event()
        self._waiting[job_id] = event
        return event

    def wait(self, job_id: str, event: threading.Event) -> bool:
        """Consumer thread, after the hand-off: wait until the job has started, at most
        the bound; whether it started in time."""
        try:
            return event.wait(self.bound_s)
        finally:
            self._waiting.pop(job_id, None)

    def open(self, job_id: str) -> None:
        """Loop thread: ``job_id`` has started its run, or ended without one."""
        event = self._waiting.get(job_id)
        if event is not None:
            event.set()
