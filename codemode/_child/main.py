"""The child process: one isolate at a time, supervised by the host's pool.

Started by the host with ``python -m codemode._child`` (spawn, never fork). It sets its
own backstops before V8 loads (parent-death signal, ``RLIMIT_DATA``), probes the engine
behaviours it depends on, answers ``Ready``, and then serves runs. A standby child (the
pool's spare) stops after loading V8 until the host's ``Adopt`` names its slot and core::

    host ──Run──▶ child: take the prepared isolate, start(code)
                   isolate ──bell──▶ child ──pump()──▶ isolate   (outbox as one string)
    host ◀──Call── child                        (a tool call: three strings)
    host ──Reply─▶ child ──pump(inbox)──▶ isolate
    host ◀──Done── child: dispose the isolate, prepare the next one while idle

Its clock is the host's (``CLOCK_MONOTONIC`` is shared by every process on the machine),
so the deadline it enforces is the one the host set. If the engine cannot be stopped (a
loop after an ``await``), it reports the timeout first and then exits; the host replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
import os
import resource
import secrets
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _loops, _texts
from .._mark import ChildMark, open_mark
from .._outcome import LogEntry
from .._protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    Adopt,
    Call,
    Cancel,
    Done,
    Fetch,
    FrameTooLarge,
    HostMessage,
    Idle,
    Invoke,
    PipeFrames,
    Ready,
    Recycle,
    Release,
    Reply,
    Run,
    Shutdown,
    Started,
    Waiting,
    encode_frame,
)
from .._request import Provider
from .lines import decode_lines

if TYPE_CHECKING:
    from .engine import Entry

MB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")
MEMORY_POLL_S = 0.01
"""How often a running isolate's heap flag and the process RSS are checked."""
WEDGE_PROBE_S = 0.25
"""How long a cancelled engine gets to answer before the child gives up on it."""
MAX_TIMERS = 10_000
INBOUND_UNITS = 64 * 1024
"""UTF-16 units of each isolate's inbound buffer; larger texts go in several feeds."""
LOG_BUDGET_MESSAGES = 4
"""A run's logs carry at most this many message ceilings of text (4 MB by default)."""
BUNDLE_CACHE = 64
"""Module bundles a child keeps (the host sends each once per child, then names it)."""
SYNC_UNITS = 128 * 1024
"""UTF-16 units of each isolate's synchronous-answer buffer (every stdlib module fits)."""
SYNC_TIMEOUT_MS = 5_000
"""How long an isolate waits for a synchronous answer before it throws."""
JOURNAL_UNITS = 256 * 1024
"""UTF-16 units of outbound journal per isolate; later messages travel in the outbox."""
USER_AGENT = "codemode/0.1"
COPIER_REQUEST = "codemode:copier"
"""What an isolate's synchronous request for the long-line copier (copier.js) names: not a
module of the standard library, so no program reaches it through a global."""
DISPOSE_TIMEOUT_S = 2.0
"""How long disposing an isolate may take before the child gives up and recycles."""
SETTLE_GRACE_S = 0.005
"""How long a result waits for the call that produced it to return (see Child.finish)."""
SPARE_ISOLATES = 2
"""Isolates a child keeps prepared. Preparing one costs more CPU than a trivial run, so
with one spare, runs arriving back to back waited for it; a second covers the gap. Each
costs ~2 MB resident (counted in the child's baseline)."""


def _layout() -> dict[str, int]:
    """Byte offsets of the channels inside each isolate's one SharedArrayBuffer."""
    inbound = 16
    journal = inbound + 8 + 2 * INBOUND_UNITS
    journal += -journal % 16
    sync = journal + 16 + 2 * JOURNAL_UNITS
    sync += -sync % 16
    total = sync + 16 + 2 * SYNC_UNITS
    return {
        "inbound": inbound,
        "journal": journal,
        "sync": sync,
        "total": total,
        "inbound_units": INBOUND_UNITS,
        "journal_units": JOURNAL_UNITS,
        "sync_units": SYNC_UNITS,
    }


LAYOUT = _layout()


_STATM: int | None = None
_RSS_FIELD, _DATA_FIELD = 1, 5
"""Where ``/proc/self/statm`` keeps the resident pages and the data segment's pages."""


def _statm() -> list[bytes]:
    """The fields of ``/proc/self/statm``, in pages. Read a few times per run and every 10 ms
    while one is running, so the file stays open (a ``pread`` instead of open, read, close)."""
    global _STATM
    if _STATM is None:
        _STATM = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    return os.pread(_STATM, 128, 0).split()


def _rss_and_data_bytes() -> tuple[int, int]:
    """The child's resident memory and its data segment (the writable private memory
    ``RLIMIT_DATA`` counts, touched or not: untouched ArrayBuffers are there, not in the
    resident memory), from one read."""
    fields = _statm()
    return int(fields[_RSS_FIELD]) * _PAGE, int(fields[_DATA_FIELD]) * _PAGE


def _rss_bytes() -> int:
    """The child's resident memory."""
    return _rss_and_data_bytes()[0]


def data_limit_bytes(memory_limit_mb: int) -> int:
    """The child's ``RLIMIT_DATA``. V8 needs about 1 GB of data segment to start (a child
    with its spare isolates measured ~570 MB); the heap bound comes on top, twice over for
    ArrayBuffers."""
    return (1024 + 2 * memory_limit_mb) * MB


DATA_HEADROOM = 96 * MB
"""A run whose process comes this close to its data limit ends with the memory text.
Right at the limit every allocation fails, and some of the engine's (an allocator's
bookkeeping, a garbage collection's copy) abort the whole process, often with nothing on
stderr: the host could only report a crash. A program gets there by holding untouched
ArrayBuffers until allocation fails (the limit then lies less than one buffer away), so
the headroom is larger than the buffers such a loop takes in one step."""


