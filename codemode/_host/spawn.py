"""Starting one child process: what it is started with, its pipes, and the handshake.

::

    host                                     child (python -m codemode._child ...)
    stdin transport ── frames (Run, Cancel, ...) ──▶ fd 0
    frames fd       ◀── frames (Ready, Call, Done, ...) ── fd 1
    stderr reader   ◀── V8's last words, tracebacks ── fd 2
    replies transport ── Reply frames only ──▶ an inherited fd (read by the isolate's thread)

The child answers ``Ready`` once its engine is loaded and its isolates are prepared; a
child that does not answer in time, or whose engine lacks a behaviour the runtime needs,
failed to start (``WORKER_CRASHED``: "Worker N failed to start.", the seed's text).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._faults import WorkerCrashed
from .._protocol import MAX_FRAME_BYTES, SNAPSHOT_TURNED_OFF, Ready, Reply, encode_frame
from .asyncio_internals import detach_transport, process_transport, reader_transport

__all__ = [
    "READY_TIMEOUT_S",
    "ChildPipes",
    "SpawnSettings",
    "child_argv",
    "child_environment",
    "handshake",
]

log = logging.getLogger("codemode.pool")

READY_TIMEOUT_S = 30.0
"""A child that has not answered Ready by then failed to start."""


@dataclass(frozen=True)
class SpawnSettings:
    """What every child of one pool is started with."""

    memory_limit_mb: int
    max_message_bytes: int
    max_log_entries: int
    env: dict[str, str] | None = None
    probed: bool = False
    """A child of this pool already passed the engine probe: its replacements skip it (same
    binary, same flags), which makes replacing a child cheaper."""
    pin_cpus: bool = True
    """Pin each child to one core (``_host/placement.py``)."""


_PASSED_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")


def _inherited_environment() -> dict[str, str]:
    """What a child inherits by default: enough to start Python, plus ``CODEMODE_*`` knobs.
    The host's credentials (API keys in the environment) stay in the host."""
    return {k: v for k, v in os.environ.items() if k in _PASSED_ENV or k.startswith("CODEMODE_")}


def child_environment(settings: SpawnSettings) -> dict[str, str]:
    """The environment a child of ``settings`` starts with."""
    env = dict(_inherited_environment() if settings.env is None else settings.env)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def child_argv(
    slot: int,
    settings: SpawnSettings,
    *,
    standby: bool,
    cpu: int | None,
    mark_fd: int | None,
    replies_fd: int,
) -> list[str]:
    """The command line of a child (read by ``codemode/_child/__main__.py``)."""
    return [
        sys.executable,
        "-m",
        "codemode._child",
        str(slot),
        str(settings.memory_limit_mb),
        str(settings.max_message_bytes),
        str(settings.max_log_entries),
        "probed" if settings.probed else "probe",
        "-" if mark_fd is None else str(mark_fd),
        str(replies_fd),
        "standby" if standby else "any" if cpu is None else str(cpu),
    ]


