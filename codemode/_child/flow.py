"""What a running program writes, and how the loop acts on it: the journal, the pump, and
each message in turn.

The isolate writes messages into its journal (shared memory) and rings the bell; the loop
reads the journal without calling into the isolate, and calls it (a *pump*) only to deliver
replies or to drain the outbox once the journal is full::

    isolate ──bell──▶ Flow.take_journal ──▶ Flow.take_messages ──▶ log, call, fetch, result
    inbox (replies) ──▶ Flow.pump ──▶ isolate ──▶ Flow.pumped (outbox) ──▶ take_messages

This is a tool call's hot path, so it is callbacks, not tasks: a reply is in the isolate
within the loop iteration that read it, and a pump's return is acted on within the
iteration that learned of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _texts
from .._outcome import ProgramError
from .._positions import program_error
from .._protocol import Fetch, Run
from .lines import TAMPERED, SentCall, decode_lines, well_shaped

if TYPE_CHECKING:
    from .relay import Relay
    from .run import Runner, RunState

__all__ = ["Flow"]


class Flow:
    """The message flow of one child's runs (on the loop unless a method says otherwise)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        send: Callable[[Any], None],
        max_message_bytes: int,
        stdlib_sources: dict[str, str],
    ) -> None:
        self.loop = loop
        self._send = send
        self.max_message_bytes = max_message_bytes
        self.stdlib_sources = stdlib_sources
        self.runner: Runner
        self.relay: Relay

    def take_journal(self, state: RunState) -> None:
        """The bell rang: act on what the isolate wrote, right in the bell's callback (no
        isolate call is needed for that), and call the isolate only if it has to be: replies
        to deliver, or an outbox to drain once the journal is full."""
        if state.isolate.out_of_room:
            self.runner.finish_out_of_memory(state)
            return
        self.pump(state)

    def read_journal_into(self, state: RunState) -> bool:
        """Act on what the isolate wrote since the last read; False once the run has ended."""
        if state.done:
            return False
        try:
            self.take_messages(state, state.isolate.read_journal())
        except Exception as exc:  # a message the runtime should never have written
            text = f"The runtime sent a message the child could not read ({exc})."
            self.runner.finish(state, "throw", error=text)
            return False
        return not state.done

    def pump(self, state: RunState, *, journal_read: bool = False) -> None:
        """Call into the isolate if it has to be: to deliver replies, or to drain the
        outbox once the journal is full. One pump at a time: what arrives while one is in
        the isolate goes in when it returns (see pumped)."""
        # What the isolate wrote is acted on at once, a pump in flight or not (the journal
        # needs no isolate); and before replies go in, which keeps their order.
        # (``journal_read``: the caller has just done so, a reply's handling)
        if state.done or not (journal_read or self.read_journal_into(state)):
            return
        with state.pump_lock:
            if state.pumping or not (state.inbox or state.isolate.journal_full()):
                return  # (the one in flight, or one a message in the journal started, takes them)
            if state.isolate.delivering():
                # Answers a bell put into the channel that the runtime has yet to take (it
                # does as that bell returns): come back for the channel in a moment.
                self.loop.call_later(0.0002, self.pump, state)
                return
            state.pumping = True
            inbox, state.inbox = state.inbox, []  # (a park may add to it: see Relay.deliver_parked)
        inbox_json = msgspec.json.encode(inbox).decode() if inbox else ""
        self.relay.wake_park()  # the pump's task waits behind a park
        state.isolate.pump_soon(
            inbox_json, lambda out: self.pumped(state, out), lambda out: self.pumped_quietly(state, out)
        )

    def pumped_quietly(self, state: RunState, out: str | BaseException) -> bool:
        """On the isolate's thread, as a pump returns: whether the return needs nothing of
        the loop (an empty outbox, no replies waiting, room in the journal), in which case
        the pump is over here and the loop does not wake for it. The loop takes the
        journal's bookkeeping (calls that left) at its next read: the next reply, the
        clock."""
        if out != "":
            return False
        with state.pump_lock:
            if state.done or state.inbox or state.isolate.journal_full():
                return False
            state.pumping = False
            return True

    def pumped(self, state: RunState, out: str | BaseException) -> None:
        """A pump returned ``out``: the outbox, or what stopped it."""
        state.pumping = False
        if state.done:
            return
        if isinstance(out, BaseException):  # terminated by a memory bound, say
            self.runner.task_failed(state, out)
            return
        if out:
            try:
                messages = decode_lines(out)
                self.take_messages(state, state.isolate.read_journal())
                self.take_messages(state, messages)
            except Exception as exc:
                if isinstance(exc, MemoryError):
                    self.runner.finish_out_of_memory(state)
                    return
                text = f"The runtime sent a message the child could not read ({exc})."
                self.runner.finish(state, "throw", error=text)
                return
        self.pump(state)  # replies that arrived meanwhile

    def answered(self, state: RunState, call_ids: list[int]) -> None:
        """On the loop: calls a park answered, for the clock that stops while calls are open
        (read the journal first: the calls may have been opened there)."""
        if self.read_journal_into(state):
            state.close_calls(call_ids)

    def result_taken(self, state: RunState, text: str | BaseException) -> None:
        """On the loop: the result a take brought from the isolate (see runtime.js, finish),
        acted on as its ``["d", text]`` line would be, after what the journal held before
        it; or what stopped the take."""
        if state.done:
            return
        if isinstance(text, BaseException):
            self.runner.task_failed(state, text)
        elif self.read_journal_into(state):
            self.take_messages(state, [["d", text]])

    def _threw(self, state: RunState, text: str, name: str, stack: str, *, compiling: bool) -> None:
        """The program threw: its message is the run's error, its position and own frames
        the error's detail (in the code as the host sent it: see codemode/_positions.py)."""
        code = state.msg.code if isinstance(state.msg, Run) else ""
        message = _texts.well_formed(text)
        try:
            detail = program_error(
                _texts.well_formed(name), message, _texts.well_formed(stack), code, compiling=compiling
            )
        except Exception:  # (a detail that cannot be read costs the detail, not the run)
            detail = ProgramError(name=_texts.well_formed(name), message=message)
        self.runner.finish(state, "throw", error=text, detail=detail)

    def drain_journal(self, state: RunState) -> None:
        """Take what the isolate wrote before the run ended (it may be wedged now)."""
        if not state.isolate.closed:
            self.take_messages(state, state.isolate.read_journal(), logs_only=True)

    def take_messages(self, state: RunState, messages: list[Any], *, logs_only: bool = False) -> None:
        """Act on messages from the isolate, checking each one's shape (see
        lines.well_shaped)."""
        run_id = state.msg.run_id
        for m in messages:
            if state.done and not logs_only:
                return
            if isinstance(m, SentCall):
                if not logs_only:
                    state.open_call(m.call_id, m.at)
                continue
            if not well_shaped(m):
                self.runner.finish(state, "throw", error=TAMPERED)
                return
            tag = m[0]
            if tag == "l":
                state.logs.add(m[1], m[2])
            elif tag == "s":
                # A synchronous request (a standard library module's source): answer at once,
                # the isolate is waiting for it.
                state.isolate.answer_sync(m[1], self.stdlib_sources.get(m[2], ""))
            elif logs_only:
                continue
            elif tag == "c":
                self.relay.take_call(state, m[1], m[2], m[3], m[4])
            elif tag == "f":
                state.open_call(m[1])
                self._send(Fetch(run_id, m[1], m[2]))
                if self.relay.replies is not None:
                    state.isolate.park_soon()
            elif tag == "d":
                result = m[1]
                size = 0 if result is None else len(result.encode("utf-8", "surrogatepass"))
                if size > self.max_message_bytes:
                    text = _texts.message_ceiling_text("return value", self.max_message_bytes)
                    self.runner.finish(state, "ceiling", error=text)
                else:
                    self.runner.finish(state, "ok", result_json=result)
            elif tag == "D":
                state.isolate.take_result_soon()
            elif tag == "e":
                kind = m[2] if m[2] in ("ceiling", "memory") else "throw"
                self.runner.finish(state, kind, error=m[1])
            elif tag == "t":
                self._threw(state, m[1], m[2], m[3], compiling=m[4] == 1)
            elif tag == "h" and isinstance(state.msg, Run) and state.msg.retain:
                self.runner.finish(state, "handle")
