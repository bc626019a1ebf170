"""The child's end of the protocol pipes: the host's frames in, the child's frames out.

Frames are length-prefixed msgpack messages (codemode/_protocol.py). The child writes them
from the loop and from an isolate's thread (a tool call leaves from there), one whole frame
at a time; it reads them on the loop, acting on each in the iteration that read it. A frame
the child cannot act on ends the process with the reason on stderr: the host reports that
as the child's crash, and no frame can leave the child waiting.
"""

from __future__ import annotations

import asyncio
import os
import threading
import traceback
from collections.abc import Callable
from typing import Any

import msgspec

from .._protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    Adopt,
    FrameTooLarge,
    HostMessage,
    PipeFrames,
    Shutdown,
    Waiting,
    encode_frame,
)

__all__ = ["HostLink", "await_adoption"]


class HostLink:
    """The protocol pipes of one child: :meth:`send` from any thread, :meth:`read_forever`
    on the loop."""

    def __init__(self, proto_in: int, proto_out: int) -> None:
        self.proto_in = proto_in
        self.proto_out = proto_out
        self._send_lock = threading.Lock()
        """Frames go out from the loop and from an isolate's thread (a tool call)."""
        self.decoder = msgspec.msgpack.Decoder(HostMessage)

    def send(self, message: Any) -> None:
        data = encode_frame(message)
        with self._send_lock:  # one whole frame at a time
            n = os.write(self.proto_out, data)
            if n < len(data):  # (a pipe takes a small frame whole: the rest is rare)
                view = memoryview(data)[n:]
                while view:
                    n = os.write(self.proto_out, view)
                    view = view[n:]

    async def read_forever(self, handle: Callable[[HostMessage], None]) -> None:
        """Hand the host's messages to ``handle`` as they arrive, for as long as the host is
        there.

        The loop reads the pipe itself, into one buffer: a frame is handled in the
        iteration that read it, with no stream or task in between (a tool call's reply is
        one frame, so this is on its hot path)."""
        loop = asyncio.get_running_loop()
        frames = PipeFrames(self.proto_in)
        decode = self.decoder.decode

        def readable() -> None:
            try:
                bodies = frames.read()
                if bodies is None:
                    os._exit(0)  # the host is gone: nothing left to serve
                for body in bodies:
                    handle(decode(body))
            except FrameTooLarge:
                os._exit(3)
            except Exception:
                traceback.print_exc()
                os._exit(3)

        loop.add_reader(frames.fd, readable)
        await loop.create_future()  # the process ends in os._exit


def await_adoption(proto_in: int, proto_out: int) -> Adopt:
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
