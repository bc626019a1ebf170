"""The host's side of one child process: spawn, handshake, serve runs, notice death.

A worker owns one pipe pair and one stderr pipe. Its reader task is the only place that
learns the child died (EOF on the pipe); it then fails the run in flight, and only that
run: a crash costs one caller. A planned exit is announced with ``Recycle`` first, so it
is never counted as a crash.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from . import _texts
from ._faults import ExecutorError, HandleLost, WorkerCrashed
from ._host.asyncio_internals import detach_transport, process_transport, reader_transport
from ._host.eager import EagerStarter
from ._host.mark import StartedMark
from ._host.nesting import RESULT_TOO_DEEP, fresh_stack
from ._host.placement import give_back_cpu, take_cpu
from ._outcome import LogEntry, Outcome
from ._protocol import (
    MAX_FRAME_BYTES,
    SNAPSHOT_TURNED_OFF,
    Adopt,
    Call,
    Cancel,
    ChildMessage,
    Done,
    Fetch,
    FrameTooLarge,
    Idle,
    Invoke,
    Log,
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

__all__ = ["ActiveRun", "NeverStarted", "SpawnSettings", "Worker"]

log = logging.getLogger("codemode.pool")
T = TypeVar("T")

READY_TIMEOUT_S = 30.0
"""A child that has not answered Ready by then failed to start."""
BACKSTOP_GRACE_S = 0.1
"""How long past the deadline the host waits for the child's own timeout before killing it."""
STDERR_TAIL_BYTES = 8192
CALLS_STARTED_PER_TURN = 64
"""Tool calls and fetches of one run that the host starts per read of its child's pipe
(one read per loop turn) and per turn of the run's line; more wait in the line for the
next turns. A program that sent 10,000 calls at once had a task made for each in one
turn, and the turn that started them all (handing sync calls to dispatch threads, under
the GIL with them) kept the loop from reading the run's own outcome: a 2 s deadline
settled up to 2 s late on the benchmark machine. The share is counted from each read, so
that a run that is not flooding costs no extra loop turn per call (a callback to reset
the count each turn did: one more turn, and one more poll of the selector, per call)."""
STDERR_DRAIN_S = 1.0  # a dead child's stderr reaches EOF at once, unless it left a grandchild

_decoder = msgspec.msgpack.Decoder(ChildMessage)


def _says_out_of_memory(stderr: bytes | bytearray) -> bool:
    """Whether the child's stderr holds V8's (or the allocator's) out-of-memory words."""
    text = bytes(stderr).lower()
    return b"out of memory" in text or b"allocation failed" in text


class NeverStarted(Exception):
    """The child recycled before taking this run: hand it to another child."""


@dataclass(frozen=True)
class SpawnSettings:
    """What every child of one pool is started with."""

    memory_limit_mb: int
    max_message_bytes: int
    max_log_entries: int
    env: dict[str, str] | None = None
    probed: bool = False
    """A child of this pool already passed the engine probe: its replacements skip it (same
    binary, same flags), which takes ~20 ms off replacing a child."""
    pin_cpus: bool = True
    """Pin each child to one core (``_host/placement.py``)."""


@dataclass
class ActiveRun:
    """One run (or one invocation of a retained handler) in flight on a worker."""

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


_PASSED_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")


def _child_environment() -> dict[str, str]:
    """What a child inherits by default: enough to start Python, plus ``CODEMODE_*`` knobs.
    The host's credentials (API keys in the environment) stay in the host."""
    return {k: v for k, v in os.environ.items() if k in _PASSED_ENV or k.startswith("CODEMODE_")}


def _read_result(text: str | None) -> Any:
    """A program's result from its JSON text. msgspec refuses lone surrogate escapes, which
    JSON.stringify writes for a JS string holding half a pair: such text is read with the
    stdlib, and those repaired."""
    if text is None:
        return None
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return _well_formed_data(json.loads(text))


def _well_formed_data(value: Any) -> Any:
    if isinstance(value, str):
        return _texts.well_formed(value)
    if isinstance(value, list):
        return [_well_formed_data(v) for v in value]
    if isinstance(value, dict):
        return {_texts.well_formed(k): _well_formed_data(v) for k, v in value.items()}
    return value


async def _read_pipe(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=MAX_FRAME_BYTES)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader


