"""Reading one child's frames: the only place the host learns that the child died.

The loop reads the child's protocol pipe itself, into one buffer: a frame is handled in
the iteration that read it, with no stream or task in between (each tool call is one frame
each way, so this is on its hot path). End of file is the child's death; a frame too
large, unreadable or malformed is the child's fault too, and the child is killed for it.
No frame can stop the reader: a message the host fails to handle fails the run in flight.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import msgspec

from .._faults import WorkerCrashed
from .._protocol import ChildMessage, FrameTooLarge, PipeFrames

if TYPE_CHECKING:
    from .child import ChildProcess

__all__ = ["read_frames"]

log = logging.getLogger("codemode.pool")

_decoder = msgspec.msgpack.Decoder(ChildMessage)


def read_frames(child: ChildProcess, loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Act on ``child``'s frames (on ``fd``) as they arrive, until its pipe closes, then
    tell it (:meth:`ChildProcess.frames_ended`)."""
    frames = PipeFrames(fd)
    on_message = child.on_message
    decode = _decoder.decode

    def stop(reason: str | None) -> None:
        loop.remove_reader(fd)
        child.frames_ended(fd, reason)

    def readable() -> None:
        try:
            bodies = frames.read()
        except FrameTooLarge as exc:
            stop(f"sent {exc}")
            return
        except Exception as exc:  # a bug here must not leave a caller waiting forever
            log.exception("child %s reader failed", child.id)
            stop(f"could not be read ({type(exc).__name__})")
            return
        if bodies is None:
            stop(None)
            return
        active = child.run
        if active is not None and active.next_turn is None:
            active.started_this_turn = 0  # a new read: a new share (see CallService._start)
        for body in bodies:
            try:
                message = decode(body)
            except (msgspec.DecodeError, RecursionError) as exc:  # (deep unknown fields recurse)
                stop(f"sent a malformed message ({exc})")
                return
            try:
                on_message(message)
            except Exception as exc:  # never let one message stop the reader
                log.exception("child %s: could not handle %s", child.id, type(message).__name__)
                child.fail_active(
                    WorkerCrashed(
                        f"Worker {child.id}: the host could not handle the child's "
                        f"{type(message).__name__} message ({type(exc).__name__}).",
                        started=True,
                    )
                )

    loop.add_reader(fd, readable)
