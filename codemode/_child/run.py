"""One run's life cycle in the child: its start, its watchdogs, its end and its isolate's
disposal.

::

    Run ──▶ Runner.serve: take an isolate, arm the clock and the memory poll, mark Started,
            begin the program ─── (Flow, Relay: messages and tool calls) ───▶
    Runner.finish (a result, an error, a bound) ──▶ Done ──▶ Runner.dispose ──▶ Idle

The clock is the host's (``CLOCK_MONOTONIC`` is shared by every process on the machine),
so the deadline enforced here is the one the host set. If the engine cannot be stopped (a
loop after an ``await``), the run reports its timeout first and the child then exits; the
host replaces it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _texts
from .._host.mark import ChildMark
from .._outcome import LogEntry, ProgramError
from .._protocol import Done, Idle, Invoke, Log, Recycle, Run, Started
from .._request import Provider
from .limits import MEMORY_POLL_S, MemoryWatch
from .logs import RunLogs
from .runtime import BUNDLE_CACHE

if TYPE_CHECKING:
    from .engine import Entry
    from .flow import Flow
    from .frames import HostLink
    from .relay import Relay
    from .spares import Spares

__all__ = ["RunState", "Runner"]

WEDGE_PROBE_S = 0.25
"""How long a cancelled engine gets to answer before the child gives up on it."""
SETTLE_GRACE_S = 0.005
"""How long a result waits for the call that produced it to return (see Runner.finish)."""
_BOUNDS = ("timeout", "memory")
"""The kinds of end that stop the engine (the run hit a bound)."""


def _stream_log(send: Callable[[Log], None], run_id: int, entry: LogEntry) -> None:
    """A kept log entry, to the host as it is written (the run streams its logs)."""
    send(Log(run_id, entry))


class RunState:
    """Everything one run owns in the child; discarded with its isolate."""

    def __init__(
        self,
        msg: Run | Invoke,
        isolate: Any,
        providers: tuple[Provider, ...],
        max_message_bytes: int,
        send_log: Callable[[Log], None] | None = None,
    ) -> None:
        self.msg = msg
        self.isolate = isolate
        self.providers = providers
        on_entry = None
        if send_log is not None and isinstance(msg, Run) and msg.stream_logs:
            on_entry = functools.partial(_stream_log, send_log, msg.run_id)
        self.logs = RunLogs(max_message_bytes, on_entry)
        self.inbox: list[list[Any]] = []
        self.open_calls: set[int] = set()
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self.done = False
        self.finished = asyncio.Event()
        self.entry: Entry | None = None
        """The call that started the run or invoked the retained handler (see Runner.serve)."""
        self.pumping = False
        """A pump call is in the isolate: replies that arrive meanwhile wait for its return."""
        self.pump_lock = threading.Lock()
        """Held to test and set :attr:`pumping`: a pump's return may clear it from the
        isolate's thread (:meth:`Flow.pumped_quietly`)."""
        self.clock: asyncio.TimerHandle | None = None
        self.memory_check: asyncio.TimerHandle | None = None
        self.kind = "ok"
        self.settled = True
        self.provider_names: frozenset[str] | None = None
        """The names of the run's providers, once a call asked (see Relay.call_problem)."""

    def open_call(self, call_id: int, at: float | None = None) -> None:
        """A call left for the host (``at``, if not now): with count_host_waits=False the
        run's clock stops until the last open call is answered."""
        if not self.open_calls and not self.msg.count_host_waits:
            self.paused_since = time.monotonic() if at is None else at
        self.open_calls.add(call_id)

    def close_calls(self, call_ids: Sequence[int]) -> None:
        """Calls answered: with count_host_waits=False the run's clock runs again once the
        last open call is answered (see open_call)."""
        closed = False
        for call_id in call_ids:
            if call_id in self.open_calls:
                self.open_calls.discard(call_id)
                closed = True
        if closed and not self.open_calls and self.paused_since is not None:
            self.paused_total += time.monotonic() - self.paused_since
            self.paused_since = None


