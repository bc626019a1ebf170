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
import contextlib
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from . import runtime
from .channel import Channel
from .entry import Entry
from .miniracer_internals import (
    INTEGER,
    UNDEFINED,
    RawContext,
    await_drain,
    new_context,
    post_drain,
)
from .posted import EntryCall, PostedCalls
from .threads import CallbackThread, off_loop

__all__ = ["Entry", "Isolate", "off_loop"]


def _ignore(*_: Any) -> None:
    """What a closed isolate does with a bell: nothing."""


class Isolate(EntryCall, PostedCalls):
    """A fresh context with the runtime installed; used for exactly one run.

    Value handles are freed in batches. mini-racer frees a handle by posting a task to the
    isolate's thread, which wakes that thread when it is idle: two thread switches, for
    each pump's result and each bell, that cost a tool call more than the call itself. So
    a handle Python drops is held until a call into the isolate is posted (the thread is
    awake then) and freed right after it, once ``posted.FREE_AFTER`` are held; a context's
    teardown frees what is still held (freeing them at every pump cost the loop a library
    call per handle).
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
        self._init_posted()
        self._init_entry()
        self._channel = channel = Channel()
        # The channel's own methods, bound: no call in between (see channel.py).
        self.read_journal = channel.read_journal
        self.answer_sync = channel.answer_sync
        self.journal_full = channel.journal_full
        self.deliver_now = channel.deliver_now
        self.delivering = channel.delivering
        self._put = channel.put
        self._control = channel.control
        self._capacity = 0

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
        the loop's own tasks, the steps after it cost a loop iteration, a future and a
        callback each, and closing on a trip of its own two more thread switches."""
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
        shared: Any = rc.run_now(rc.call_function, self._api, rc.string(values), self._argv)
        channel = self._channel
        channel.attach(shared, layout)
        self._control = channel.control
        self._capacity = channel.capacity

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
        the thread that rang the bell, instead of a loop turn later (a thread hop per call);
        the loop still does everything else with the messages, in order, from
        :meth:`read_journal`.

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
            # poll, which read the process's size themselves: a read of /proc/self/statm
            # per call saved.
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
        channel = self._channel
        with channel.lock:
            if self.closed:
                return False
            try:
                messages = channel.read_new()
            except Exception as exc:
                channel.unreadable = exc
                return False
            if not messages:
                return True
            taken, quiet = act_now(messages)
            channel.taken.extend(taken)
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
            with self._channel.lock:  # not while the isolate's thread reads the journal
                self.closed = True
                self.act_now = None
            self._held = []  # the context's teardown frees them
            self._channel.detach()
            self._control = self._channel.control
            if self.ctx is not None:
                self.drain_soon()
                await_drain(self._raw)
            self._stack.close()
            # Undo the links that made the isolate, its context and its run one cycle (the
            # context freed through this isolate, the bell held the run's state, the
            # context's queue holds a handle to it), so that reference counting frees them
            # at once, not the cyclic collector (which found every trivial run's objects).
            self.on_bell = _ignore
            self._entry = None  # (it points back at this isolate)
            if self.ctx is not None:
                # Whatever is left on its queue holds a handle that points back at the context.
                self._raw.forget()
