"""The calls a child posts into its isolate and whose returns come back on the isolate's
thread: the pump (replies in, the outbox out), the park (the program waits for answers),
the take (the run's result) and the cancelable task of the general path.

Each posted call's callback id is the isolate's own (mini-racer does not know it), so its
return is dealt with on the isolate's thread (:meth:`Isolate._on_thread` calls the
``_*_returned`` methods here) and the loop hears of it only when it must. A mixin of
:class:`~codemode._child.engine.Isolate`: the same object, so the per-call path makes no
call more than it did as one class.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .entry import Entry, settle_entry
from .miniracer_internals import JSEvalException, RawContext, read_text
from .threads import settle

if TYPE_CHECKING:
    from .engine import Isolate

__all__ = ["ALONE_WAIT_S", "FEED", "INVOKE", "PUMP", "START", "EntryCall", "PostedCalls"]

START, PUMP, FEED, INVOKE = 1, 2, 3, 4
"""Operation codes of the runtime's ``api()``, written into the control word before a call."""
ALONE_WAIT_S = 0.001
"""How long the bell of a program's only open call waits for its answer (see _await_sent):
the time a quick tool's round trip takes, at most what the program's next step waits."""
_MAX_HELD_FREES = 256
"""Value handles held for a batched free at most (see :class:`Isolate`), so that a run that
rings the bell a great many times without a call into the isolate holds little."""
FREE_AFTER = 64
"""Held value handles a pump frees once there are this many (see the isolate): two come
with every tool call, so a run of up to 31 calls frees none until its context's teardown
frees them all, and a longer one holds at most this many small values."""


def _ignore(*_: Any) -> None:
    """What a pump's return goes to before a pump is posted: nothing."""


def _loud(_out: Any) -> bool:
    """A pump's return that the loop always hears of (see :meth:`PostedCalls.pump_soon`)."""
    return False


