"""The child process: one isolate at a time, supervised by the host's pool.

Started by the host with ``python -m codemode._child`` (spawn, never fork). It sets its
own backstops before V8 loads (process.py, limits.py), probes the engine behaviours it
depends on (probe.py), answers ``Ready``, and then serves runs. A standby child (the pool's
spare) stops after loading V8 until the host's ``Adopt`` names its slot and core::

    host ──Run──▶ HostLink ──▶ Child.handle ──▶ queue ──▶ Runner.serve
                                        isolate from Spares, begin(code)
                   isolate ──bell──▶ Flow ──pump()──▶ isolate   (outbox as one string)
    host ◀──Call── Relay                       (a tool call: three strings)
    host ──Reply─▶ Relay's park (or Child.handle ──▶ Flow.pump) ──▶ isolate
    host ◀──Done── Runner.finish; Runner.dispose; Spares prepares the next isolate

The collaborators, one per concern: :class:`~.frames.HostLink` (frames in and out),
:class:`~.spares.Spares` (prepared and finished isolates), :class:`~.run.Runner` (a run's
life cycle and watchdogs), :class:`~.flow.Flow` (what the program writes),
:class:`~.relay.Relay` (tool calls and their answers), :class:`~.limits.MemoryWatch`
(process-level memory bounds). The engine itself is engine.py.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from .. import _texts
from .._host.mark import ChildMark, open_mark
from .._protocol import Cancel, HostMessage, Invoke, Ready, Release, Reply, Run, Shutdown
from . import eventloop, miniracer_internals, process
from .flow import Flow
from .frames import HostLink, await_adoption
from .limits import MemoryWatch, limit_data
from .probe import probe_engine
from .relay import Relay
from .run import Runner
from .runtime import config_json, install_runtime, load_stdlib
from .spares import SPARE_ISOLATES, Spares, boot_values

__all__ = ["Child", "main"]


class Child:
    """One child: its settings, the collaborators that serve its runs, and the queue that
    keeps runs one after another."""

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
        self.link = HostLink(proto_in, proto_out)
        self.memory = MemoryWatch(memory_limit_mb)
        self.mark = mark
        self.replies = replies
        self.stdlib_modules: dict[str, list[str]] = {}
        self.stdlib_sources: dict[str, str] = {}
        self.snapshot_refused: str | None = None
        """Why this child's isolates do not start from a snapshot of the runtime (None: they do)."""
        self.probe_engine = probe_engine
        """Whether to check the engine before Ready (the pool's first child does; its
        replacements run the same binary with the same flags and skip it)."""
        self.runs: asyncio.Queue[Run | Invoke | Release] = asyncio.Queue()
        self.spares: Spares
        self.runner: Runner
        self.flow: Flow
        self.relay: Relay

    def _assemble(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make the collaborators and connect them (on the loop they serve on)."""
        send = self.link.send
        self.spares = Spares(loop, self.memory_limit_mb, self.memory.near_data_limit, send)
        self.runner = Runner(loop, self.link, self.memory, self.spares, self.max_message_bytes, self.mark)
        self.flow = Flow(loop, send, self.max_message_bytes, self.stdlib_sources)
        self.relay = Relay(loop, send, self.link.decoder, self.max_message_bytes, self.replies)
        self.runner.flow = self.relay.flow = self.flow
        self.runner.relay = self.flow.relay = self.relay
        self.flow.runner = self.relay.runner = self.runner

    def load_stdlib(self) -> None:
        """Read the standard library's sources (before the loop starts: a standby child
        does it before it waits, so that an adopted one only prepares its isolates)."""
        self.stdlib_sources, self.stdlib_modules = load_stdlib()

    def config_json(self) -> str:
        """The runtime's configuration: the child's settings, the same for every isolate."""
        return config_json(
            self.max_message_bytes, self.max_log_entries, self.memory_limit_mb, self.stdlib_modules
        )

    def install_runtime(self) -> None:
        """Make the runtime, configured for this child, part of every isolate it will
        create (into a startup snapshot, unless CODEMODE_CHILD_SNAPSHOT=off or the engine's
        build does not allow one: see snapshot.py). Once, before the first isolate."""
        snapshot = os.environ.get("CODEMODE_CHILD_SNAPSHOT", "on") != "off"
        self.snapshot_refused = install_runtime(self.config_json(), self.stdlib_sources, snapshot=snapshot)

    def boot_values(self) -> str:
        """What each isolate gets of its own (see spares.boot_values)."""
        return boot_values()

    def handle(self, message: HostMessage) -> None:
        """One of the host's messages, on the loop, in the iteration that read it."""
        match message:
            case Run() | Invoke() | Release():
                self.runs.put_nowait(message)
            case Reply(run_id=run_id, call_id=call_id, body=body):
                state = self.runner.current
                if state is None or state.msg.run_id != run_id or state.done:
                    return  # stale: the run it answered has ended
                # The call may have left from the isolate's thread (Relay.send_calls_now):
                # its opening is in the journal's taken messages, read here first (under the
                # journal's lock, so never half-written).
                if not self.flow.read_journal_into(state):
                    return
                state.close_calls((call_id,))
                state.inbox.append([call_id, body])
                self.flow.pump(state, journal_read=True)
            case Cancel(run_id=run_id, reason=reason):
                state = self.runner.current
                if state is not None and state.msg.run_id == run_id and not state.done:
                    if reason == "timeout":
                        self.runner.finish(state, "timeout", error=_texts.timeout_text(state.msg.timeout_ms))
                    else:
                        self.runner.finish(state, "throw", error=reason)
            case Shutdown():
                os._exit(0)

    async def serve_forever(self) -> None:
        """Runs are served strictly one after another: run N+1 starts only after run N's
        isolate is disposed, so a child that recycles during a dispose never started the
        run queued behind it (the host may hand that run to another child)."""
        while True:
            msg = await self.runs.get()
            self.spares.serving = True
            try:
                if isinstance(msg, Release):
                    await self.runner.release(msg.handle_id)
                else:
                    await self.runner.serve(msg)
            finally:
                self.spares.serving = False
            self.spares.refill()

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        self._assemble(loop)
        loop.set_exception_handler(self.runner.on_loop_exception)
        missing = await probe_engine(self.memory_limit_mb) if self.probe_engine else []
        process.freeze_startup_objects()  # before the spares: what they leave behind is collected
        if not missing:
            for _ in range(SPARE_ISOLATES):
                self.spares.ready.append(await self.spares.new_isolate())
        self.memory.set_baseline()  # everything above is the resident baseline
        self.link.send(Ready(os.getpid(), tuple(missing), self.snapshot_refused))
        if missing:
            await asyncio.sleep(3600)
        server = asyncio.ensure_future(self.serve_forever())
        await self.link.read_forever(self.handle)
        server.cancel()


