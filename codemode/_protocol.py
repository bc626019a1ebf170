"""Wire messages between the host and a child process.

Frames are a 4-byte big-endian length followed by one msgpack-encoded message. Each
direction is a tagged union of frozen ``msgspec.Struct`` types, decoded by one reused
decoder and dispatched with ``match``. Only data crosses; nothing is pickled.

Schema evolution: new fields get defaults; a field is never retyped or renamed.

::

    host ──Run/Reply/Cancel/Shutdown──▶ child
    host ◀──Ready/Call/Fetch/Log/Done/Recycle── child

A standby child (started with its engine loaded, waiting to replace one that exits) says
``Waiting`` once loaded, then reads nothing but ``Adopt`` (or ``Shutdown``) until it is
given a slot; then it answers Ready.
"""

from __future__ import annotations

import os
import struct
from typing import Final

import msgspec

from ._outcome import LogEntry, ProgramError
from ._request import Provider

__all__ = [
    "FRAME_HEADER",
    "MAX_FRAME_BYTES",
    "READ_CHUNK",
    "Adopt",
    "Call",
    "Cancel",
    "ChildMessage",
    "Done",
    "Fetch",
    "FrameSplitter",
    "FrameTooLarge",
    "HostMessage",
    "Idle",
    "Invoke",
    "Log",
    "PipeFrames",
    "Ready",
    "Recycle",
    "Release",
    "Reply",
    "Run",
    "Shutdown",
    "Started",
    "Waiting",
    "encode_frame",
]

FRAME_HEADER: Final = struct.Struct(">I")
MAX_FRAME_BYTES: Final = 256 * 1024 * 1024
"""Frames above this are a protocol violation: the peer is treated as broken."""
READ_CHUNK: Final = 64 * 1024
"""Bytes a reader takes from a pipe at a time, into a buffer it keeps. (asyncio's pipe
transport reads 256 KiB into a new bytes object each time: above malloc's mmap threshold,
so every frame cost an mmap, a page fault, an mremap and a munmap, with its TLB flush.)"""


# ---- host -> child -------------------------------------------------------------------


class Run(msgspec.Struct, frozen=True, tag="run"):
    """Start one program in the child's next fresh isolate."""

    run_id: int
    code: str
    providers: tuple[Provider, ...]
    timeout_ms: int
    count_host_waits: bool
    network: str  # "host" (the host performs requests), "policy", or "none"
    started_at: float  # time.monotonic() in the host when the run was handed over
    retain: bool = False  # keep the isolate if the program returns a request handler
    modules_key: str = ""  # content hash of the run's module bundle ("" = no loader)
    modules_bundle: str | None = None  # the bundle itself, sent once per child per key
    inputs_json: str | None = None  # the entry function's one argument, as JSON (None: none)
    stream_logs: bool = False  # send each kept log entry as a Log when it is written


class Invoke(msgspec.Struct, frozen=True, tag="invoke"):
    """Call the request handler a retained isolate holds; a run of its own."""

    run_id: int
    handle_id: int  # the run_id of the run that retained the isolate
    request_json: str  # {"method", "url", "headers": [[k, v]], "body": latin-1 str | null}
    timeout_ms: int
    count_host_waits: bool
    network: str
    started_at: float


class Release(msgspec.Struct, frozen=True, tag="release"):
    """Dispose a retained isolate; the child serves ordinary runs again."""

    handle_id: int


class Reply(msgspec.Struct, frozen=True, tag="reply"):
    """The answer to a Call (a tool envelope) or a Fetch (a plain response as JSON)."""

    run_id: int
    call_id: int
    body: str


class Cancel(msgspec.Struct, frozen=True, tag="cancel"):
    """The host's own clock ran out (or the caller went away): stop the run."""

    run_id: int
    reason: str = "timeout"


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    """Exit cleanly."""


class Adopt(msgspec.Struct, frozen=True, tag="adopt"):
    """To a standby child: take slot ``worker_id``, pinned to core ``cpu`` (-1: any core),
    prepare isolates and answer Ready."""

    worker_id: int
    cpu: int = -1


HostMessage = Run | Invoke | Release | Reply | Cancel | Shutdown | Adopt


# ---- child -> host -------------------------------------------------------------------


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """The child started; ``missing`` lists engine behaviours the probe did not find;
    ``no_snapshot`` says why its isolates evaluate the runtime one by one instead of
    starting from its snapshot (None: they start from it)."""

    pid: int
    missing: tuple[str, ...] = ()
    no_snapshot: str | None = None


SNAPSHOT_TURNED_OFF = "turned off"
"""``Ready.no_snapshot`` when the host asked for no snapshot (``CODEMODE_CHILD_SNAPSHOT=off``):
the one reason that is not news to it."""