def _malloc_trim() -> None:
    """Hand freed heap pages back to the system (glibc keeps them otherwise), so the
    resident-memory bound measures what the next run uses, not what the last one freed."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)


def _set_parent_death_signal() -> None:
    """Die with the host even if it is SIGKILLed (Linux prctl PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the host died before prctl took effect
            os._exit(0)


def _no_core_dumps() -> None:
    """Never write a core file, whatever limits the host runs under.

    A program can end its child with a signal (V8 aborts at its memory bounds), and the
    child's address space is V8's reservations: about 1.4 TB virtual, hundreds of MB
    resident. Where the host's core limit allows a dump, the kernel wrote one into the
    host's working directory for seconds, holding the child's pipes open all the while,
    so its exit (and its replacement) waited on the disk. The limit stops a dump to a
    file; not being dumpable stops one piped to a crash collector too (which the limit
    does not), and keeps other processes of the same user from attaching to a process
    that runs untrusted code."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def _freeze_startup_objects() -> None:
    """Keep the collector's oldest generation off what the child built to start.

    The imports, V8's bindings and the standard library's sources leave ~23,000 objects
    that live as long as the child does; every collection of the oldest generation walked
    them all again (5-12 ms, inside whichever run set it off). Frozen, they are never
    walked; the younger generations, which collect what runs leave behind, are unchanged."""
    gc.collect()
    gc.freeze()


def _pin_to(cpu: str) -> None:
    """Run on one core (the host's choice, see codemode/_placement.py), before any isolate
    starts its thread: every thread started later inherits the mask. Threads that already
    exist (a standby child has loaded V8 before it learns its core) are pinned one by one.

    The threads keep the host's scheduling policy. SCHED_BATCH halved a trivial run's
    thread switches on a quiet machine, but a batch thread never preempts what runs on its
    core: beside one busy neighbour process, every wake-up of a tool call waited out the
    neighbour's slice, and 10 tool calls took 19-20 ms against 3.5-3.9 (benchmarks/README.md)."""
    if cpu == "any":
        return
    with contextlib.suppress(ValueError, OSError):  # not allowed any more: run anywhere
        for tid in os.listdir("/proc/self/task") if sys.platform.startswith("linux") else ["0"]:
            os.sched_setaffinity(int(tid), {int(cpu)})


def _await_adoption(proto_in: int, proto_out: int) -> Adopt:
    """A standby child's wait, engine loaded, for the slot it is to take: it says Waiting,
    then blocks on the protocol pipe (nothing else runs in the process yet). The host's
    Shutdown, or its going away, ends the process."""
    decoder = msgspec.msgpack.Decoder(HostMessage)
    os.write(proto_out, encode_frame(Waiting()))  # a few bytes: one write, never partial

    # Exactly one frame's bytes at a time, not PipeFrames' chunks: whatever follows Adopt
    # is for the loop's reader, which starts after this returns.
    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = os.read(proto_in, n - len(data))
            if not chunk:
                os._exit(0)  # the host is gone
            data += chunk
        return data

    while True:
        (size,) = FRAME_HEADER.unpack(read(FRAME_HEADER.size))
        if size > MAX_FRAME_BYTES:
            os._exit(3)
        message = decoder.decode(read(size))
        if isinstance(message, Adopt):
            return message
        if isinstance(message, Shutdown):
            os._exit(0)


def _texts_for(max_message_bytes: int) -> dict[str, str]:
    return {
        "entryForm": _texts.ENTRY_FORM,
        "resultBad": (
            "The program's return value cannot cross to the host as JSON data. Return plain "
            "objects, arrays, strings, numbers, booleans or null."
        ),
        "resultCycle": (
            "The program's return value cannot cross to the host: it contains a cycle. "
            "Return a tree of plain data instead"
        ),
        "resultCeiling": _texts.message_ceiling_text("return value", max_message_bytes),
        "argsCeiling": _texts.message_ceiling_text("tool call's argument list", max_message_bytes),
        "fetchCeiling": _texts.message_ceiling_text("outbound request", max_message_bytes),
        "logTruncated": (
            f" ... [truncated: a log line may carry at most {_texts.format_bytes(max_message_bytes)}]"
        ),
        "logsDropped": "[codemode] {n} more log entries were dropped: a run keeps at most " + "{kept}.",
        "badEnvelope": (
            "the host's dispatch answered with something that is not a tool envelope "
            '({"result": ...} or {"error": "..."}).'
        ),
        "runEnded": "This run has already ended; nothing more can leave it.",
        "networkDisabled": _texts.NETWORK_DISABLED,
        "timerFlood": f"Too many pending timers: a run may keep at most {MAX_TIMERS}.",
        "handlerResponse": "The request handler must return (or resolve to) a Response.",
        "responseCeiling": _texts.message_ceiling_text("response", max_message_bytes),
    }


TAMPERED = (
    "The run's runtime was tampered with: a message it sent is malformed, so the run was "
    "stopped. Leave the runtime's own objects alone."
)
_SHAPES: dict[str, tuple[tuple[type, ...], ...]] = {
    "l": ((str,), (str,)),
    "s": ((int,), (str,)),
    "c": ((int,), (str,), (str,), (str,)),
    "f": ((int,), (str,)),
    "d": ((str, type(None)),),
    "D": (),
    "e": ((str,), (str,)),
    "h": (),
}
"""Each message's types after its tag, exactly: lines are decoded to plain lists, strings
and ints (``type(v) is int`` also keeps ``true`` out, which ``isinstance`` lets in)."""


def _well_shaped(m: Any) -> bool:
    if type(m) is not list or not m or type(m[0]) is not str:
        return False
    shape = _SHAPES.get(m[0])
    if shape is None or len(m) != len(shape) + 1:
        return False
    i = 1
    for kinds in shape:  # (every tool call's line comes through here)
        if type(m[i]) not in kinds:
            return False
        i += 1
    return True


class SentCall:
    """A tool call the isolate's thread sent to the host (``Child.send_calls_now``): the
    loop only opens it. Not JSON, so nothing the isolate writes can pose as one."""

    __slots__ = ("at", "call_id")

    def __init__(self, call_id: int, at: float) -> None:
        self.call_id = call_id
        self.at = at
        """When it left (``time.monotonic()``): the loop may open it much later."""


class RunState:
    """Everything one run owns in the child; discarded with its isolate."""

    def __init__(self, msg: Run | Invoke, isolate: Any) -> None:
        self.msg = msg
        self.isolate = isolate
        self.logs: list[LogEntry] = []
        self.inbox: list[list[Any]] = []
        self.open_calls: set[int] = set()
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self.done = False
        self.finished = asyncio.Event()
        self.entry: Entry | None = None
        """The call that started the run or invoked the retained handler (see serve)."""
        self.pumping = False
        """A pump call is in the isolate: replies that arrive meanwhile wait for its return."""
        self.pump_lock = threading.Lock()
        """Held to test and set :attr:`pumping`: a pump's return may clear it from the
        isolate's thread (:meth:`Child.pumped_quietly`)."""
        self.clock: asyncio.TimerHandle | None = None
        self.memory_check: asyncio.TimerHandle | None = None
        self.kind = "ok"
        self.settled = True
        self.log_bytes = 0
        self.logs_over_budget = 0
        self.provider_names: frozenset[str] | None = None
        """The names of the run's providers, once a call asked (see Child.call_problem)."""


class Child:
    def __init__(
        self,
        worker_id: int,
        memory_limit_mb: int,
        max_message_bytes: int,
        max_log_entries: int,
        proto_in: int,
        proto_out: int,
        *,
        probe_engine: bool = True,
        mark: ChildMark | None = None,
        replies: int | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.memory_limit_mb = memory_limit_mb
        self.max_message_bytes = max_message_bytes
        self.max_log_entries = max_log_entries
        self.max_log_bytes = LOG_BUDGET_MESSAGES * max_message_bytes
        self.proto_in = proto_in
        self.proto_out = proto_out
        self._send_lock = threading.Lock()
        """Frames go out from the loop and from an isolate's thread (send_calls_now)."""
        self.decoder = msgspec.msgpack.Decoder(HostMessage)
        self.spares: list[Any] = []
        self.spare_task: asyncio.Task[Any] | None = None
        self.serving = False
        """From taking a run off the queue until its isolate is disposed: no preparation
        starts meanwhile (see quiet)."""
        self.run: RunState | None = None
        self.rss_limit = 0
        self.data_alarm = data_limit_bytes(memory_limit_mb) - DATA_HEADROOM
        self.baseline_rss = 0
        self.residue_limit = 0
        self.stdlib_modules: dict[str, list[str]] = {}
        self.stdlib_sources: dict[str, str] = {}
        self.loop: asyncio.AbstractEventLoop
        self.runs: asyncio.Queue[Run | Invoke | Release] = asyncio.Queue()
        self.closing: set[asyncio.Task[None]] = set()
        self.finished_isolates: list[Any] = []
        """Isolates whose run ended normally, not yet disposed: the next preparation
        disposes them on its own thread trip (see engine.Isolate.prepare), or, when none comes
        first, the next run's :meth:`quiet` does."""
        self.retained: dict[int, Any] = {}
        self.handle_providers: dict[int, tuple[Provider, ...]] = {}
        self.bundles: dict[str, str] = {}
        self._static_config: str | None = None
        self.snapshot_refused: str | None = None
        """Why this child's isolates do not start from a snapshot of the runtime (None: they do)."""
        self.mark = mark
        """Where this child marks the run whose program it starts (see codemode/_mark.py);
        None: it says Started as a frame."""
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
        self.probe_engine = probe_engine
        """Whether to check the engine before Ready (the pool's first child does; its
        replacements run the same binary with the same flags and skip it)."""

    async def serve_forever(self) -> None:
        """Runs are served strictly one after another: run N+1 starts only after run N's
        isolate is disposed, so a child that recycles during a dispose never started the
        run queued behind it (the host may hand that run to another child)."""
        while True:
            msg = await self.runs.get()
            self.serving = True
            try:
                if isinstance(msg, Release):
                    isolate = self.retained.pop(msg.handle_id, None)
                    if isolate is not None:
                        await self.close_isolate(isolate)
                else:
                    await self.serve(msg)
            finally:
                self.serving = False
            self.prepare_spare()

    # ---- framing ------------------------------------------------------------------

    def send(self, message: Any) -> None:
        data = encode_frame(message)
        with self._send_lock:  # one whole frame at a time
            n = os.write(self.proto_out, data)
            if n < len(data):  # (a pipe takes a small frame whole: the rest is rare)
                view = memoryview(data)[n:]
                while view:
                    n = os.write(self.proto_out, view)
                    view = view[n:]

    async def read_messages(self) -> None:
        """Act on the host's frames as they arrive, for as long as the host is there.

        The loop reads the pipe itself, into one buffer: a frame is handled in the
        iteration that read it, with no stream or task in between (a tool call's reply is
        one frame, so this is on its hot path). A frame the child cannot act on ends the
        process with the reason on stderr: the host reports that as the child's crash."""
        frames = PipeFrames(self.proto_in)

        def readable() -> None:
            try:
                bodies = frames.read()
                if bodies is None:
                    os._exit(0)  # the host is gone: nothing left to serve
                for body in bodies:
                    self.handle(self.decoder.decode(body))
            except FrameTooLarge:
                os._exit(3)
            except Exception:
                traceback.print_exc()
                os._exit(3)

        self.loop.add_reader(frames.fd, readable)
        await self.loop.create_future()  # the process ends in os._exit

    def handle(self, message: HostMessage) -> None:
        match message:
            case Run() | Invoke() | Release():
                self.runs.put_nowait(message)
            case Reply(run_id=run_id, call_id=call_id, body=body):
                state = self.run
                if state is None or state.msg.run_id != run_id or state.done:
                    return  # stale: the run it answered has ended
                # The call may have left from the isolate's thread (send_calls_now): its
                # opening is in the journal's taken messages, read here first (under the
                # journal's lock, so never half-written).
                if not self.read_journal_into(state):
                    return
                self.close_calls(state, (call_id,))
                state.inbox.append([call_id, body])
                self.pump(state, journal_read=True)
            case Cancel(run_id=run_id, reason=reason):
                state = self.run
                if state is not None and state.msg.run_id == run_id and not state.done:
                    if reason == "timeout":
                        self.finish(state, "timeout", error=_texts.timeout_text(state.msg.timeout_ms))
                    else:
                        self.finish(state, "throw", error=reason)
            case Shutdown():
                os._exit(0)

    # ---- isolates -----------------------------------------------------------------

    def install_runtime(self) -> None:
        """Make the runtime, configured for this child, part of every isolate it will
        create (into a startup snapshot, unless CODEMODE_CHILD_SNAPSHOT=off or the engine's
        build does not allow one: see snapshot.py). Once, before the first isolate."""
        from . import engine

        snapshot = os.environ.get("CODEMODE_CHILD_SNAPSHOT", "on") != "off"
        self.snapshot_refused = engine.install_runtime(
            self.config_json(), self.stdlib_sources, snapshot=snapshot
        )

    def boot_values(self) -> str:
        """What each isolate gets of its own, for its runtime's setup: a random seed and
        its time origin."""
        from . import engine

        return engine.boot_values(secrets.token_hex(32), time.time() * 1000)

    def config_json(self) -> str:
        """The runtime's configuration: the child's settings, the same for every isolate
        (encoded once)."""
        if self._static_config is None:
            texts = _texts_for(self.max_message_bytes)
            texts["logsDropped"] = texts["logsDropped"].replace("{kept}", str(self.max_log_entries))
            texts["memory"] = _texts.memory_text(self.memory_limit_mb)
            self._static_config = msgspec.json.encode(
                {
                    "maxMessageBytes": self.max_message_bytes,
                    "maxLogEntries": self.max_log_entries,
                    "maxTimers": MAX_TIMERS,
                    "inboundUnits": INBOUND_UNITS,
                    "journalUnits": JOURNAL_UNITS,
                    "syncUnits": SYNC_UNITS,
                    "layout": LAYOUT,
                    "syncTimeoutMs": SYNC_TIMEOUT_MS,
                    "texts": texts,
                    "userAgent": USER_AGENT,
                    "copierRequest": COPIER_REQUEST,
                    "modules": self.stdlib_modules,
                }
            ).decode()
        return self._static_config

    async def new_isolate(self) -> Any:
        isolate, preparing = self.preparing_isolate(())
        await preparing
        return isolate

    def preparing_isolate(self, close_first: Sequence[Any]) -> tuple[Any, asyncio.Future[None]]:
        """A new isolate and the future of its preparation on the engine thread (after
        ``close_first`` are disposed there)."""
        from .engine import Isolate

        isolate = Isolate(self.near_data_limit)
        return isolate, isolate.prepare(
            self.loop, self.boot_values(), self.memory_limit_mb * MB, LAYOUT, close_first
        )

    def near_data_limit(self, data_bytes: int | None = None) -> bool:
        """Whether this process is within DATA_HEADROOM of its data limit (``data_bytes``: its
        data segment as just read, else read now: the memory guard asks at every bell)."""
        if data_bytes is None:
            data_bytes = int(_statm()[_DATA_FIELD]) * _PAGE  # (one read, no helper: every bell)
        return data_bytes > self.data_alarm

    def prepare_spare(self) -> None:
        """Refill the stock of prepared isolates, one preparation at a time, between runs."""
        if self.spare_task is None and not self.serving and len(self.spares) < SPARE_ISOLATES:
            self.spare_task = asyncio.ensure_future(self._prepare_spare())

    async def _prepare_spare(self) -> None:
        try:
            # An isolate that cannot get memory while it is being created takes the process
            # down, and the last one may hold the process's data limit until it is gone.
            await self.disposed()
            close_first, self.finished_isolates = self.finished_isolates, []
            isolate, preparing = self.preparing_isolate(close_first)
            if close_first:
                # Disposing stays bounded as it was on a trip of its own (see close_isolate);
                # the creation that follows on the same trip takes ~1 ms of the bound.
                await asyncio.wait_for(preparing, DISPOSE_TIMEOUT_S)
            else:
                await preparing
        except TimeoutError:
            self.send(Recycle("the isolate could not be disposed"))
            os._exit(0)
        except Exception:
            return  # the next run creates its own, and reports what stops it
        finally:
            self.spare_task = None
        self.spares.append(isolate)
        self.prepare_spare()

    async def disposed(self) -> None:
        """Wait until every isolate being disposed on a thread of its own is gone. What one
        holds is not free before that, and not all of it shows as resident memory:
        WebAssembly memory grown to the data limit is committed, not touched. (Finished
        isolates that wait for the next preparation are disposed by it, first thing.)"""
        if self.closing:
            await asyncio.wait(set(self.closing))

    async def quiet(self) -> None:
        """Wait until no other isolate is being disposed or created, so that nothing but the
        run allocates in the engine while it runs. A program that takes the process to its
        data limit must fail alone, with its memory error: an isolate being created at that
        moment cannot get memory, and V8 aborts the whole process for that (SIGABRT, nothing
        on stderr), which the host could only report as a crash."""
        await self.disposed()
        if self.spare_task is not None:
            await asyncio.wait({self.spare_task})
        while self.finished_isolates:  # no preparation came to dispose them
            await self.close_isolate(self.finished_isolates.pop())

    async def take_isolate(self) -> Any:
        if self.spares:
            return self.spares.pop(0)
        return await self.new_isolate()

    # ---- one run ------------------------------------------------------------------

    async def serve(self, msg: Run | Invoke) -> None:
        # What the last run's isolate holds must not count against this run, and no
        # preparation may compete with it for memory.
        await self.quiet()
        if _rss_bytes() > self.residue_limit:
            # The last run's memory is not back yet. A child that stays bloated recycles
            # before this run starts (the host retries it elsewhere).
            _malloc_trim()
            if _rss_bytes() > self.residue_limit:
                self.send(Recycle("resident memory stayed high between runs"))
                os._exit(0)
        if isinstance(msg, Invoke):
            isolate = self.retained.get(msg.handle_id)
            if isolate is None:
                self.send(Done(msg.run_id, "lost", error="The retained isolate is gone."))
                return
            payload = msgspec.json.encode([msgspec.json.decode(msg.request_json), msg.network]).decode()
        else:
            isolate = await self.take_isolate()
            bundle = None
            if msg.modules_key:
                if msg.modules_bundle is not None:
                    self.bundles[msg.modules_key] = msg.modules_bundle
                    while len(self.bundles) > BUNDLE_CACHE:
                        self.bundles.pop(next(iter(self.bundles)))
                bundle = self.bundles.get(msg.modules_key)
            payload = msgspec.json.encode(
                [msg.code, [[p.name, list(p.tools)] for p in msg.providers], msg.network, msg.retain, bundle]
            ).decode()
        state = RunState(msg, isolate)
        self.run = state
        # (partials, not lambdas: act_now and park_wait are on every tool call's path, and a
        # partial adds no Python frame)
        isolate.on_bell = functools.partial(self.take_journal, state)
        isolate.act_now = functools.partial(self.send_calls_now, state)
        isolate.took = lambda text: self.loop.call_soon_threadsafe(self.took, state, text)
        if self.replies is not None:
            isolate.park_wait = functools.partial(self.park_wait, state)
            isolate.park_done = functools.partial(self.park_done, state)
        self.check_clock(state)
        state.memory_check = self.loop.call_later(MEMORY_POLL_S, self.check_memory, state)
        if self.mark is not None:
            self.mark.mark(msg.run_id)  # what Started says, without waking the host for it
        else:
            self.send(Started(msg.run_id))
        state.entry = isolate.begin(self.loop, payload, invoke=isinstance(msg, Invoke))
        state.entry.future.add_done_callback(lambda f: self._start_done(state, f))
        await state.finished.wait()
        for timer in (state.clock, state.memory_check):
            if timer is not None:
                timer.cancel()
        isolate.cancel_pumps()
        await self.dispose(state)

    def _start_done(self, state: RunState, future: asyncio.Future[None]) -> None:
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
        self.finish(state, "memory", error=_texts.memory_text(self.memory_limit_mb))

    def on_loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A callback that raised MemoryError (mini-racer turning a pump's result into a
        string, say) would leave its run waiting for an answer that never comes, until the
        clock ends it: end the run with its memory text instead (the child then recycles)."""
        state = self.run
        if isinstance(context.get("exception"), MemoryError) and state is not None and not state.done:
            self.finish_out_of_memory(state)
            return
        loop.default_exception_handler(context)

    def take_journal(self, state: RunState) -> None:
        """The bell rang: act on what the isolate wrote, right in the bell's callback (no
        isolate call is needed for that), and call the isolate only if it has to be: replies
        to deliver, or an outbox to drain once the journal is full."""
        if state.isolate.out_of_room:
            self.finish_out_of_memory(state)
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
            self.finish(state, "throw", error=text)
            return False
        return not state.done

    def pump(self, state: RunState, *, journal_read: bool = False) -> None:
        """Call into the isolate if it has to be: to deliver replies, or to drain the
        outbox once the journal is full. One pump at a time: what arrives while one is in
        the isolate goes in when it returns (see pumped).

        This is a tool call's hot path, so it is callbacks, not a task: a reply is in the
        isolate within the loop iteration that read it, and a pump's return is acted on
        within the iteration that learned of it."""
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
            inbox, state.inbox = state.inbox, []  # (a park may add to it: see deliver_parked)
        inbox_json = msgspec.json.encode(inbox).decode() if inbox else ""
        self.wake_park()  # the pump's task waits behind a park
        state.isolate.pump_soon(
            inbox_json, lambda out: self.pumped(state, out), lambda out: self.pumped_quietly(state, out)
        )

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
            got = self.take_replies(state, replies, read=False) if self._early else []
            if not got:
                select.select([replies.fd, self._wake_r], [], [], max(timeout_s, 0.0))
                if state.done:
                    return False
                got = self.take_replies(state, replies)
        finally:
            with self._park_lock:
                self._parked = False
                woken, self._woken = self._woken, False
            if woken:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
        return bool(got) and self.deliver_parked(state, got)

    def take_replies(self, state: RunState, replies: PipeFrames, *, read: bool = True) -> list[list[Any]]:
        """The answers for this run the reply pipe holds now (those of an ended run are
        dropped), and those an ended run's park kept for it; only those with ``read``
        False. The pipe is read until a read leaves it empty."""
        run_id = state.msg.run_id
        with self._replies_lock:  # (a retained isolate's last park may still be reading)
            got: list[list[Any]] = []
            if self._early:
                got = [[call_id, body] for rid, call_id, body in self._early if rid == run_id]
                if got:
                    self._early = [e for e in self._early if e[0] != run_id]
            while read:
                bodies = replies.read()
                if not bodies:  # (None: the host is gone; the loop's own pipe says so)
                    return got
                for body in bodies:
                    reply = self.decoder.decode(body)
                    if not isinstance(reply, Reply):
                        continue
                    if reply.run_id == run_id:
                        got.append([reply.call_id, reply.body])
                        continue
                    current = self.run
                    if current is not None and current is not state and current.msg.run_id == reply.run_id:
                        # Read by an ended run's park: kept for the run it answers.
                        self._early.append((reply.run_id, reply.call_id, reply.body))
                if replies.drained:
                    break
            return got

    def deliver_parked(self, state: RunState, got: list[list[Any]]) -> bool:
        """Answers read on the isolate's thread: into the inbound channel for the runtime to
        deliver as the bell returns (True), or, while the loop's pump has the channel (or
        they do not fit), to the run's inbox, which the loop delivers."""
        if not state.msg.count_host_waits:
            self.loop.call_soon_threadsafe(self.answered, state, [g[0] for g in got])
        with state.pump_lock:
            if state.done:
                return False
            if not state.pumping and state.isolate.deliver_now(msgspec.json.encode(got).decode()):
                return True  # (the runtime reads the channel before this bell returns)
            state.inbox.extend(got)
        self.loop.call_soon_threadsafe(self.pump, state)
        return False

    def answered(self, state: RunState, call_ids: list[int]) -> None:
        """On the loop: calls a park answered, for the clock that stops while calls are open
        (read the journal first: the calls may have been opened there)."""
        if self.read_journal_into(state):
            self.close_calls(state, call_ids)

    def park_done(self, state: RunState, more: bool | BaseException) -> None:
        """On the isolate's thread, as a park returns (before the program's continuations
        run): park again while calls are open. A park that failed (a program that broke
        what the runtime delivers with) ends the run as a failed pump does: answers may be
        lost with it, so nothing would ever settle its calls."""
        if isinstance(more, BaseException):
            if not state.done:
                self.loop.call_soon_threadsafe(self.task_failed, state, more)
        elif more and not state.done:
            state.isolate.park_soon()

    def task_failed(self, state: RunState, exc: BaseException) -> None:
        """A park or a take failed: the run ends with what stopped it."""
        if state.done:
            return  # (a park the run's end terminated)
        if self.out_of_memory(state, exc):
            self.finish_out_of_memory(state)
        else:
            self.finish(state, "throw", error=str(exc))

    def took(self, state: RunState, text: str | BaseException) -> None:
        """On the loop: the result a take brought from the isolate (see runtime.js, finish),
        acted on as its ``["d", text]`` line would be, after what the journal held before
        it; or what stopped the take."""
        if state.done:
            return
        if isinstance(text, BaseException):
            self.task_failed(state, text)
        elif self.read_journal_into(state):
            self.take_messages(state, [["d", text]])

    def wake_park(self) -> None:
        """Bring a waiting park back to its isolate now (from the loop)."""
        with self._park_lock:
            if self._parked:
                self._woken = True
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wake_w, b".")

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
            if self.out_of_memory(state, out):
                self.finish_out_of_memory(state)
            else:
                self.finish(state, "throw", error=str(out))
            return
        if out:
            try:
                messages = decode_lines(out)
                self.take_messages(state, state.isolate.read_journal())
                self.take_messages(state, messages)
            except Exception as exc:
                if isinstance(exc, MemoryError):
                    self.finish_out_of_memory(state)
                    return
                text = f"The runtime sent a message the child could not read ({exc})."
                self.finish(state, "throw", error=text)
                return
        self.pump(state)  # replies that arrived meanwhile

    def drain_journal(self, state: RunState) -> None:
        """Take what the isolate wrote before the run ended (it may be wedged now)."""
        if not state.isolate.closed:
            self.take_messages(state, state.isolate.read_journal(), logs_only=True)

    def take_messages(self, state: RunState, messages: list[Any], *, logs_only: bool = False) -> None:
        """Act on messages from the isolate, checking each one's shape: only the runtime
        writes them, but a program that tampered with its own isolate must not be able to
        make the child (or the host) act on something malformed."""
        run_id = state.msg.run_id
        for m in messages:
            if state.done and not logs_only:
                return
            if isinstance(m, SentCall):
                if not logs_only:
                    self.open_call(state, m.call_id, m.at)
                continue
            if not _well_shaped(m):
                self.finish(state, "throw", error=TAMPERED)
                return
            tag = m[0]
            if tag == "l":
                text = self.log_text(m[2])
                size = len(text)
                if state.log_bytes + size > self.max_log_bytes:
                    state.logs_over_budget += 1
                    continue
                state.log_bytes += size
                state.logs.append(LogEntry(_texts.well_formed(m[1]), text))
            elif tag == "s":
                # A synchronous request (a standard library module's source): answer at once,
                # the isolate is waiting for it.
                state.isolate.answer_sync(m[1], self.stdlib_sources.get(m[2], ""))
            elif logs_only:
                continue
            elif tag == "c":
                self.take_call(state, m[1], m[2], m[3], m[4])
            elif tag == "f":
                self.open_call(state, m[1])
                self.send(Fetch(run_id, m[1], m[2]))
                if self.replies is not None:
                    state.isolate.park_soon()
            elif tag == "d":
                result = m[1]
                size = 0 if result is None else len(result.encode("utf-8", "surrogatepass"))
                if size > self.max_message_bytes:
                    text = _texts.message_ceiling_text("return value", self.max_message_bytes)
                    self.finish(state, "ceiling", error=text)
                else:
                    self.finish(state, "ok", result_json=result)
            elif tag == "D":
                state.isolate.take_result_soon()
            elif tag == "e":
                kind = m[2] if m[2] in ("ceiling", "memory") else "throw"
                self.finish(state, kind, error=m[1])
            elif tag == "h" and isinstance(state.msg, Run) and state.msg.retain:
                self.finish(state, "handle")

    def log_text(self, text: str) -> str:
        """A log line within the message ceiling in UTF-8 bytes (the runtime cuts by code
        units, which undercounts multi-byte text)."""
        text = _texts.well_formed(text)
        limit = self.max_message_bytes
        if len(text) * 3 <= limit:
            return text
        raw = text.encode("utf-8")
        if len(raw) <= limit:
            return text
        marker = f" ... [truncated: a log line may carry at most {_texts.format_bytes(limit)}]"
        return raw[: limit - len(marker.encode())].decode("utf-8", "ignore") + marker

    def take_call(self, state: RunState, call_id: int, provider: str, tool: str, args_json: str) -> None:
        error = self.call_problem(state, provider, args_json)
        if error is not None:
            state.inbox.append([call_id, msgspec.json.encode({"error": error}).decode()])
            self.pump(state)
            return
        self.open_call(state, call_id)
        self.send_call(state, call_id, provider, tool, args_json)
        if self.replies is not None:
            state.isolate.park_soon()

    def call_problem(self, state: RunState, provider: str, args_json: str) -> str | None:
        """Why a tool call cannot go to the host (its text goes back to the program
        instead), or None."""
        names = state.provider_names
        if names is None:
            names = state.provider_names = frozenset(p.name for p in self.providers_of(state))
        if provider not in names:
            return f"{provider} is not a provider declared for this run."
        limit = self.max_message_bytes
        # At most 3 UTF-8 bytes per UTF-16 unit: most argument lists need no encoding.
        if len(args_json) * 3 > limit and len(args_json.encode("utf-8", "surrogatepass")) > limit:
            return _texts.message_ceiling_text("tool call's argument list", limit)
        return None

    def send_call(self, state: RunState, call_id: int, provider: str, tool: str, args_json: str) -> None:
        self.send(Call(state.msg.run_id, call_id, provider, _texts.well_formed(tool), args_json))

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
                and _well_shaped(m)
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
                # program's turn ends, and its return brings the result (see took).
                state.isolate.take_result_soon()
                continue
            if not (isinstance(m, list) and m and m[0] == "l"):
                sending = False
            out.append(m)
            only_sent = False
        if sent and self.replies is not None:
            state.isolate.sent_here = True  # (the isolate parks for their answers)
        return out, only_sent

    def providers_of(self, state: RunState) -> tuple[Provider, ...]:
        msg = state.msg
        if isinstance(msg, Run):
            return msg.providers
        return self.handle_providers.get(msg.handle_id, ())

    def close_calls(self, state: RunState, call_ids: Sequence[int]) -> None:
        """Calls answered: with count_host_waits=False the run's clock runs again once the
        last open call is answered (see open_call)."""
        closed = False
        for call_id in call_ids:
            if call_id in state.open_calls:
                state.open_calls.discard(call_id)
                closed = True
        if closed and not state.open_calls and state.paused_since is not None:
            state.paused_total += time.monotonic() - state.paused_since
            state.paused_since = None

    def open_call(self, state: RunState, call_id: int, at: float | None = None) -> None:
        """A call left for the host (``at``, if not now): with count_host_waits=False the
        run's clock stops until the last open call is answered."""
        if not state.open_calls and not state.msg.count_host_waits:
            state.paused_since = time.monotonic() if at is None else at
        state.open_calls.add(call_id)

    def check_clock(self, state: RunState) -> None:
        """The host-clock deadline, as a timer that re-arms itself; with
        count_host_waits=False it stops while tool calls are open."""
        # Calls that left from the isolate's thread are opened at the loop's next read of
        # the journal, which a chain of quick calls may not need (see Child.pumped_quietly).
        if not self.read_journal_into(state):
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
        """Every MEMORY_POLL_S while the run lasts: the heap flag and the process RSS."""
        if state.done:
            return
        rss, data = _rss_and_data_bytes()
        if (
            state.isolate.memory_limit_reached()
            or state.isolate.out_of_room
            or rss > self.rss_limit
            or self.near_data_limit(data)
        ):
            self.finish_out_of_memory(state)
            return
        state.memory_check = self.loop.call_later(MEMORY_POLL_S, self.check_memory, state)

    def finish(
        self, state: RunState, kind: str, *, result_json: str | None = None, error: str | None = None
    ) -> None:
        """Report the run to the host at once; cleanup happens after, off its clock."""
        if state.done:
            return
        state.done = True
        state.isolate.act_now = None
        self.wake_park()
        state.kind = kind
        self.drain_journal(state)
        if error is not None:
            error = _texts.well_formed(error)
        if state.logs_over_budget:
            state.logs.append(
                LogEntry(
                    "warn",
                    (
                        f"[codemode] {state.logs_over_budget} more log entries were dropped: a run's logs "
                        f"carry at most {_texts.format_bytes(self.max_log_bytes)} of text."
                    ),
                )
            )
        done = Done(state.msg.run_id, kind, result_json, error, tuple(state.logs), False)
        entry = state.entry
        if kind in ("timeout", "memory") or entry is None or entry.done():
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

        entry.want()
        entry.future.add_done_callback(returned)

    def report(self, state: RunState, done: Done) -> None:
        """Send the run's Done, once, saying whether the engine has stopped running it."""
        if state.finished.is_set():
            return
        entry = state.entry
        settled = state.kind not in ("timeout", "memory") and (entry is None or entry.done())
        state.settled = settled
        self.send(msgspec.structs.replace(done, settled=settled))
        state.finished.set()

    async def dispose(self, state: RunState) -> None:
        """Stop what still runs, and dispose the isolate, or exit if the engine wedged.

        A retained isolate (a run that returned a request handler, or an invocation of
        one) is kept, unless its invocation hit a bound: then it is dropped."""
        self.run = None
        isolate = state.isolate
        if state.kind == "handle" and isinstance(state.msg, Run):
            self.retained[state.msg.run_id] = isolate
            self.handle_providers[state.msg.run_id] = state.msg.providers
            return
        if isinstance(state.msg, Invoke) and state.kind not in ("timeout", "memory"):
            if not state.settled:
                self.send(Idle())
            return
        entry = state.entry
        stopped = entry is None or entry.done()
        if not stopped and entry is not None:
            entry.cancel()  # mini-racer cancels the V8 task: TerminateExecution
        if isinstance(state.msg, Invoke):
            self.retained.pop(state.msg.handle_id, None)
        if (state.kind in ("timeout", "memory") or not stopped) and not await isolate.responsive(
            WEDGE_PROBE_S
        ):
            self.send(Recycle("the engine did not stop after the run ended"))
            os._exit(0)
        if stopped and state.kind not in ("timeout", "memory"):
            # The usual case: Done and Idle go ahead at once, and the isolate is disposed on
            # the thread trip of the next preparation (the next run still waits for it:
            # see serve and quiet).
            isolate.drain_soon()
            self.finished_isolates.append(isolate)
        else:
            await self.close_isolate(isolate)
        if state.kind == "memory":
            # A run that exhausted its bound can leave the allocator fragmented and the
            # engine's global state strained: a fresh process is the safe next host.
            self.send(Recycle("the last run exhausted its memory bound"))
            os._exit(0)
        if _rss_bytes() > self.residue_limit:  # (read again only when it was high)
            _malloc_trim()
            if _rss_bytes() > self.residue_limit and not self.closing and not self.finished_isolates:
                self.send(Recycle("resident memory stayed high after the run"))
                os._exit(0)
        if not state.settled:
            self.send(Idle())  # the host held this child back until now

    async def close_isolate(self, isolate: Any) -> None:
        from . import engine

        try:
            await asyncio.wait_for(engine.off_loop(self.loop, isolate.close), DISPOSE_TIMEOUT_S)
        except TimeoutError:
            self.send(Recycle("the isolate could not be disposed"))
            os._exit(0)

    # ---- start-up -----------------------------------------------------------------

    async def probe(self) -> list[str]:
        """Check every engine behaviour this child depends on; return what is missing."""
        from .engine import Isolate

        missing: list[str] = []
        isolate = Isolate()
        try:
            await isolate.prepare(self.loop, self.boot_values(), self.memory_limit_mb * MB, LAYOUT)
        except Exception as exc:
            return [f"cannot create an isolate and install the runtime ({exc})"]
        rang = asyncio.Event()
        isolate.on_bell = rang.set
        ctx = isolate.ctx
        try:
            await ctx.eval_cancelable("globalThis.__probe = 1")
            await isolate.start(
                msgspec.json.encode(
                    ["async () => { await new Promise((r) => setTimeout(r, 1)); return 7 }", [], "none"]
                ).decode()
            )
            await asyncio.wait_for(rang.wait(), 2.0)
            if ["d", "7"] not in isolate.read_journal():
                missing.append("does not run a timer through Atomics.waitAsync")
        except Exception:
            missing.append("does not deliver a notification from the isolate to the host")
        try:
            task = asyncio.ensure_future(ctx.eval_cancelable("for(;;){}"))
            await asyncio.sleep(0.002)
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
            if not await isolate.responsive(1.0):
                missing.append("does not stop a running script when its task is cancelled")
        except Exception:
            missing.append("does not stop a running script when its task is cancelled")
        try:
            if not isinstance(isolate.memory_limit_reached(), bool):
                missing.append("does not report reaching the hard memory limit")
        except Exception:
            missing.append("does not report reaching the hard memory limit")
        if not missing:
            isolate.close()
        return missing

    def load_stdlib(self) -> None:
        """Read the standard library's sources (before the loop starts: a standby child
        does it before it waits, so that an adopted one only prepares its isolates)."""
        from ..stdlib import MODULES, sources

        if os.environ.get("CODEMODE_CHILD_STDLIB", "on") == "off":
            # Diagnostic switch for the benchmark that measures what the library costs.
            self.stdlib_sources, self.stdlib_modules = {}, {}
        else:
            self.stdlib_sources = sources()
            self.stdlib_modules = {k: list(v) for k, v in MODULES.items()}
        from .engine import child_source

        self.stdlib_sources[COPIER_REQUEST] = child_source("copier.js")

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(self.on_loop_exception)
        missing = await self.probe() if self.probe_engine else []
        _freeze_startup_objects()  # before the spares: what they leave behind is collected
        if not missing:
            for _ in range(SPARE_ISOLATES):
                self.spares.append(await self.new_isolate())
        # Everything above is the resident baseline; a run may add its heap bound on top.
        self.baseline_rss = _rss_bytes()
        self.rss_limit = self.baseline_rss + self.memory_limit_mb * MB * 5 // 4 + 64 * MB
        # What a finished run may leave behind before the child recycles instead of letting
        # its residue count against the next run's bound.
        self.residue_limit = self.baseline_rss + max(64 * MB, self.memory_limit_mb * MB // 2)
        self.send(Ready(os.getpid(), tuple(missing), self.snapshot_refused))
        if missing:
            await asyncio.sleep(3600)
        server = asyncio.ensure_future(self.serve_forever())
        await self.read_messages()
        server.cancel()


def main(argv: list[str]) -> None:
    worker_id, memory_limit_mb, max_message_bytes, max_log_entries = (int(a) for a in argv[:4])
    probe_engine = argv[4:5] != ["probed"]
    mark = open_mark(argv[5] if len(argv) > 5 else "-")
    replies = int(argv[6]) if len(argv) > 6 and argv[6].isdigit() else None
    cpu = argv[7] if len(argv) > 7 else "any"
    _set_parent_death_signal()
    # Ctrl+C in a terminal reaches the host's whole process group: the host decides when
    # its children end (a worker's warm shutdown lets running jobs finish on them).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _no_core_dumps()
    if cpu != "standby":
        _pin_to(cpu)
    # Keep the protocol on private descriptors; anything printed by accident (or by V8)
    # goes to stderr, never into a frame.
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    # The process backstop: oversized ArrayBuffers fail inside V8 instead of taking the
    # machine. V8 needs about 1 GB of data segment to start; the heap bound comes on top.
    data_limit = data_limit_bytes(memory_limit_mb)
    resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
    from py_mini_racer import init_mini_racer

    # No Sparkplug: an isolate lives for one run, and its baseline compiler spent more on
    # compiling the runtime's hot functions again in every isolate than they gained
    # (measured side by side: 10 tool calls +7% throughput, 200 calls +12%, a sort of
    # 100,000 numbers unchanged: hot loops still reach the optimizing tiers).
    # Pooled pages discarded rather than decommitted: each isolate takes its heap's pages
    # from the pool the last one gave back, and a decommitted page costs an mprotect (and a
    # fault) to take again. Resident memory is the same (side by side, 300 runs: 82.8 MB);
    # child CPU per trivial run -3% and -4% in two alternating A/Bs.
    flags = [
        "--single-threaded",
        "--no-sparkplug",
        "--no-decommit-pooled-pages",
        f"--max-old-space-size={max(2 * memory_limit_mb, 64)}",
    ]
    extra = os.environ.get("CODEMODE_CHILD_V8_FLAGS", "").split()
    init_mini_racer(flags=flags + extra)
    child = Child(
        worker_id,
        memory_limit_mb,
        max_message_bytes,
        max_log_entries,
        proto_in,
        proto_out,
        probe_engine=probe_engine,
        mark=mark,
        replies=replies,
    )
    child.load_stdlib()
    child.install_runtime()  # a standby does it before it waits: adoption only prepares isolates

    if cpu == "standby":
        adopt = _await_adoption(proto_in, proto_out)
        child.worker_id = adopt.worker_id
        _pin_to("any" if adopt.cpu < 0 else str(adopt.cpu))
    _loops.run(child.main())  # uvloop's where installed: see _loops.py