def _check_engine(check: Callable[[], list[str]]) -> None:
    """End the child at start-up, the reason on stderr, if the installed mini-racer lacks an
    internal the child relies on (the host reports the failed start with that reason)."""
    missing = check()
    if missing:
        raise SystemExit("codemode cannot run on the installed mini-racer: " + " ".join(missing))


def main(argv: list[str]) -> None:
    worker_id, memory_limit_mb, max_message_bytes, max_log_entries = (int(a) for a in argv[:4])
    probe_engine = argv[4:5] != ["probed"]
    mark = open_mark(argv[5] if len(argv) > 5 else "-")
    replies = int(argv[6]) if len(argv) > 6 and argv[6].isdigit() else None
    cpu = argv[7] if len(argv) > 7 else "any"
    process.set_parent_death_signal()
    process.ignore_interrupts()
    process.no_core_dumps()
    if cpu != "standby":
        process.pin_to(cpu)
    proto_in, proto_out = process.private_descriptors()
    limit_data(memory_limit_mb)
    _check_engine(miniracer_internals.check)
    process.init_engine(memory_limit_mb)
    _check_engine(lambda: miniracer_internals.check_library(miniracer_internals.engine_library()))
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
        adopt = await_adoption(proto_in, proto_out)
        child.worker_id = adopt.worker_id
        process.pin_to("any" if adopt.cpu < 0 else str(adopt.cpu))
    eventloop.run(child.main())  # uvloop's where installed: see eventloop.py