class PostedCalls:
    """The pump, the park, the take: posted, returned on the isolate's thread, cancelled."""

    # Kept by the isolate (see engine.py).
    _raw: RawContext
    _loop: asyncio.AbstractEventLoop | None
    _api: Any
    _argv: Any
    _this: Any
    _park_this: Any
    _take_this: Any
    _in_flight: set[int]
    _held: list[Any]
    _control: memoryview
    _capacity: int
    _put: Callable[[bytes, int], None]
    closed: bool
    _loop_thread: int

    def _init_posted(self) -> None:
        self._pump_id: int | None = None
        """The callback id of the pump in the isolate (see :meth:`pump_soon`), or None."""
        self._pump_task = 0
        self._pump_lock = threading.Lock()
        self._pump_done: Callable[[Any], None] = _ignore
        self._pump_quiet: Callable[[Any], bool] = _loud
        self._pump_tasks: set[asyncio.Task[Any]] = set()
        self._park_id: int | None = None
        """The callback id of the park task in the isolate (see :meth:`park_soon`), or None."""
        self._park_task = 0
        self._park_again = False
        """A call left while a park was pending: park again when it returns, whatever it
        found (it may have looked before that call was made)."""
        self.sent_here = False
        """Set by :attr:`act_now` when it sent calls from the isolate's thread (see _on_thread)."""
        self.park_wait: Callable[[float], bool] = lambda timeout_s: False
        """Set by the run: on the isolate's thread, in a bell, wait up to ``timeout_s`` for
        answers and put them into the inbound channel (see :meth:`deliver_now`); whether
        any came."""
        self.park_done: Callable[[bool | BaseException], None] = lambda more: None
        """Set by the run: on the isolate's thread, as a park returns (``more``: calls are
        still open; or what stopped the park)."""
        self._take_id: int | None = None
        """The callback id of the take in the isolate (see :meth:`take_result_soon`), or None."""
        self._take_task = 0
        self.on_result: Callable[[str | BaseException], None] = lambda text: None
        """Set by the run: on the isolate's thread, as a take returns, the result's text (or
        what stopped the take)."""

    async def _task(self, method: Any, *args: Any) -> Any:
        """mini-racer's cancelable task, minus two costs: held handles are freed once the
        task is posted (the isolate's thread is awake for it), and a task that completed is
        not cancelled afterwards (a no-op that still crosses into the library)."""
        rc = self._raw
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(val_handle: Any) -> None:
            if future.cancelled():
                return
            try:
                future.set_result(rc.to_python(val_handle))
            except JSEvalException as exc:
                future.set_exception(exc)

        with rc.register_callback(done) as callback_id:
            task_id = method(*args, callback_id)
            self._in_flight.add(task_id)
            if self._held:
                self._free_held()
            try:
                return await future
            finally:
                self._in_flight.discard(task_id)
                if not future.done() or future.cancelled():
                    rc.cancel_task(task_id)

    def pump_soon(
        self,
        inbox_json: str,
        on_done: Callable[[str | BaseException], None],
        quiet: Callable[[str | BaseException], bool],
    ) -> None:
        """Deliver replies and take the outbox, on the run's hot path (every reply to a
        tool call): the isolate is called now, and ``on_done`` gets the outbox (one JSON
        array, or '') or the exception when it returns, on the loop, unless ``quiet``,
        asked first on the isolate's thread, says the loop need not hear of it (it then
        owns the return). An inbox too large for one feed takes the general path, as a
        task (``quiet`` is not asked there)."""

        def pumped(out: Any) -> None:
            on_done(out if isinstance(out, (str, BaseException)) else "")

        data = inbox_json.encode("utf-16-le", "surrogatepass")
        units = len(data) // 2
        if units > self._capacity:
            task = asyncio.ensure_future(self._write_units(data, PUMP))
            self._pump_tasks.add(task)

            def finished(t: asyncio.Task[Any]) -> None:
                self._pump_tasks.discard(t)
                if not t.cancelled() and not self.closed:
                    exc = t.exception()
                    pumped(exc if exc is not None else t.result())

            task.add_done_callback(finished)
            return
        self._put(data, units)
        struct.pack_into("<i", self._control, 0, PUMP)
        with self._pump_lock:  # the return may come to the isolate's thread before the id is kept
            self._pump_done = pumped
            self._pump_quiet = quiet
            self._pump_id = self._new_callback_id()
            self._pump_task = self._post_call(self._this, self._pump_id)
        if len(self._held) >= FREE_AFTER:
            self._free_held()

    def _pump_returned(self, raw: Any, journal_quiet: bool) -> bool:
        """On the isolate's thread, as the pump returns: its value goes to ``quiet`` (see
        :meth:`pump_soon`) if what was just read of the journal can wait, else to the loop.
        Always True: the pump's callback id is this isolate's own, mini-racer does not
        know it."""
        with self._pump_lock:
            self._pump_id = None
            self._in_flight.discard(self._pump_task)
            done, quiet = self._pump_done, self._pump_quiet
        out: str | BaseException | None
        try:
            out = self._text_or_raise(raw)  # (None, any other value: an empty outbox)
        except BaseException as exc:  # JSEvalException, or MemoryError: the loop acts on it
            out = exc
        if self.closed:
            return True
        try:
            if journal_quiet and quiet(out):
                return True
        except BaseException as exc:  # a callback from the engine must not raise
            out = exc
        self._loop.call_soon_threadsafe(self._pumped_on_loop, done, out)  # type: ignore[union-attr]
        return True

    def _await_sent(self, *, lone: bool) -> None:
        """After calls left from this thread (:attr:`sent_here`): the bell of the program's
        only open call (``lone``) waits briefly for its answer, which the runtime delivers
        as the call returns; otherwise a park takes their answers."""
        if not self.sent_here:
            return
        self.sent_here = False
        if not (lone and not self.closed and self.park_wait(ALONE_WAIT_S)):
            self.park_soon()

    def park_soon(self) -> None:
        """Post a park (see runtime.js): from either thread, once a call has left; one at a
        time (its return posts the next while calls are open)."""
        with self._pump_lock:
            if self._park_id is not None:
                self._park_again = True  # (its return parks again: see _park_returned)
                return
            if self.closed:
                return
            self._park_id = self._new_callback_id()
            self._park_task = self._post_call(self._park_this, self._park_id)

    def _new_callback_id(self) -> int:
        """A callback id for a call to post; kept by the caller before it posts the call
        (the call may return to the isolate's thread, which looks for the id, at once)."""
        return self._raw.next_callback_id()

    def _post_call(self, this: Any, callback_id: int) -> int:
        """Post a call of the runtime's ``api`` with ``this`` (under the pump lock); its
        task, kept in flight."""
        task: int = self._raw.call_function(self._api, this, self._argv, callback_id)
        self._in_flight.add(task)
        return task

    def take_result_soon(self) -> None:
        """Post a take (from either thread): the runtime said ``["D"]``, its result waits in
        the isolate, and comes back as the take's value, a string the engine converts
        natively (see runtime.js, finish), to :attr:`on_result` on the isolate's thread. Posted
        from a bell, it runs right after the program's current turn, with no wake-up."""
        with self._pump_lock:
            if self._take_id is not None or self.closed:
                return
            self._take_id = self._new_callback_id()
            self._take_task = self._post_call(self._take_this, self._take_id)

    def _take_returned(self, raw: Any) -> bool:
        """On the isolate's thread, as a take returns: its string to :attr:`on_result`. Always
        True (the take's callback id is this isolate's own)."""
        with self._pump_lock:
            self._take_id = None
            self._in_flight.discard(self._take_task)
        text: str | BaseException | None
        try:
            text = self._text_or_raise(raw)
        except BaseException as exc:  # what stopped it: a termination
            text = exc
        if text is None:
            text = RuntimeError("the run's result could not be taken from its isolate")
        if not self.closed:
            with contextlib.suppress(BaseException):
                self.on_result(text)
        return True

    def _text_or_raise(self, raw: Any) -> str | None:
        """The string a pump, a park or a take returned (its handle held, to be freed with
        the others), or None for any other value; raises what stopped the call (see
        miniracer_internals.read_text)."""
        text = read_text(self._raw, raw)
        if text is not None:
            self._held.append(raw)
        return text

    def _park_returned(self, raw: Any) -> bool:
        """On the isolate's thread, as a park returns: its value says whether calls are
        still open. Always True (the park's callback id is this isolate's own)."""
        with self._pump_lock:
            self._park_id = None
            self._in_flight.discard(self._park_task)
            again, self._park_again = self._park_again, False
        more: bool | BaseException
        try:
            more = bool(self._text_or_raise(raw)) or again
        except BaseException as exc:
            more = exc
        if not self.closed:
            with contextlib.suppress(BaseException):
                self.park_done(more)
        return True

    def _pumped_on_loop(self, done: Callable[[Any], None], out: Any) -> None:
        if not self.closed:
            done(out)

    def cancel_pumps(self) -> None:
        """Stop the pumps still in flight (the run has ended): their callbacks get the
        termination, and the run that ended ignores it."""
        for task in list(self._pump_tasks):
            task.cancel()
        with self._pump_lock:
            task_ids = [
                task
                for task, cb in (
                    (self._pump_task, self._pump_id),
                    (self._park_task, self._park_id),
                    (self._take_task, self._take_id),
                )
                if cb is not None
            ]
        for task_id in task_ids:  # (not under the lock: their callbacks take the lock)
            self._raw.cancel_task(task_id)

    async def _call(self, op: int) -> Any:
        struct.pack_into("<i", self._control, 0, op)
        return await self._task(self._raw.call_function, self._api, self._this, self._argv)

    async def _write_units(self, data: bytes, then: int) -> Any:
        """Put ``data`` (UTF-16 units) into the inbound buffer, in as many feeds as it needs,
        then call with ``then``."""
        units = len(data) // 2
        cap = self._capacity
        offset = 0
        while units - offset > cap:
            self._put(data[offset * 2 : (offset + cap) * 2], cap)
            await self._call(FEED)
            offset += cap
        self._put(data[offset * 2 :], units - offset)
        return await self._call(then)

    def _hold(self, raw: Any) -> None:
        """mini-racer's free for one value handle (called from any thread): held for later."""
        held = self._held
        held.append(raw)
        if len(held) > _MAX_HELD_FREES and threading.get_ident() == self._loop_thread:
            self._free_held()

    def _free_held(self) -> None:
        if self.closed:
            return
        held, self._held = self._held, []
        free = self._raw.free_value
        for raw in held:
            free(raw)


