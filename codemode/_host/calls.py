"""The run in flight on one child, as the host keeps it: its tool calls and fetches, its
clock paused while they are open, and the backstop that kills a child past its deadline.

Every tool call is one ``Call`` frame up and one ``Reply`` frame down; the host starts
serving it in the loop turn that read it (``_host/eager.py``), at most
:data:`CALLS_STARTED_PER_TURN` per turn, and drops a reply whose run has ended.
:class:`CallService` is a mixin of :class:`~codemode._host.child.ChildProcess`: the same
object, so a tool call makes no call more than it did when both were one class.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._outcome import LogEntry, Outcome
from .._protocol import Call, Fetch, Invoke, Reply, Run
from .eager import EagerStarter

if TYPE_CHECKING:
    from .spawn import ChildPipes

__all__ = ["BACKSTOP_GRACE_S", "CALLS_STARTED_PER_TURN", "ActiveRun", "CallService"]

log = logging.getLogger("codemode.pool")

BACKSTOP_GRACE_S = 0.1
"""How long past the deadline the host waits for the child's own timeout before killing it."""
CALLS_STARTED_PER_TURN = 64
"""Tool calls and fetches of one run that the host starts per read of its child's pipe
(one read per loop turn) and per turn of the run's line; more wait in the line for the
next turns. Starting every call of a run that sent 10,000 at once in one turn (handing
sync calls to dispatch threads, under the GIL with them) kept the loop from reading the
run's own outcome, and a deadline settled late by about its own length. The share is
counted from each read, so that a run that is not flooding costs no extra loop turn per
call (a callback to reset the count each turn would: one more turn, and one more poll of
the selector, per call)."""


@dataclass
class ActiveRun:
    """One run (or one invocation of a retained handler) in flight on a child."""

    msg: Run | Invoke
    future: asyncio.Future[Outcome]
    on_call: Callable[[Call], Awaitable[str]]
    on_fetch: Callable[[Fetch], Awaitable[str]]
    forward: Callable[[Call, Callable[[str], object]], None] | None = None
    """Set when the run's dispatch is a Forwarder (``_dispatch.py``): its calls are handed
    on, and each answer comes back through a callback, with no coroutine of its own."""
    on_log: Callable[[LogEntry], None] | None = None
    """Told of each log entry the child sends as it is written (the run asked for them:
    ``Run.stream_logs``); must not raise."""
    open_calls: set[int] = field(default_factory=set)
    paused_since: float | None = None
    paused_total: float = 0.0
    cancel_sent: bool = False
    started: bool = False  # the child said Started (or marked it: _host/mark.py): program code may have run
    timed_out: bool = False
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    line: collections.deque[tuple[Callable[..., None], tuple[Any, ...]]] = field(
        default_factory=collections.deque
    )
    """Calls received but not started yet, each as how to start it (see CALLS_STARTED_PER_TURN)."""
    started_this_turn: int = 0
    next_turn: asyncio.Handle | None = None