class ChildPipes:
    """The host's ends of one child's four pipes, and the child's until it is spawned.

    The pipes are made here, not by asyncio: with asyncio's PIPEs, a start cancelled while
    asyncio connects them (the loop ending, say) leaves ``Process.wait()`` waiting forever
    for pipes that never connected (CPython 3.11), and the loop's shutdown with it."""

    def __init__(self) -> None:
        self.child_in = self.child_out = self.child_err = self.child_replies = -1
        """The child's ends, until it is spawned (:meth:`open` makes them)."""
        self._unconnected: list[int] = []
        self.stdin: asyncio.WriteTransport | None = None
        self.replies: asyncio.WriteTransport | None = None
        """The pipe that carries only the answers to the child's calls: its isolate's own
        thread reads them there while the program waits (codemode/_child/main.py, park)."""
        self.frames_fd: int | None = None
        """The child's protocol pipe, read by the loop itself (``_host/reader.py``)."""
        self.stderr: asyncio.StreamReader | None = None

    def open(self) -> None:
        """Make the four pipes (before the child is spawned)."""
        self.child_in, host_out = os.pipe()
        host_in, self.child_out = os.pipe()
        host_err, self.child_err = os.pipe()
        self.child_replies, host_replies = os.pipe()
        self._unconnected = [host_out, host_in, host_err, host_replies]

    async def connect(self, loop: asyncio.AbstractEventLoop) -> None:
        """Connect the host's ends to ``loop`` (the child exists by now)."""
        ours = self._unconnected
        self.stdin, _ = await loop.connect_write_pipe(
            asyncio.BaseProtocol, os.fdopen(ours.pop(0), "wb", buffering=0)
        )
        self.frames_fd = ours.pop(0)
        self.stderr = await _read_pipe(loop, ours.pop(0))
        self.replies, _ = await loop.connect_write_pipe(
            asyncio.BaseProtocol, os.fdopen(ours.pop(0), "wb", buffering=0)
        )

    def close_child_ends(self) -> None:
        """The child holds its ends now (or will never start): the host's copies go."""
        for fd in (self.child_in, self.child_out, self.child_err, self.child_replies):
            os.close(fd)

    def close_unconnected(self) -> None:
        """A start that failed: close what was not handed to a transport."""
        for fd in self._unconnected:
            os.close(fd)
        self._unconnected.clear()
        if self.frames_fd is not None:
            os.close(self.frames_fd)
            self.frames_fd = None

    def write(self, message: Any) -> None:
        assert self.stdin is not None
        if self.stdin.is_closing():
            return  # the child is gone (its exit is being handled): nobody would read it
        self.stdin.write(encode_frame(message))

    def write_reply(self, reply: Reply) -> None:
        """A call's answer, on the reply pipe (on stdin for a child started without one)."""
        replies = self.replies
        if replies is None:
            self.write(reply)
        elif not replies.is_closing():
            replies.write(encode_frame(reply))

    def close_writers(self) -> None:
        for transport in (self.stdin, self.replies):
            if transport is not None:
                transport.close()

    def forget_loop(self, proc: asyncio.subprocess.Process | None) -> None:
        """The loop that owns these pipes is gone (or elsewhere): close their descriptors
        here and keep the transports from closing later on that loop."""
        subprocess_transport = process_transport(proc)
        if self.frames_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.frames_fd)
            self.frames_fd = None
        for transport in (subprocess_transport, self.stdin, self.replies, reader_transport(self.stderr)):
            if transport is not None:
                detach_transport(transport, close_pipe=transport is not subprocess_transport)


async def _read_pipe(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=MAX_FRAME_BYTES)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader


async def handshake(ready: asyncio.Future[Ready], slot: int, kill: Callable[[], None]) -> None:
    """Wait for a child's ``Ready`` (``ready``); raise WORKER_CRASHED naming what is
    missing, once ``kill`` ended the child, if it did not answer in time or its engine
    lacks a behaviour the runtime needs. Says once why children run without the snapshot."""
    try:
        answer = await asyncio.wait_for(asyncio.shield(ready), READY_TIMEOUT_S)
    except TimeoutError:
        kill()
        raise WorkerCrashed(
            f"Worker {slot} failed to start.",
            causes=(f"The child did not answer within {READY_TIMEOUT_S:.0f} s.",),
        ) from None
    if answer.no_snapshot is not None:
        _say_no_snapshot(answer.no_snapshot)
    if not answer.missing:
        return
    kill()
    behaviours = ", ".join(answer.missing)
    raise WorkerCrashed(
        f"Worker {slot} failed to start.",
        causes=(
            f"The installed mini-racer engine {behaviours}. This executor needs an "
            "engine that does all of these; install a mini-racer release that does "
            "(see docs/failures.md).",
        ),
    )


_NO_SNAPSHOT_SAID: set[str] = set()


def _say_no_snapshot(reason: str) -> None:
    """Log, once per process and reason, that children evaluate the runtime in every
    isolate: the same behaviour, more CPU a run (docs/performance.md). A warning, unless
    it was asked for (``CODEMODE_CHILD_SNAPSHOT=off``)."""
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
