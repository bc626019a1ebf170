"""Tool calls between a running program and the host: sending them, and the park that reads
their answers on the isolate's own thread.

A call leaves the isolate as a journal line. Usually the isolate's thread sends it, in the
callback of the bell its write rang (:meth:`Relay.send_calls_now`); otherwise the loop does
as it reads the journal (:meth:`Relay.take_call`). Its answer comes back one of two ways::

    reply pipe ──▶ park (isolate's thread, select) ──▶ inbound channel ──▶ runtime
    protocol pipe ──▶ loop (Child.handle) ──▶ run's inbox ──▶ pump ──▶ runtime

The park is the hot path: while the program waits on calls, its thread waits on the reply
pipe itself, so an answer reaches the program with no wake of the loop. The loop wakes a
park (:meth:`Relay.wake_park`) when it needs the isolate: a run that ends, a pump.

Locks: the park lock guards the park's wake-up flags; the replies lock, the reply pipe and
the answers an ended run's park read for the next run; a run's pump lock (see run.RunState),
who has the inbound channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _texts
from .._protocol import Call, PipeFrames, Reply
from .lines import SentCall, well_shaped

if TYPE_CHECKING:
    from .flow import Flow
    from .run import Runner, RunState

__all__ = ["Relay"]


class Relay:
    """The tool-call relay of one child (its methods run on the loop unless they say so)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        send: Callable[[Any], None],
        decoder: msgspec.msgpack.Decoder[Any],
        max_message_bytes: int,
        replies: int | None,
    ) -> None:
        self.loop = loop
        self._send = send
        self._decoder = decoder
        self.max_message_bytes = max_message_bytes
        self.replies = None if replies is None else PipeFrames(replies)
        """The host's answers to calls, read by the running isolate's thread while the
        program waits (see park_wait); None: they come with the other frames."""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._park_lock = threading.Lock()
        self._parked = False
        self._woken = False
        """A wake-up was written while parked: the park's end reads it off the wake pipe."""
        self._replies_lock = threading.Lock()
        self._early: list[tuple[int, int, str]] = []
        """Answers an ended run's park read for the run now in progress (see take_replies)."""
        self.flow: Flow
        self.runner: Runner

    # ---- the park: answers read on the isolate's thread ------------------------------

    def park_wait(self, state: RunState, timeout_s: float) -> bool:
        """On the isolate's thread, in a bell, while the program waits on calls (the park's
        bell, or the bell of its only open call): wait up to ``timeout_s`` for answers on
        the reply pipe, or for the loop (a run that ends, a pump it wants in), and put what
        came into the inbound channel; whether any went there. Per call, this takes the
        loop's wake-up, its reading of the answer and its hand-off to this thread off the
        call's path."""
        replies = self.replies
        if replies is None or state.done:
            return False
        with self._park_lock:  # (before the wait: a wake-up from now on is seen)
            self._parked = True
        try:
            # Answers an ended run's park kept for this one; the pipe itself is looked at
            # by the wait, which returns at once if it holds something (a read first would
            # cost every call a system call and an exception for nothing).
            answers = self.take_replies(state, replies, read=False) if self._early else []
            if not answers:
                select.select([replies.fd, self._wake_r], [], [], max(timeout_s, 0.0))
                if state.done:
                    return False
                answers = self.take_replies(state, replies)
        finally:
            with self._park_lock:
                self._parked = False
                woken, self._woken = self._woken, False
            if woken:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
        return bool(answers) and self.deliver_parked(state, answers)

    def take_replies(self, state: RunState, replies: PipeFrames, *, read: bool = True) -> list[list[Any]]:
        """The answers for this run the reply pipe holds now (those of an ended run are
        dropped), and those an ended run's park kept for it; only those with ``read``
        False. The pipe is read until a read leaves it empty."""
        run_id = state.msg.run_id
        with self._replies_lock:  # (a retained isolate's last park may still be reading)
            answers: list[list[Any]] = []
            if self._early:
                answers = [[call_id, body] for rid, call_id, body in self._early if rid == run_id]
                if answers:
                    self._early = [e for e in self._early if e[0] != run_id]
            while read:
                bodies = replies.read()
                if not bodies:  # (None: the host is gone; the loop's own pipe says so)
                    return answers
                for body in bodies:
                    reply = self._decoder.decode(body)
                    if not isinstance(reply, Reply):
                        continue
                    if reply.run_id == run_id:
                        answers.append([reply.call_id, reply.body])
                        continue
                    current = self.runner.current
                    if current is not None and current is not state and current.msg.run_id == reply.run_id:
                        # Read by an ended run's park: kept for the run it answers.
                        self._early.append((reply.run_id, reply.call_id, reply.body))
                if replies.drained:
                    break
            return answers

    def deliver_parked(self, state: RunState, answers: list[list[Any]]) -> bool:
        """Answers read on the isolate's thread: into the inbound channel for the runtime to
        deliver as the bell returns (True), or, while the loop's pump has the channel (or
        they do not fit), to the run's inbox, which the loop delivers."""
        if not state.msg.count_host_waits:
            self.loop.call_soon_threadsafe(self.flow.answered, state, [a[0] for a in answers])
        with state.pump_lock:
            if state.done:
                return False
            if not state.pumping and state.isolate.deliver_now(msgspec.json.encode(answers).decode()):
                return True  # (the runtime reads the channel before this bell returns)
            state.inbox.extend(answers)
        self.loop.call_soon_threadsafe(self.flow.pump, state)
        return False

    def park_done(self, state: RunState, more: bool | BaseException) -> None:
        """On the isolate's thread, as a park returns (before the program's continuations
        run): park again while calls are open. A park that failed (a program that broke
        what the runtime delivers with) ends the run as a failed pump does: answers may be
        lost with it, so nothing would ever settle its calls."""
        if isinstance(more, BaseException):
            if not state.done:
                self.loop.call_soon_threadsafe(self.runner.task_failed, state, more)
        elif more and not state.done:
            state.isolate.park_soon()

    def wake_park(self) -> None:
        """Bring a waiting park back to its isolate now (from the loop)."""
        with self._park_lock:
            if self._parked:
                self._woken = True
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wake_w, b".")

    # ---- sending calls -------------------------------------------------------------

    def take_call(self, state: RunState, call_id: int, provider: str, tool: str, args_json: str) -> None:
        """On the loop: a call read from the journal goes to the host, or, if it cannot,
        its problem goes back to the program as the call's error."""
        error = self.call_problem(state, provider, args_json)
        if error is not None:
            state.inbox.append([call_id, msgspec.json.encode({"error": error}).decode()])
            self.flow.pump(state)
            return
        state.open_call(call_id)
        self.send_call(state, call_id, provider, tool, args_json)
        if self.replies is not None:
            state.isolate.park_soon()

    def call_problem(self, state: RunState, provider: str, args_json: str) -> str | None:
        """Why a tool call cannot go to the host (its text goes back to the program
        instead), or None."""
        names = state.provider_names
        if names is None:
            names = state.provider_names = frozenset(p.name for p in state.providers)
        if provider not in names:
            return f"{provider} is not a provider declared for this run."
        limit = self.max_message_bytes
        # At most 3 UTF-8 bytes per UTF-16 unit: most argument lists need no encoding.
        if len(args_json) * 3 > limit and len(args_json.encode("utf-8", "surrogatepass")) > limit:
            return _texts.message_ceiling_text("tool call's argument list", limit)
        return None

    def send_call(self, state: RunState, call_id: int, provider: str, tool: str, args_json: str) -> None:
        self._send(Call(state.msg.run_id, call_id, provider, _texts.well_formed(tool), args_json))

    def send_calls_now(self, state: RunState, messages: list[Any]) -> tuple[list[Any], bool]:
        """On the isolate's thread, in the callback of the bell that a program's write rang
        (``Isolate._on_thread``): send its tool calls to the host now, and leave the rest
        to the loop, in order. Only well-formed calls that :meth:`take_call` would send
        leave here, and only until the first message that is neither one nor a log line
        (a result, a fetch, an error: the loop decides what follows those); each sent call
        stays in the list as a :class:`SentCall`, which the loop opens. With the list,
        whether it is all such calls (then it can wait for the loop's next read)."""
        out: list[Any] = []
        sending = True
        sent = False
        only_sent = True
        now = time.monotonic()
        for m in messages:
            if (
                sending
                and not state.done
                and well_shaped(m)
                and m[0] == "c"
                and self.call_problem(state, m[2], m[4]) is None
            ):
                try:
                    self.send_call(state, m[1], m[2], m[3], m[4])
                except Exception:  # the loop takes this call and the rest, and meets it
                    sending = False
                else:
                    out.append(SentCall(m[1], now))
                    sent = True
                    continue
            if m == ["D"] and not state.done:
                # The result waits in the isolate: the take posted now runs as soon as the
                # program's turn ends, and its return brings the result (see
                # Flow.result_taken).
                state.isolate.take_result_soon()
                continue
            if not (isinstance(m, list) and m and m[0] == "l"):
                sending = False
            out.append(m)
            only_sent = False
        if sent and self.replies is not None:
            state.isolate.sent_here = True  # (the isolate parks for their answers)
        return out, only_sent