class CallService:
    """The calls of the run in flight, and its backstop (a mixin of the child process)."""

    # Kept by the child process (see child.py).
    id: int
    run: ActiveRun | None
    pipes: ChildPipes
    _loop: asyncio.AbstractEventLoop
    _starter: EagerStarter
    _backstop: asyncio.TimerHandle | None

    if TYPE_CHECKING:

        def kill(self) -> None: ...

    # ---- the backstop -------------------------------------------------------------

    def _arm_backstop(self, active: ActiveRun) -> None:
        if self._backstop is not None:
            self._backstop.cancel()
        loop = asyncio.get_running_loop()
        due = active.msg.started_at + active.msg.timeout_ms / 1000 + active.paused_total
        delay = max(0.0, due + BACKSTOP_GRACE_S - time.monotonic())
        self._backstop = loop.call_later(delay, self._backstop_fired, active)

    def _backstop_fired(self, active: ActiveRun) -> None:
        if self.run is not active or active.future.done():
            return
        if active.paused_since is not None:
            self._backstop = None  # re-armed when the outstanding tool call returns (_close)
            return
        due = active.msg.started_at + active.msg.timeout_ms / 1000 + active.paused_total
        if time.monotonic() < due + BACKSTOP_GRACE_S:
            self._arm_backstop(active)
            return
        # The child did not report its own timeout: it is wedged beyond its own help.
        active.timed_out = True
        log.warning("child %s missed its deadline; killing it", self.id)
        self.kill()

    # ---- the run's clock ----------------------------------------------------------

    def _open(self, active: ActiveRun, call_id: int) -> None:
        if not active.open_calls and not active.msg.count_host_waits:
            active.paused_since = time.monotonic()
        active.open_calls.add(call_id)

    def _close(self, active: ActiveRun, call_id: int) -> None:
        active.open_calls.discard(call_id)
        if not active.open_calls and active.paused_since is not None:
            active.paused_total += time.monotonic() - active.paused_since
            active.paused_since = None
            if self._backstop is None:
                # It fired during the pause. Otherwise it stays as it is: the pause only
                # moved the deadline later, and a backstop that fires before the deadline
                # re-arms itself (a new timer for every tool call costs every call more
                # instructions: benchmarks/instructions.py counts them).
                self._arm_backstop(active)

    # ---- calls --------------------------------------------------------------------

    def _on_call(self, call: Call) -> None:
        active = self.run
        if active is None or active.msg.run_id != call.run_id:
            return
        self._open(active, call.call_id)
        if active.forward is not None:
            self._start(active, self._forward, active, call)
        else:
            self._start(active, self._answer, active, call.call_id, functools.partial(active.on_call, call))

    def _on_fetch(self, fetch: Fetch) -> None:
        active = self.run
        if active is None or active.msg.run_id != fetch.run_id:
            return
        self._open(active, fetch.call_id)
        self._start(active, self._answer, active, fetch.call_id, functools.partial(active.on_fetch, fetch))

    def _start(self, active: ActiveRun, begin: Callable[..., None], *args: Any) -> None:
        """Start serving a call (``begin(*args)``) now, or, past this turn's share, in a
        later turn (in order)."""
        if active.line or active.started_this_turn >= CALLS_STARTED_PER_TURN:
            active.line.append((begin, args))
            if active.next_turn is None:
                active.next_turn = self._loop.call_soon(self._new_turn, active)
        else:
            active.started_this_turn += 1
            begin(*args)

    def _new_turn(self, active: ActiveRun) -> None:
        """A loop turn later (the loop has looked for I/O since): start the next share."""
        active.next_turn = None
        active.started_this_turn = 0
        if self.run is not active or active.future.done():
            active.line.clear()
            return
        while active.line and active.started_this_turn < CALLS_STARTED_PER_TURN:
            begin, args = active.line.popleft()
            active.started_this_turn += 1
            begin(*args)
        if active.line:
            active.next_turn = self._loop.call_soon(self._new_turn, active)

    def _answer(self, active: ActiveRun, call_id: int, serve: Callable[[], Awaitable[str]]) -> None:
        """Serve one call and send its reply, starting at once (see _host/eager.py): a dispatch
        that answers without waiting is answered in this turn of the loop and leaves no
        task. A call that waits goes on in a task, kept in the run's tasks (cancelled if the
        run ends first) until it takes itself out as it ends: a done callback would cost
        every call one more turn of the loop."""
        task: asyncio.Task[None] | None = None

        async def answer() -> None:
            try:
                self._reply(active, call_id, await serve())
            finally:
                if task is not None:
                    active.tasks.discard(task)

        task = self._starter.start(answer())
        if task is not None:  # (it waits: a task handed a call is never done yet)
            active.tasks.add(task)

    def _forward(self, active: ActiveRun, call: Call) -> None:
        """Hand a call to the run's forwarding dispatch; its answer goes to the child when
        it comes (from whatever loop callback brings it)."""
        assert active.forward is not None
        active.forward(call, functools.partial(self._reply, active, call.call_id))

    def _reply(self, active: ActiveRun, call_id: int, body: str) -> None:
        """A call's answer, to the child, unless the run ended while the host worked (the
        stale reply is dropped)."""
        if self.run is not active or active.future.done():
            return
        self._close(active, call_id)
        try:  # (not contextlib.suppress: three more Python calls on every call's path)
            self.pipes.write_reply(Reply(active.msg.run_id, call_id, body))
        except Exception:  # the child is gone: its exit is handled by the reader
            log.debug("child %s: a reply was not written", self.id, exc_info=True)

    def _finish(self, active: ActiveRun) -> None:
        """The run ended: the child has none in flight, calls never started are dropped,
        those being served cancelled, and the backstop disarmed."""
        self.run = None
        active.line.clear()  # calls never started: nothing to undo
        if active.next_turn is not None:
            active.next_turn.cancel()
            active.next_turn = None
        if self._backstop is not None:
            self._backstop.cancel()
            self._backstop = None
        for task in list(active.tasks):
            task.cancel()
        active.tasks.clear()  # a task cancelled before it started never takes itself out