_NO_SNAPSHOT_SAID: set[str] = set()


def _say_no_snapshot(reason: str) -> None:
    """Log, once per process and reason, that children evaluate the runtime in every
    isolate: the same behaviour, 1-2 ms more CPU a run (docs/performance.md). A
    warning, unless it was asked for (``CODEMODE_CHILD_SNAPSHOT=off``)."""
    if reason in _NO_SNAPSHOT_SAID:
        return
    _NO_SNAPSHOT_SAID.add(reason)
    level = logging.INFO if reason == SNAPSHOT_TURNED_OFF else logging.WARNING
    log.log(
        level,
        "codemode's children evaluate the runtime in every isolate instead of starting "
        "from its snapshot (1-2 ms more CPU per run): %s",
        reason,
    )


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "an unknown status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal"
        return f"{name}({returncode})"
    return f"exit status {returncode}"


class Worker:
    """One supervised child process."""

    def __init__(
        self,
        worker_id: int,
        settings: SpawnSettings,
        on_exit: Callable[[Worker], None],
        on_idle: Callable[[Worker], None],
        *,
        standby: bool = False,
    ) -> None:
        self.id = worker_id
        self.standby = standby
        """Started to wait, engine loaded, until :meth:`adopt` gives it a slot."""
        self.waiting = False
        """A standby that said Waiting: loaded, adopting it costs only its isolates."""
        self.settings = settings
        self.on_exit = on_exit
        self.on_idle = on_idle
        self.proc: asyncio.subprocess.Process | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._replies: asyncio.WriteTransport | None = None
        """The pipe that carries only the answers to the child's calls: its isolate's own
        thread reads them there while the program waits (codemode/_child/main.py, park)."""
        self._frames_fd: int | None = None
        """The child's protocol pipe, read by the loop itself (see _read_frames)."""
        self._stderr: asyncio.StreamReader | None = None
        self._loop = asyncio.get_running_loop()
        """The loop this worker's pipes and tasks belong to."""
        self._starter = EagerStarter(self._loop, f"codemode-worker-{worker_id}-calls")
        """Serves each call's first step in the turn that read it (see _host/eager.py)."""
        self.ready: asyncio.Future[Ready] = self._loop.create_future()
        self.run: ActiveRun | None = None
        self.alive = False
        self.recycling = False
        self.stderr_tail = bytearray()
        self.said_out_of_memory = False
        self._stderr_read: asyncio.Task[None] | None = None
        self._mark: StartedMark | None = None
        """Where the child marks the run whose program it starts (read when it dies)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._backstop: asyncio.TimerHandle | None = None
        self.pid: int | None = None
        self.known_bundles: set[str] = set()
        """Module bundles this child already holds (sent once, then named by key)."""
        self.held = False
        """True after a Done that was not settled: no new run until Idle (or exit)."""
        self.retained: int | None = None
        """The run id whose isolate this child keeps for handle invocations, if any."""
        self.cpu: int | None = None
        """The core this child is pinned to (given back when it exits)."""

    # ---- life cycle ---------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        env = dict(_child_environment() if s.env is None else s.env)
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        # A standby takes its core when it is adopted (it runs nothing until then).
        self.cpu = take_cpu() if s.pin_cpus and not self.standby else None
        # The pipes are ours, connected once the process exists. With asyncio's PIPEs, a
        # start cancelled while asyncio connects them (the loop ending, say) leaves
        # Process.wait() waiting forever for pipes that never connected (CPython 3.11),
        # and the loop's shutdown with it.
        child_in, host_out = os.pipe()
        host_in, child_out = os.pipe()
        host_err, child_err = os.pipe()
        child_replies, host_replies = os.pipe()
        ours = [host_out, host_in, host_err, host_replies]
        self._mark = mark = StartedMark.make()
        mark_fd = None if mark is None else mark.fd
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "codemode._child",
                str(self.id),
                str(s.memory_limit_mb),
                str(s.max_message_bytes),
                str(s.max_log_entries),
                "probed" if s.probed else "probe",
                "-" if mark_fd is None else str(mark_fd),
                str(child_replies),
                "standby" if self.standby else "any" if self.cpu is None else str(self.cpu),
                stdin=child_in,
                stdout=child_out,
                stderr=child_err,
                env=env,
                pass_fds=(child_replies,) if mark_fd is None else (mark_fd, child_replies),
            )
            self.pid = self.proc.pid
            self.alive = True
            loop = self._loop
            self._stdin, _ = await loop.connect_write_pipe(
                asyncio.BaseProtocol, os.fdopen(ours.pop(0), "wb", buffering=0)
            )
            self._frames_fd = ours.pop(0)
            self._stderr = await _read_pipe(loop, ours.pop(0))
            self._replies, _ = await loop.connect_write_pipe(
                asyncio.BaseProtocol, os.fdopen(ours.pop(0), "wb", buffering=0)
            )
        except BaseException:
            for fd in ours:
                os.close(fd)
            if self._frames_fd is not None:
                os.close(self._frames_fd)
                self._frames_fd = None
            self.kill()
            self.alive = False
            give_back_cpu(self.cpu)
            self.cpu = None
            if mark is not None:
                mark.close()
                self._mark = None
            raise
        finally:
            for fd in (child_in, child_out, child_err, child_replies):
                os.close(fd)
            if mark is not None:
                mark.spawned()
        self._read_frames(loop)
        self._stderr_read = self._spawn(self._read_stderr())

    def adopt(self, slot: int) -> None:
        """Give a standby child ``slot`` (and a core): it prepares and answers Ready."""
        self.id = slot
        self.standby = self.waiting = False
        self.cpu = take_cpu() if self.settings.pin_cpus else None
        self._write(Adopt(slot, -1 if self.cpu is None else self.cpu))

    def _spawn(self, coro: Awaitable[T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait_ready(self) -> None:
        """Wait for the handshake; raise WORKER_CRASHED naming what is missing."""
        try:
            ready = await asyncio.wait_for(asyncio.shield(self.ready), READY_TIMEOUT_S)
        except TimeoutError:
            self.kill()
            raise WorkerCrashed(
                f"Worker {self.id} failed to start.",
                causes=(f"The child did not answer within {READY_TIMEOUT_S:.0f} s.",),
            ) from None
        if ready.no_snapshot is not None:
            _say_no_snapshot(ready.no_snapshot)
        if ready.missing:
            self.kill()
            behaviours = ", ".join(ready.missing)
            raise WorkerCrashed(
                f"Worker {self.id} failed to start.",
                causes=(
                    f"The installed mini-racer engine {behaviours}. This executor needs an "
                    "engine that does all of these; install a mini-racer release that does "
                    "(see docs/failures.md).",
                ),
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def shutdown(self) -> None:
        """Ask the child to exit; kill it if it is busy (dispose never waits on a program)."""
        if self.proc is None or self.proc.returncode is not None:
            return
        if self.run is not None:
            self.kill()
            return
        try:
            self._write(Shutdown())
        except Exception:
            self.kill()

    async def wait_exit(self, timeout: float) -> None:
        """Wait for the child to exit (killing it past ``timeout``) and close its pipes."""
        if self.proc is None:
            return
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 5.0)
        for transport in (self._stdin, self._replies):
            if transport is not None:
                transport.close()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=2.0)

    # ---- frames -------------------------------------------------------------------

    def _write(self, message: Any) -> None:
        assert self._stdin is not None
        if self._stdin.is_closing():
            return  # the child is gone (its exit is being handled): nobody would read it
        self._stdin.write(encode_frame(message))

    def _write_reply(self, reply: Reply) -> None:
        """A call's answer, on the reply pipe (on stdin for a child started without one)."""
        replies = self._replies
        if replies is None:
            self._write(reply)
        elif not replies.is_closing():
            replies.write(encode_frame(reply))

    def forget_loop(self) -> None:
        """The loop that owns this child's pipes is gone (or elsewhere): close their
        descriptors here and keep the transports from closing later on that loop."""
        subprocess_transport = process_transport(self.proc)
        if self._frames_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._frames_fd)
            self._frames_fd = None
        for transport in (subprocess_transport, self._stdin, self._replies, reader_transport(self._stderr)):
            if transport is not None:
                detach_transport(transport, close_pipe=transport is not subprocess_transport)

    async def _read_stderr(self) -> None:
        assert self._stderr is not None
        while True:
            chunk = await self._stderr.read(65536)
            if not chunk:
                return
            self.stderr_tail += chunk
            # V8's out-of-memory line comes first and its backtrace after: a long backtrace
            # pushes the line out of the tail, so it is looked for before the tail is cut.
            if not self.said_out_of_memory and _says_out_of_memory(self.stderr_tail):
                self.said_out_of_memory = True
            if len(self.stderr_tail) > STDERR_TAIL_BYTES:
                del self.stderr_tail[: len(self.stderr_tail) - STDERR_TAIL_BYTES]

    def _read_frames(self, loop: asyncio.AbstractEventLoop) -> None:
        """Act on the child's frames as they arrive, until its pipe closes.

        The loop reads the pipe itself, into one buffer: a frame is handled in the
        iteration that read it, with no stream or task in between (each tool call is one
        frame each way, so this is on its hot path)."""
        fd = self._frames_fd
        assert fd is not None
        frames = PipeFrames(fd)

        def stop(reason: str | None) -> None:
            loop.remove_reader(fd)
            if self._frames_fd == fd:
                os.close(fd)
                self._frames_fd = None
            if reason is not None:
                self.kill()
            self._spawn(self._exited(reason))

        def readable() -> None:
            try:
                bodies = frames.read()
            except FrameTooLarge as exc:
                stop(f"sent {exc}")
                return
            except Exception as exc:  # a bug here must not leave a caller waiting forever
                log.exception("worker %s reader failed", self.id)
                stop(f"could not be read ({type(exc).__name__})")
                return
            if bodies is None:
                stop(None)
                return
            active = self.run
            if active is not None and active.next_turn is None:
                active.started_this_turn = 0  # a new read: a new share (see _start)
            for body in bodies:
                try:
                    message = _decoder.decode(body)
                except (msgspec.DecodeError, RecursionError) as exc:  # (deep unknown fields recurse)
                    stop(f"sent a malformed message ({exc})")
                    return
                try:
                    self._handle(message)
                except Exception as exc:  # never let one message stop the reader
                    log.exception("worker %s: could not handle %s", self.id, type(message).__name__)
                    self._fail_active(
                        WorkerCrashed(
                            f"Worker {self.id}: the host could not handle the child's "
                            f"{type(message).__name__} message ({type(exc).__name__}).",
                            started=True,
                        )
                    )

        loop.add_reader(fd, readable)

    def _handle(self, message: ChildMessage) -> None:
        match message:
            case Call():  # (first: one per tool call, the most frequent message by far)
                self._on_call(message)
            case Ready():
                if not self.ready.done():
                    self.ready.set_result(message)
            case Started(run_id=run_id):
                if self.run is not None and self.run.msg.run_id == run_id:
                    self.run.started = True
            case Fetch():
                self._on_fetch(message)
            case Log(run_id=run_id, entry=entry):
                active = self.run
                if active is not None and active.msg.run_id == run_id and active.on_log is not None:
                    active.on_log(entry)
            case Done():
                self._on_done(message)
            case Waiting():
                self.waiting = self.standby
            case Idle():
                self.held = False
                if self.retained is None and self.alive and self.run is None:
                    self.on_idle(self)
            case Recycle():
                self.recycling = True

    # ---- runs ---------------------------------------------------------------------

    def begin(self, active: ActiveRun) -> None:
        """Hand a run to the child; the host clock's backstop starts now."""
        frame = encode_frame(active.msg)  # fails here, before the worker is taken
        assert self._stdin is not None
        self.run = active
        self._stdin.write(frame)
        self._arm_backstop(active)

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
        log.warning("worker %s missed its deadline; killing it", self.id)
        self.kill()

    def cancel(self, active: ActiveRun, reason: str) -> None:
        if self.run is active and not active.cancel_sent and self.alive:
            active.cancel_sent = True
            with contextlib.suppress(Exception):
                self._write(Cancel(active.msg.run_id, reason))

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
                # re-arms itself (a new timer for every tool call cost ~4,300 instructions a call:
                # benchmarks/instructions.py, a fleet worker's 10-call job 5.62 M against 5.67).
                self._arm_backstop(active)

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
            self._write_reply(Reply(active.msg.run_id, call_id, body))
        except Exception:  # the child is gone: its exit is handled by the reader
            log.debug("worker %s: a reply was not written", self.id, exc_info=True)

    def _fail_active(self, exc: ExecutorError) -> None:
        active = self.run
        if active is not None:
            self._finish(active)
            if not active.future.done():
                active.future.set_exception(exc)
            self.held = True  # its state is unknown: only an Idle (or an exit) frees it

    def _on_done(self, done: Done) -> None:
        active = self.run
        if active is None or active.msg.run_id != done.run_id:
            return
        self._finish(active)
        error: str | None = done.error
        try:
            try:
                result = _read_result(done.result_json)
            except RecursionError:  # read again from an empty stack (codemode/_host/nesting.py)
                result = fresh_stack(_read_result, done.result_json)
        except RecursionError:
            result, error = None, RESULT_TOO_DEEP
        except ValueError:
            result, error = None, "The program's result arrived unreadable."
        if done.kind == "lost":
            if not active.future.done():
                active.future.set_exception(HandleLost("The retained isolate is gone."))
            self.retained = None
        elif not active.future.done():
            handle = str(done.run_id) if done.kind == "handle" else None
            active.future.set_result(
                Outcome(
                    result=result,
                    error=error,
                    logs=list(done.logs),
                    handle=handle,
                    error_detail=done.error_detail if error == done.error else None,
                )
            )
        if done.kind == "handle":
            self.retained = done.run_id
            if active.future.cancelled():
                self.release()  # its caller stopped waiting: nobody will hold the handle
            return  # the child stays with its retained isolate: not idle
        if isinstance(active.msg, Invoke) and done.kind in ("timeout", "memory"):
            self.retained = None  # the child dropped the isolate after the bound
        if not done.settled:
            self.held = True  # the engine may still be busy: wait for Idle or an exit
            return
        if self.retained is None and self.alive:
            self.on_idle(self)

    def release(self) -> None:
        """Dispose the retained isolate; the child serves ordinary runs again."""
        if self.retained is None:
            return
        handle_id, self.retained = self.retained, None
        if self.alive:
            with contextlib.suppress(Exception):
                self._write(Release(handle_id))
            self.on_idle(self)

    def _finish(self, active: ActiveRun) -> None:
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

    async def _exited(self, reason: str | None) -> None:
        """The pipe closed: map the death onto the run in flight (if any), then tell the pool."""
        self.alive = False
        assert self.proc is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5.0)
        # Let the stderr reader drain what the child printed while dying (V8's last words
        # decide between the memory text and a crash).
        if self._stderr_read is not None:
            await asyncio.wait({self._stderr_read}, timeout=STDERR_DRAIN_S)
        returncode = self.proc.returncode
        if not self.ready.done():
            tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()[-3:]
            causes = (f"The child exited with {_describe_exit(returncode)} before it was ready.", *tail)
            self.ready.set_exception(WorkerCrashed(f"Worker {self.id} failed to start.", causes=causes))
            self.ready.exception()  # retrieved here; wait_ready re-raises it if anyone waits
        active = self.run
        if active is not None:
            self._finish(active)
            if self._mark is not None and self._mark.marked(active.msg.run_id):
                active.started = True
            if not active.future.done():
                if not active.started and not active.timed_out and reason is None:
                    # The child died before it said Started (while disposing the last
                    # isolate, or recycling): no program code of this run ran.
                    active.future.set_exception(NeverStarted())
                elif active.timed_out or self.said_out_of_memory:
                    active.future.set_result(self._death_outcome(active))
                else:
                    active.future.set_exception(self._death_fault(returncode, reason, active.started))
        if self._mark is not None:
            self._mark.close()
        self._starter.close()
        give_back_cpu(self.cpu)
        self.cpu = None
        self.on_exit(self)

    def _death_outcome(self, active: ActiveRun) -> Outcome:
        """A death the program caused and the model should read: out of memory, or wedged."""
        if self.said_out_of_memory:
            return Outcome(error=_texts.memory_text(self.settings.memory_limit_mb))
        return Outcome(error=_texts.timeout_text(active.msg.timeout_ms))

    def _death_fault(self, returncode: int | None, reason: str | None, started: bool) -> ExecutorError:
        state = "the program had started" if started else "the program had not started"
        if reason is not None:
            what = f"Worker {self.id} {reason} while running the program; {state}."
        else:
            what = (
                f"Worker {self.id} crashed with {_describe_exit(returncode)} while running the "
                f"program; {state}."
            )
        tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()[-3:]
        return WorkerCrashed(what, started=started, causes=tuple(tail))