class Call(msgspec.Struct, frozen=True, tag="call"):
    """A tool call: three strings out of the isolate."""

    run_id: int
    call_id: int
    provider: str
    tool: str
    args_json: str


class Fetch(msgspec.Struct, frozen=True, tag="fetch"):
    """An outbound request from the program, as plain data (JSON)."""

    run_id: int
    call_id: int
    request_json: str


class Done(msgspec.Struct, frozen=True, tag="done"):
    """The run ended. ``kind`` is ok, throw, timeout, memory, ceiling, or handle (the
    program returned a request handler and its isolate is now retained)."""

    run_id: int
    kind: str
    result_json: str | None = None
    error: str | None = None
    logs: tuple[LogEntry, ...] = ()
    settled: bool = True  # False: the engine may still be busy; wait for Idle (or an exit)
    error_detail: ProgramError | None = None  # kind "throw": the program's name, position, stack


class Log(msgspec.Struct, frozen=True, tag="log"):
    """One log entry of a run that asked for them as they are written (``Run.stream_logs``):
    sent as the child keeps it, so it is also in the run's ``Done.logs``."""

    run_id: int
    entry: LogEntry


class Started(msgspec.Struct, frozen=True, tag="started"):
    """The child is about to hand the run to its isolate: from here on, program code may run.
    A child that dies before saying this never started the run (the host may retry it).
    Children say it in the started mark instead (codemode/_host/mark.py: no wake-up of the host per
    run); the frame is what a child that could not map the mark sends."""

    run_id: int


class Idle(msgspec.Struct, frozen=True, tag="idle"):
    """The child is ready for another run after a Done that did not say ``settled``."""


class Waiting(msgspec.Struct, frozen=True, tag="waiting"):
    """A standby child has loaded its engine and waits for ``Adopt``."""


class Recycle(msgspec.Struct, frozen=True, tag="recycle"):
    """A planned exit (e.g. the engine wedged after a timeout): not a crash."""

    reason: str


ChildMessage = Ready | Started | Call | Fetch | Log | Done | Idle | Recycle | Waiting

_encoder = msgspec.msgpack.Encoder()


def encode_frame(message: HostMessage | ChildMessage) -> bytes:
    body = _encoder.encode(message)
    return FRAME_HEADER.pack(len(body)) + body


class FrameTooLarge(Exception):
    """A frame's header announced more than MAX_FRAME_BYTES: the peer is broken."""


class FrameSplitter:
    """Whole frames out of a byte stream, fed as it arrives.

    A reader that feeds this from the loop's own readiness callback acts on a frame in the
    loop iteration that read it: no stream, and no task woken per frame (a tool call's
    reply is one frame, so this is on its hot path)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Append ``data``; return the bodies of the frames it completed, in order.

        With nothing held from before (the usual case: a read brings whole frames), the
        frames are cut from ``data`` itself and only a partial one is kept: each body is
        copied once, not into the buffer, out of it, and once more by the slice."""
        buffer = self._buffer
        if buffer:
            buffer += data
            with memoryview(buffer) as view:
                bodies, start = _cut(view)
            del buffer[:start]
            return bodies
        with memoryview(data) as view:
            bodies, start = _cut(view)
            if start < len(view):
                buffer += view[start:]
        return bodies


def _cut(view: memoryview) -> tuple[list[bytes], int]:
    """The bodies of the whole frames at the start of ``view``, and where they end."""
    bodies: list[bytes] = []
    header = FRAME_HEADER.size
    total = len(view)
    start = 0
    while total - start >= header:
        (size,) = FRAME_HEADER.unpack_from(view, start)
        if size > MAX_FRAME_BYTES:
            raise FrameTooLarge(f"a frame of {size} bytes, above the protocol's limit")
        end = start + header + size
        if total < end:
            break
        bodies.append(bytes(view[start + header : end]))
        start = end
    return bodies, start


class PipeFrames:
    """The frames arriving on a pipe, read by the loop's readiness callback (``add_reader``)
    into one buffer kept for the pipe's life (see READ_CHUNK)."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self._splitter = FrameSplitter()
        self._chunk = bytearray(READ_CHUNK)
        self._view = memoryview(self._chunk)
        self.drained = True
        """Whether the last read took all the pipe held (it filled less than its chunk): a
        reader that drains the pipe need not read again to learn that it is empty."""

    def read(self) -> list[bytes] | None:
        """The bodies of the frames that what the pipe holds now completes (``[]`` when it
        holds nothing yet), or ``None`` once the pipe has closed. Raises FrameTooLarge."""
        try:
            n = os.readv(self.fd, [self._chunk])
        except BlockingIOError:
            self.drained = True
            return []
        except OSError:
            return None
        if n == 0:
            return None
        self.drained = n < len(self._chunk)
        return self._splitter.feed(self._view[:n])
