"""One V8 isolate, driven from the child's event loop without ever blocking it.

mini-racer runs each context's isolate on a thread of its own. A synchronous call into a
context (reading an object, building an argument array) waits until the isolate is free,
so a program that never yields would freeze the very loop that must enforce its deadline.
So, after preparation, this module only ever makes *cancelable tasks* that need no
synchronous step:

* calls take a prebuilt argument array (built once, while the isolate was idle; it holds
  the bell, which only the first call, the runtime's setup, reads);
* data goes in through a SharedArrayBuffer whose memory Python writes directly
  (UTF-16 after an 8-byte header), and the called function reads it;
* data comes out as the string result of ``pump()``, after a data-less notification (the
  bell) says there is something to take.

mini-racer's public ``MiniRacer`` evaluates its own ``setTimeout`` into every context, so the
child builds contexts from the layer under it (miniracer_internals.py, where every use of
mini-racer's private API lives) and installs its runtime instead (runtime.py).

Preparing an isolate is most of a trivial run's cost, so its steps are counted: the
isolate itself (started from the child's snapshot of the runtime: see snapshot.py), the
bell, two property reads (the runtime's boot hook, read from the bell, whose value is the
argument array; the api in it) and one call (the setup). No script is compiled.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from . import runtime
from .entry import Entry, settle_entry
from .lines import decode_lines
from .miniracer_internals import (
    INTEGER,
    UNDEFINED,
    JSEvalException,
    RawContext,
    await_drain,
    new_context,
    post_drain,
    read_text,
)
from .threads import CallbackThread, off_loop, settle

__all__ = ["Entry", "Isolate", "off_loop"]

_HEADER = 8
_START, _PUMP, _FEED, _INVOKE = 1, 2, 3, 4  # operation codes of the runtime's api()
_JOURNAL_HEADER = 16
_MAX_HELD_FREES = 256
"""Value handles held for a batched free at most (see :class:`Isolate`), so that a run that
rings the bell a great many times without a call into the isolate holds little."""
ALONE_WAIT_S = 0.001
"""How long the bell of a program's only open call waits for its answer (see _on_thread):
the time a quick tool's round trip takes, at most what the program's next step waits."""
_FREE_AFTER = 64
"""Held value handles a pump frees once there are this many (see :class:`Isolate`): two
come with every tool call, so a run of up to 31 calls frees none until its context's
teardown frees them all, and a longer one holds at most this many small values."""


def _ignore(*_: Any) -> None:
    """What a closed isolate does with a bell: nothing."""


def _loud(_out: Any) -> bool:
    """A pump's return that the loop always hears of (see :meth:`Isolate.pump_soon`)."""
    return False