class EntryCall(PostedCalls):
    """The call that starts the program, or invokes the handler a run retained: posted like
    a pump, and the one call whose return the loop may wait for (see :class:`Entry`)."""

    def _init_entry(self) -> None:
        self._entry: Entry | None = None
        """The call that started the run or invoked the retained handler (see :meth:`begin`)."""
        self._entry_id: int | None = None
        """Its callback id while it is in the isolate, else None."""
        self._entry_task = 0

    def begin(self, loop: asyncio.AbstractEventLoop, payload_json: str, *, invoke: bool = False) -> Entry:
        """Post the call that starts the program (``payload_json`` is ``[code, providers,
        network, retain, bundle]``) or, with ``invoke``, calls the retained handler
        (``[plain_request, network]``); on the loop. See :class:`Entry` for its return. A
        payload too large for one feed goes in several, as a task."""
        op = INVOKE if invoke else START
        entry = Entry(cast("Isolate", self), loop.create_future())  # (only an Isolate is one)
        data = payload_json.encode("utf-16-le", "surrogatepass")
        units = len(data) // 2
        if units > self._capacity:
            entry.task = asyncio.ensure_future(self._write_units(data, op))
            entry.task.add_done_callback(functools.partial(settle_entry, entry))
            return entry
        self._put(data, units)
        struct.pack_into("<i", self._control, 0, op)
        with self._pump_lock:  # the return may come to the isolate's thread before the id is kept
            self._entry = entry
            self._entry_id = self._new_callback_id()
            self._entry_task = self._post_call(self._this, self._entry_id)
        if self._held:
            self._free_held()
        return entry

    def _entry_returned(self, raw: Any) -> bool:
        """On the isolate's thread, as the entry call returns: note it, and wake the loop
        only if the call failed or the loop waits for it. Always True (the callback id is
        this isolate's own)."""
        failure: BaseException | None = None
        try:
            self._text_or_raise(raw)  # (its value is not used: what it says, it wrote)
        except BaseException as exc:  # a termination, a memory error, a broken runtime
            failure = exc
        with self._pump_lock:
            self._entry_id = None
            self._in_flight.discard(self._entry_task)
            entry = self._entry
            if entry is None:
                return True
            entry.returned = True
            wake = failure is not None or entry.notify
        if wake and not self.closed:
            with contextlib.suppress(BaseException):  # a callback from the engine must not raise
                self._loop.call_soon_threadsafe(settle, entry.future, None, failure)  # type: ignore[union-attr]
        return True

    def _cancel_entry(self, entry: Entry) -> None:
        with self._pump_lock:
            task_id = self._entry_task if self._entry is entry and self._entry_id is not None else None
        if task_id is not None:  # (not under the lock: its callback takes the lock)
            self._raw.cancel_task(task_id)

    async def start(self, payload_json: str) -> None:
        """Start the program and wait for the call to return (see :meth:`begin`)."""
        await self.begin(asyncio.get_running_loop(), payload_json).wait_for_return()
