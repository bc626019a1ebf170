"""One supervised child process, as the host sees it: started, handed runs, noticed dying.

::

    start() ─▶ spawn.py (argv, environment, pipes) ─▶ wait_ready() (the handshake)
    begin(run) ─▶ Run frame ─▶ the child's frames, read by reader.py ─▶ on_message()
                     Call / Fetch ─▶ calls.py (served, replied, the run's clock, backstop)
                     Done ─▶ results.py ─▶ the run's Outcome; Idle ─▶ back to the pool
    EOF on the pipe ─▶ _exited() ─▶ exits.py (the run in flight fails, alone) ─▶ the pool

A child owns one pipe pair, a reply pipe and one stderr pipe. Its reader is the only place
that learns the child died (EOF on the pipe); it then fails the run in flight, and only that
run: a crash costs one caller. A planned exit is announced with ``Recycle`` first, so it is
never counted as a crash. "Worker" elsewhere means a fleet's Celery worker process; the
pool's children keep two names the seed defines: the ``pool.max_workers`` option and the
fault texts "Worker 1 failed to start." and "Worker N crashed with ...", which name a slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._faults import ExecutorError, HandleLost
from .._outcome import Outcome
from .._protocol import (
    Adopt,
    Call,
    Cancel,
    ChildMessage,
    Done,
    Fetch,
    Idle,
    Invoke,
    Log,
    Ready,
    Recycle,
    Release,
    Shutdown,
    Started,
    Waiting,
    encode_frame,
)
from .calls import ActiveRun, CallService
from .eager import EagerStarter
from .exits import STDERR_DRAIN_S, StderrTail, death_fault, death_outcome, start_failure
from .mark import StartedMark
from .placement import give_back_cpu, take_cpu
from .reader import read_frames
from .results import read_done
from .spawn import (
    ChildPipes,
    SpawnSettings,
    child_argv,
    child_environment,
    handshake,
)

__all__ = ["ChildProcess", "NeverStarted"]

T = TypeVar("T")


class NeverStarted(Exception):
    """The child recycled before taking this run: hand it to another child."""


class ChildProcess(CallService):
    """One supervised child process of a pool (its slot is :attr:`id`)."""

    def __init__(
        self,
        slot: int,
        settings: SpawnSettings,
        on_exit: Callable[[ChildProcess], None],
        on_idle: Callable[[ChildProcess], None],
        *,
        standby: bool = False,
    ) -> None:
        self.id = slot
        self.standby = standby
        """Started to wait, engine loaded, until :meth:`adopt` gives it a slot."""
        self.waiting = False
        """A standby that said Waiting: loaded, adopting it costs only its isolates."""
        self.settings = settings
        self.on_exit = on_exit
        self.on_idle = on_idle
        self.proc: asyncio.subprocess.Process | None = None
        self.pipes = ChildPipes()
        self.stderr = StderrTail()
        self._loop = asyncio.get_running_loop()
        """The loop this child's pipes and tasks belong to."""
        self._starter = EagerStarter(self._loop, f"codemode-child-{slot}-calls")
        """Serves each call's first step in the turn that read it (see _host/eager.py)."""
        self.ready: asyncio.Future[Ready] = self._loop.create_future()
        self.run: ActiveRun | None = None
        self.alive = False
        self.recycling = False
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
        # A standby takes its core when it is adopted (it runs nothing until then).
        self.cpu = take_cpu() if s.pin_cpus and not self.standby else None
        pipes = self.pipes
        pipes.open()
        self._mark = mark = StartedMark.make()
        mark_fd = None if mark is None else mark.fd
        loop = self._loop
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *child_argv(
                    self.id,
                    s,
                    standby=self.standby,
                    cpu=self.cpu,
                    mark_fd=mark_fd,
                    replies_fd=pipes.child_replies,
                ),
                stdin=pipes.child_in,
                stdout=pipes.child_out,
                stderr=pipes.child_err,
                env=child_environment(s),
                pass_fds=(pipes.child_replies,) if mark_fd is None else (mark_fd, pipes.child_replies),
            )
            self.pid = self.proc.pid
            self.alive = True
            await pipes.connect(loop)
        except BaseException:
            pipes.close_unconnected()
            self.kill()
            self.alive = False
            give_back_cpu(self.cpu)
            self.cpu = None
            if mark is not None:
                mark.close()
                self._mark = None
            raise
        finally:
            pipes.close_child_ends()
            if mark is not None:
                mark.spawned()
        assert pipes.frames_fd is not None and pipes.stderr is not None
        read_frames(self, loop, pipes.frames_fd)
        self._stderr_read = self._spawn(self.stderr.read(pipes.stderr))

    def adopt(self, slot: int) -> None:
        """Give a standby child ``slot`` (and a core): it prepares and answers Ready."""
        self.id = slot
        self.standby = self.waiting = False
        self.cpu = take_cpu() if self.settings.pin_cpus else None
        self.pipes.write(Adopt(slot, -1 if self.cpu is None else self.cpu))

    def _spawn(self, coro: Awaitable[T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait_ready(self) -> None:
        """Wait for the handshake; raise WORKER_CRASHED naming what is missing."""
        await handshake(self.ready, self.id, self.kill)

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
            self.pipes.write(Shutdown())
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
        self.pipes.close_writers()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=2.0)

    def forget_loop(self) -> None:
        """The loop that owns this child's pipes is gone (or elsewhere): close their
        descriptors here and keep the transports from closing later on that loop."""
        self.pipes.forget_loop(self.proc)

    # ---- frames -------------------------------------------------------------------

    def frames_ended(self, fd: int, reason: str | None) -> None:
        """The reader stopped (``reason``: what was wrong with the child's frames, for
        which it is killed; None: end of file)."""
        if self.pipes.frames_fd == fd:
            os.close(fd)
            self.pipes.frames_fd = None
        if reason is not None:
            self.kill()
        self._spawn(self._exited(reason))

    def on_message(self, message: ChildMessage) -> None:
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
        frame = encode_frame(active.msg)  # fails here, before the child is taken
        assert self.pipes.stdin is not None
        self.run = active
        self.pipes.stdin.write(frame)
        self._arm_backstop(active)

    def cancel(self, active: ActiveRun, reason: str) -> None:
        if self.run is active and not active.cancel_sent and self.alive:
            active.cancel_sent = True
            with contextlib.suppress(Exception):
                self.pipes.write(Cancel(active.msg.run_id, reason))

    def fail_active(self, exc: ExecutorError) -> None:
        """Fail the run in flight (the host could not handle what the child sent for it)."""
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
        result, error = read_done(done)
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
                self.pipes.write(Release(handle_id))
            self.on_idle(self)

    # ---- exit ---------------------------------------------------------------------

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
            self.ready.set_exception(start_failure(self.id, returncode, self.stderr))
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
                elif active.timed_out or self.stderr.said_out_of_memory:
                    active.future.set_result(
                        death_outcome(active.msg.timeout_ms, self.settings.memory_limit_mb, self.stderr)
                    )
                else:
                    active.future.set_exception(
                        death_fault(self.id, returncode, reason, active.started, self.stderr)
                    )
        if self._mark is not None:
            self._mark.close()
        self._starter.close()
        give_back_cpu(self.cpu)
        self.cpu = None
        self.on_exit(self)