class Isolate:
    """A fresh context with the runtime installed; used for exactly one run.

    Value handles are freed in batches. mini-racer frees a handle by posting a task to the
    isolate's thread, which wakes that thread when it is idle: two thread switches, for
    each pump's result and each bell, that cost a tool call more than the call itself. So
    a handle Python drops is held until a call into the isolate is posted (the thread is
    awake then) and freed right after it, once :data:`_FREE_AFTER` are held; a context's
    teardown frees what is still held. (Freeing them at every pump cost the loop a library
    call per handle.)
    """

    def __init__(self, near_data_limit: Callable[[], bool] = lambda: False) -> None:
        self._stack = contextlib.ExitStack()
        self.ctx: Any = None
        self._raw: RawContext = None  # type: ignore[assignment]  # (set by prepare)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_bell: Callable[[], None] = lambda: None
        self.closed = False
        self._drain_posted = False
        self._held: list[Any] = []
        self._near_data_limit = near_data_limit
        self._loop_thread = threading.get_ident()
        self.out_of_room = False
        """The process came too close to its data limit while this isolate ran: its run
        ends with the memory text (see :meth:`_guard`)."""
        self._in_flight: set[int] = set()
        self._thread = CallbackThread()
        self.act_now: Callable[[list[Any]], tuple[list[Any], bool]] | None = None
        """Set while a run can act on what it writes from the isolate's own thread (see
        :meth:`_on_thread`): takes the messages read there and returns what the loop is
        still to act on, in order, and whether that can wait for the loop's next read
        (True when all of it is bookkeeping of what already left)."""
        self._bell_id = -1
        self._pump_id: int | None = None
        """The callback id of the pump in the isolate (see :meth:`pump_soon`), or None."""
        self._pump_task = 0
        self._pump_lock = threading.Lock()
        self._pump_done: Callable[[Any], None] = _ignore
        self._pump_quiet: Callable[[Any], bool] = _loud
        self._journal_lock = threading.Lock()
        self._taken: list[Any] = []
        """What the isolate's thread read and left for the loop (:meth:`read_journal`)."""
        self._unreadable: Exception | None = None
        """Why the isolate's thread could not read the journal, for the loop to raise."""
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
        self._entry: Entry | None = None
        """The call that started the run or invoked the retained handler (see :meth:`begin`)."""
        self._entry_id: int | None = None
        """Its callback id while it is in the isolate, else None."""
        self._entry_task = 0

    def prepare(
        self,
        loop: asyncio.AbstractEventLoop,
        values: str,
        memory_bytes: int,
        layout: dict[str, int],
        close_first: Sequence[Isolate] = (),
    ) -> asyncio.Future[None]:
        """Create the context and set the runtime up in it with ``values`` (what the isolate
        gets of its own: :func:`boot_values`), while the child is idle; ``close_first`` are
        finished isolates to dispose first. Returns the future of it, on ``loop``.

        All of it on one trip to a worker thread, which waits for each step of the engine
        in turn: the loop wakes once, when the isolate is ready. Creating an isolate is the
        largest single cost of a run (V8 deserializing the snapshot); on the loop, it held
        up a run that arrived meanwhile even when a prepared isolate was waiting for it. As
        the loop's own tasks, the four steps after it cost a loop iteration, a future and a
        callback each; closing on a trip of its own cost two more thread switches (that merge
        alone: trivial throughput +4%, measured side by side; the steps moved here: +1%,
        within the machine's noise, and a run that arrives meanwhile finds the loop free)."""
        return off_loop(loop, self._prepare, loop, values, memory_bytes, layout, close_first)

    def _prepare(
        self,
        loop: asyncio.AbstractEventLoop,
        values: str,
        memory_bytes: int,
        layout: dict[str, int],
        close_first: Sequence[Isolate],
    ) -> None:
        per_isolate_source = runtime.per_isolate_source()  # (raises before install_runtime)
        for isolate in close_first:
            isolate.close()
        self._loop = loop
        self.ctx, free = new_context(loop, self._on_thread, self._thread)
        self._stack.callback(free)
        ctx = self.ctx
        rc = self._raw = RawContext(ctx)
        rc.hold_frees(self._hold)
        ctx.set_hard_memory_limit(memory_bytes)
        ctx.set_soft_memory_limit(max(memory_bytes * 3 // 4, 1))
        if per_isolate_source:  # no snapshot: the runtime itself first
            rc.run_now(rc.eval, rc.string(per_isolate_source))
        # Raw value handles from here on, not mini-racer's wrappers (a conversion and a
        # finalizer each): the context's teardown frees them with the rest.
        bell = self._make_bell()
        # The boot hook, read from the bell: the runtime takes the bell (the hook's receiver)
        # and returns the argument array of every call, [api].
        self._argv = rc.get(bell, rc.string(runtime.BOOT_HOOK))
        # argv[0] through mini-racer's JSArray asks the engine for the length first: one
        # more synchronous trip to the isolate's thread (two thread switches) per isolate.
        self._api = rc.get(self._argv, rc.alloc_int(0, INTEGER))
        self._this = rc.alloc_int(0, UNDEFINED)
        self._park_this = rc.alloc_int(1, INTEGER)  # `this` of a park (see runtime.js)
        self._take_this = rc.alloc_int(2, INTEGER)  # `this` of a take
        # The first call is the runtime's setup, with the isolate's own values as `this`:
        # it returns the channel. Every later call passes `undefined` (or a number) and the
        # same array, which it ignores.
        channel: Any = rc.run_now(rc.call_function, self._api, rc.string(values), self._argv)
        self._control = channel[0:16]
        self._inbound = channel[layout["inbound"] : layout["journal"]]
        self._journal = channel[layout["journal"] : layout["sync"]]
        self._sync = channel[layout["sync"] : layout["total"]]
        # Capacities are the runtime's, not the regions' byte lengths (alignment pads them):
        # writing past what the runtime's views cover would lose text at chunk boundaries.
        self._capacity = layout["inbound_units"]
        self._sync_capacity = layout["sync_units"]
        self._journal_read = 0

    def _make_bell(self) -> Any:
        """The bell: a notification (mini-racer's one-way callback) whose callback id this
        isolate knows, so that its thread can keep quiet the rings the loop need not hear
        of (see :meth:`_on_thread`)."""
        callbacks = self._raw.callbacks
        self._bell_id = self._new_callback_id()
        callbacks[self._bell_id] = self._ring
        self._stack.callback(callbacks.pop, self._bell_id, None)
        return self._raw.make_js_callback(self._bell_id)

    def _ring(self, value_handle: Any) -> None:
        # The notification's argument array is never read: reading needs the isolate.
        del value_handle
        self.on_bell()

    def _on_thread(self, callback_id: int, raw: Any) -> bool:
        """First in every callback, on the isolate's thread, while the program waits for
        it: the memory guard (not in a pump's return), then what the program wrote since
        the last read, handed to :attr:`act_now`. A tool call then leaves for the host from
        the thread that rang the bell, instead of a loop turn later (the hop cost a call
        ~100 us, 13% of its round trip in a slow phase of this machine); the loop still
        does everything else with the messages, in order, from :meth:`read_journal`.

        Then whether the loop must hear of this callback at all (False: mini-racer's own
        hand-off to the loop follows). A pump's return is dealt with here (see
        :meth:`pump_soon`); a bell for messages that all left from here (tool calls: the
        loop only has to open them, which its next read of the journal does, at the reply
        or the clock) is kept quiet, unless the journal is full or memory ran short. So a
        chain of tool calls wakes the loop once per call, for the reply, not three times
        (the reply, the bell, the pump's return: mini-racer reports a call's return before
        the program's continuation runs, so the bell of the next call comes after it)."""
        if callback_id == self._park_id:
            return self._park_returned(raw)
        if callback_id == self._take_id:
            return self._take_returned(raw)
        if callback_id == self._entry_id:
            self._guard()
            self._act_on_journal()
            self._await_sent(lone=False)
            return self._entry_returned(raw)
        if callback_id == self._pump_id:
            # No memory guard here: the program's continuation runs after this return
            # whatever the guard finds (the pump's task is complete: there is nothing to
            # cancel), and what it would mark is acted on at the next bell or the 10 ms
            # poll, which read the process's size themselves. A read of /proc/self/statm
            # per call saved (~6.5 us of the isolate's thread, of ~200 us a call).
            quiet = self._act_on_journal()
            self._await_sent(lone=False)
            return self._pump_returned(raw, quiet)
        waiting = 0
        if callback_id == self._bell_id and not self.closed:
            (waiting,) = struct.unpack_from("<i", self._control, 4)
        if waiting == 1:
            # The park's bell (runtime.js, park): the program has nothing to run. No memory
            # guard, as in a pump's return: the continuations run after it whatever the
            # guard finds, and the next bell or the 10 ms poll checks.
            (wait_ms,) = struct.unpack_from("<i", self._control, 8)
            self.park_wait(wait_ms / 1000)
            self._held.append(raw)
            return True
        self._guard()
        quiet = self._act_on_journal()
        self._await_sent(lone=waiting == 2 and quiet)
        if callback_id == self._bell_id and quiet and not (self.out_of_room or self.journal_full()):
            self._held.append(raw)  # freed with the held handles, unwrapped (see _pump_returned)
            return True
        return False

    def _act_on_journal(self) -> bool:
        """Hand what the program wrote since the last read to :attr:`act_now` (see
        :meth:`_on_thread`); whether what is left for the loop can wait for its next read.
        An unreadable journal is kept for the loop's next read to raise (ending the run)."""
        act_now = self.act_now
        if act_now is None or self.closed:
            return False
        with self._journal_lock:
            if self.closed:
                return False
            try:
                messages = self._read_journal()
            except Exception as exc:
                self._unreadable = exc
                return False
            if not messages:
                return True
            taken, quiet = act_now(messages)
            self._taken.extend(taken)
            return quiet

    def _guard(self) -> None:
        """Before each callback from the isolate but a pump's return (a bell, a finished
        task: see :meth:`_on_thread`): if the process has come too close to its data
        limit, stop the program now, on its own thread, before it allocates again. At the
        limit itself the engine can abort the process over an allocation of its own,
        which would cost the run its memory text."""
        try:
            if self.out_of_room or not self._near_data_limit():
                return
            self.out_of_room = True
            for task_id in list(self._in_flight):
                self._raw.cancel_task(task_id)
        except Exception:  # MemoryError at the limit, say: the 10 ms poll checks again
            pass

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
            task = asyncio.ensure_future(self._write_units(data, _PUMP))
            self._pump_tasks.add(task)

            def finished(t: asyncio.Task[Any]) -> None:
                self._pump_tasks.discard(t)
                if not t.cancelled() and not self.closed:
                    exc = t.exception()
                    pumped(exc if exc is not None else t.result())

            task.add_done_callback(finished)
            return
        self._put(data, units)
        struct.pack_into("<i", self._control, 0, _PUMP)
        with self._pump_lock:  # the return may come to the isolate's thread before the id is kept
            self._pump_done = pumped
            self._pump_quiet = quiet
            self._pump_id = self._new_callback_id()
            self._pump_task = self._post_call(self._this, self._pump_id)
        if len(self._held) >= _FREE_AFTER:
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

    def deliver_now(self, inbox_json: str) -> bool:
        """In a bell, on the isolate's thread: put ``inbox_json`` into the inbound channel for
        the runtime to deliver as the bell returns; False if it does not fit (the loop's
        pump takes it)."""
        data = inbox_json.encode("utf-16-le", "surrogatepass")
        units = len(data) // 2
        if units > self._capacity or self.closed:
            return False
        self._put(data, units)
        struct.pack_into("<i", self._control, 12, 1)
        return True

    def delivering(self) -> bool:
        """Whether the inbound channel holds answers a bell put there (:meth:`deliver_now`)
        that the runtime has not taken yet."""
        return not self.closed and struct.unpack_from("<i", self._control, 12)[0] != 0

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
            await self._call(_FEED)
            offset += cap
        self._put(data[offset * 2 :], units - offset)
        return await self._call(then)

    def _put(self, chunk: bytes, units: int) -> None:
        view = self._inbound
        view[_HEADER : _HEADER + len(chunk)] = chunk
        struct.pack_into("<i", view, 0, units)

    def begin(self, loop: asyncio.AbstractEventLoop, payload_json: str, *, invoke: bool = False) -> Entry:
        """Post the call that starts the program (``payload_json`` is ``[code, providers,
        network, retain, bundle]``) or, with ``invoke``, calls the retained handler
        (``[plain_request, network]``); on the loop. See :class:`Entry` for its return. A
        payload too large for one feed goes in several, as a task."""
        op = _INVOKE if invoke else _START
        entry = Entry(self, loop.create_future())
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

    def read_journal(self) -> list[Any]:
        """Messages written since the last read (after what the isolate's thread read and
        left for the loop). Needs no isolate: safe while it is busy."""
        with self._journal_lock:
            if self._unreadable is not None:
                exc, self._unreadable = self._unreadable, None
                self._taken = []
                raise exc
            if not self._taken:
                return self._read_journal()
            taken, self._taken = self._taken, []
            return taken + self._read_journal()

    def _read_journal(self) -> list[Any]:
        """The journal's new messages (under the journal lock). The bell is re-armed
        *before* the write index is read, so a message written after this read always
        rings again."""
        view = self._journal
        struct.pack_into("<i", view, 4, 0)
        (written,) = struct.unpack_from("<i", view, 0)
        if written <= self._journal_read:
            return []
        raw = bytes(view[_JOURNAL_HEADER + 2 * self._journal_read : _JOURNAL_HEADER + 2 * written])
        self._journal_read = written
        # (the codec's own function: bytes.decode reaches UTF-16-LE through a Python wrapper)
        return decode_lines(codecs.utf_16_le_decode(raw, "surrogatepass", True)[0])

    def answer_sync(self, seq: int, text: str) -> None:
        """Answer the isolate's synchronous request ``seq`` (it polls the sequence word)."""
        data = text.encode("utf-16-le", "surrogatepass")
        units = len(data) // 2
        if units > self._sync_capacity:
            raise ValueError(f"a synchronous answer of {units} units does not fit")
        view = self._sync
        view[_JOURNAL_HEADER : _JOURNAL_HEADER + len(data)] = data
        struct.pack_into("<i", view, 4, units)
        struct.pack_into("<i", view, 0, seq)  # last: the isolate reads the answer after this

    def journal_full(self) -> bool:
        """Whether later messages wait in the outbox (taken with :meth:`pump_soon`)."""
        (full,) = struct.unpack_from("<i", self._journal, 8)
        return bool(full == 1)

    async def responsive(self, within_s: float) -> bool:
        """Whether the engine still answers (after a cancel it may be wedged for good)."""
        try:
            await asyncio.wait_for(self.ctx.eval_cancelable("0"), within_s)
        except Exception:  # a timeout or a terminated engine: either way, not answering
            return False
        return True

    def memory_limit_reached(self) -> bool:
        return bool(self.ctx.was_hard_memory_limit_reached())

    def drain_soon(self) -> None:
        """Post the drain that :meth:`close` waits for, now: for an isolate whose run is over
        and to which nothing more is posted, so that its thread finishes while the child
        does other things, and closing it later does not wait (one wake of the isolate's
        thread off the next preparation's path, which closes it first). Once per isolate."""
        if self.ctx is not None and not self._drain_posted:
            self._drain_posted = True
            self._thread.let_go()
            post_drain(self._raw)

    def close(self) -> None:
        """Dispose the isolate. Only call when it is responsive (a wedged one never returns)."""
        if not self.closed:
            with self._journal_lock:  # not while the isolate's thread reads the journal
                self.closed = True
                self.act_now = None
            self._held = []  # the context's teardown frees them
            for name in ("_control", "_inbound", "_journal", "_sync"):
                setattr(self, name, memoryview(b""))
            if self.ctx is not None:
                self.drain_soon()
                await_drain(self._raw)
            self._stack.close()
            # Undo the links that made the isolate, its context and its run one cycle (the
            # context freed through this isolate, the bell held the run's state, the
            # context's queue holds a handle to it), so that reference counting frees them
            # at once: the collector found ~80 objects of each trivial run in cycles, now none.
            self.on_bell = _ignore
            self._entry = None  # (it points back at this isolate)
            if self.ctx is not None:
                # Whatever is left on its queue holds a handle that points back at the context.
                self._raw.forget()