class Runner:
    """Starts, watches, ends and disposes of one child's runs, one at a time."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        link: HostLink,
        memory: MemoryWatch,
        spares: Spares,
        max_message_bytes: int,
        mark: ChildMark | None,
    ) -> None:
        self.loop = loop
        self.link = link
        self._send = link.send
        self.memory = memory
        self.spares = spares
        self.max_message_bytes = max_message_bytes
        self.mark = mark
        """Where this child marks the run whose program it starts (see codemode/_host/mark.py);
        None: it says Started as a frame."""
        self.current: RunState | None = None
        self.retained: dict[int, Any] = {}
        self.handle_providers: dict[int, tuple[Provider, ...]] = {}
        self.bundles: dict[str, str] = {}
        self.flow: Flow
        self.relay: Relay

    async def serve(self, msg: Run | Invoke) -> None:
        # What the last run's isolate holds must not count against this run, and no
        # preparation may compete with it for memory.
        await self.spares.quiet()
        if self.memory.residue_high():
            # The last run's memory is not back yet. A child that stays bloated recycles
            # before this run starts (the host retries it elsewhere).
            self._send(Recycle("resident memory stayed high between runs"))
            os._exit(0)
        if isinstance(msg, Invoke):
            isolate = self.retained.get(msg.handle_id)
            if isolate is None:
                self._send(Done(msg.run_id, "lost", error="The retained isolate is gone."))
                return
            providers = self.handle_providers.get(msg.handle_id, ())
            payload = msgspec.json.encode([msgspec.json.decode(msg.request_json), msg.network]).decode()
        else:
            isolate = await self.spares.take()
            providers = msg.providers
            payload = msgspec.json.encode(
                [
                    msg.code,
                    [[p.name, list(p.tools)] for p in providers],
                    msg.network,
                    msg.retain,
                    self._bundle(msg),
                    msg.inputs_json,
                ]
            ).decode()
        state = RunState(msg, isolate, providers, self.max_message_bytes, self._send)
        self.current = state
        self._connect(state)
        self.check_clock(state)
        state.memory_check = self.loop.call_later(MEMORY_POLL_S, self.check_memory, state)
        if self.mark is not None:
            self.mark.mark(msg.run_id)  # what Started says, without waking the host for it
        else:
            self._send(Started(msg.run_id))
        state.entry = isolate.begin(self.loop, payload, invoke=isinstance(msg, Invoke))
        state.entry.future.add_done_callback(lambda f: self._entry_failed(state, f))
        await state.finished.wait()
        for timer in (state.clock, state.memory_check):
            if timer is not None:
                timer.cancel()
        isolate.cancel_pumps()
        await self.dispose(state)

    def _bundle(self, msg: Run) -> str | None:
        """The run's module bundle: sent once per child, then named by its key."""
        if not msg.modules_key:
            return None
        if msg.modules_bundle is not None:
            self.bundles[msg.modules_key] = msg.modules_bundle
            while len(self.bundles) > BUNDLE_CACHE:
                self.bundles.pop(next(iter(self.bundles)))
        return self.bundles.get(msg.modules_key)

    def _connect(self, state: RunState) -> None:
        """Point the isolate's callbacks at this run (partials, not lambdas, where a tool
        call passes: a partial adds no Python frame)."""
        isolate, flow, relay = state.isolate, self.flow, self.relay
        isolate.on_bell = functools.partial(flow.take_journal, state)
        isolate.act_now = functools.partial(relay.send_calls_now, state)
        isolate.on_result = lambda text: self.loop.call_soon_threadsafe(flow.result_taken, state, text)
        if relay.replies is not None:
            isolate.park_wait = functools.partial(relay.park_wait, state)
            isolate.park_done = functools.partial(relay.park_done, state)

    def _entry_failed(self, state: RunState, future: asyncio.Future[None]) -> None:
        """The entry call failed (its return reaches the loop only then, or when waited
        for: see engine.Entry)."""
        if future.cancelled() or state.done:
            return
        exc = future.exception()
        if exc is not None:
            text = str(exc)
            if self.out_of_memory(state, exc) or "memory" in text.lower():
                self.finish_out_of_memory(state)
            else:
                self.finish(state, "throw", error=text)

    def out_of_memory(self, state: RunState, exc: BaseException) -> bool:
        """Whether a failure is the run's memory running out: the isolate's heap bound, or
        this process's data limit met by Python itself (a program that holds the process's
        address space in untouched buffers leaves no room for the text it sends)."""
        isolate = state.isolate
        return isinstance(exc, MemoryError) or isolate.out_of_room or isolate.memory_limit_reached()

    def finish_out_of_memory(self, state: RunState) -> None:
        self.finish(state, "memory", error=_texts.memory_text(self.memory.memory_limit_mb))

    def task_failed(self, state: RunState, exc: BaseException) -> None:
        """A pump, a park or a take failed: the run ends with what stopped it."""
        if state.done:
            return  # (a park the run's end terminated)
        if self.out_of_memory(state, exc):
            self.finish_out_of_memory(state)
        else:
            self.finish(state, "throw", error=str(exc))

    def on_loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A callback that raised MemoryError (mini-racer turning a pump's result into a
        string, say) would leave its run waiting for an answer that never comes, until the
        clock ends it: end the run with its memory text instead (the child then recycles)."""
        state = self.current
        if isinstance(context.get("exception"), MemoryError) and state is not None and not state.done:
            self.finish_out_of_memory(state)
            return
        loop.default_exception_handler(context)

    # ---- watchdogs ----------------------------------------------------------------

    def check_clock(self, state: RunState) -> None:
        """The host-clock deadline, as a timer that re-arms itself; with
        count_host_waits=False it stops while tool calls are open."""
        # Calls that left from the isolate's thread are opened at the loop's next read of
        # the journal, which a chain of quick calls may not need (see Flow.pumped_quietly).
        if not self.flow.read_journal_into(state):
            return
        if state.paused_since is not None:
            state.clock = self.loop.call_later(0.005, self.check_clock, state)
            return
        bound = state.msg.timeout_ms / 1000
        remaining = state.msg.started_at + bound + state.paused_total - time.monotonic()
        if remaining <= 0:
            self.finish(state, "timeout", error=_texts.timeout_text(state.msg.timeout_ms))
            return
        delay = remaining if state.msg.count_host_waits else min(remaining, 0.05)
        state.clock = self.loop.call_later(delay, self.check_clock, state)

    def check_memory(self, state: RunState) -> None:
        """Every MEMORY_POLL_S while the run lasts: the heap flag and the process's size."""
        if state.done:
            return
        if state.isolate.memory_limit_reached() or state.isolate.out_of_room or self.memory.over():
            self.finish_out_of_memory(state)
            return
        state.memory_check = self.loop.call_later(MEMORY_POLL_S, self.check_memory, state)

    # ---- the end --------------------------------------------------------------------

    def finish(
        self,
        state: RunState,
        kind: str,
        *,
        result_json: str | None = None,
        error: str | None = None,
        detail: ProgramError | None = None,
    ) -> None:
        """Report the run to the host at once; cleanup happens after, off its clock."""
        if state.done:
            return
        state.done = True
        state.isolate.act_now = None
        self.relay.wake_park()
        state.kind = kind
        self.flow.drain_journal(state)
        if error is not None:
            error = _texts.well_formed(error)
        done = Done(state.msg.run_id, kind, result_json, error, state.logs.final(), False, detail)
        entry = state.entry
        if kind in _BOUNDS or entry is None or entry.done():
            self.report(state, done)
            return
        # The result usually comes from inside the call that started the run: its journal
        # entry rings the bell just before that call returns. Report once it has returned,
        # so the host can hand this child its next run at once; if it has not returned
        # within SETTLE_GRACE_S (a program still busy after its result), report the run
        # unsettled: the host then holds this child until Idle.
        grace = self.loop.call_later(SETTLE_GRACE_S, self.report, state, done)

        def returned(_future: asyncio.Future[None]) -> None:
            grace.cancel()
            self.report(state, done)

        entry.notify_on_return()
        entry.future.add_done_callback(returned)

    def report(self, state: RunState, done: Done) -> None:
        """Send the run's Done, once, saying whether the engine has stopped running it."""
        if state.finished.is_set():
            return
        entry = state.entry
        settled = state.kind not in _BOUNDS and (entry is None or entry.done())
        state.settled = settled
        self._send(msgspec.structs.replace(done, settled=settled))
        state.finished.set()

    async def dispose(self, state: RunState) -> None:
        """Stop what still runs, and dispose the isolate, or exit if the engine wedged.

        A retained isolate (a run that returned a request handler, or an invocation of
        one) is kept, unless its invocation hit a bound: then it is dropped."""
        self.current = None
        isolate = state.isolate
        if state.kind == "handle" and isinstance(state.msg, Run):
            self.retained[state.msg.run_id] = isolate
            self.handle_providers[state.msg.run_id] = state.msg.providers
            return
        if isinstance(state.msg, Invoke) and state.kind not in _BOUNDS:
            if not state.settled:
                self._send(Idle())
            return
        entry = state.entry
        stopped = entry is None or entry.done()
        if not stopped and entry is not None:
            entry.cancel()  # mini-racer cancels the V8 task: TerminateExecution
        if isinstance(state.msg, Invoke):
            self.retained.pop(state.msg.handle_id, None)
        if (state.kind in _BOUNDS or not stopped) and not await isolate.responsive(WEDGE_PROBE_S):
            self._send(Recycle("the engine did not stop after the run ended"))
            os._exit(0)
        if stopped and state.kind not in _BOUNDS:
            # The usual case: Done and Idle go ahead at once, and the isolate is disposed on
            # the thread trip of the next preparation (the next run still waits for it:
            # see serve and Spares.quiet).
            isolate.drain_soon()
            self.spares.finished.append(isolate)
        else:
            await self.spares.close(isolate)
        if state.kind == "memory":
            # A run that exhausted its bound can leave the allocator fragmented and the
            # engine's global state strained: a fresh process is the safe next host.
            self._send(Recycle("the last run exhausted its memory bound"))
            os._exit(0)
        if self.memory.residue_high() and not self.spares.finished:
            self._send(Recycle("resident memory stayed high after the run"))
            os._exit(0)
        if not state.settled:
            self._send(Idle())  # the host held this child back until now

    async def release(self, handle_id: int) -> None:
        """Dispose a retained isolate the host has let go of."""
        isolate = self.retained.pop(handle_id, None)
        if isolate is not None:
            await self.spares.close(isolate)
