"""Fault injection for the pool's own tests, loaded by a child process only when a test puts
this folder on the child's ``PYTHONPATH`` (Python imports ``sitecustomize`` at start-up) and
names a fault in ``CODEMODE_TEST_CHILD_FAULT``. The runtime package carries none of this.

Faults:

- ``garbage-frame``: the child answers its first run with a frame that is not a message, then
  starts nothing (the host must end it for the frame, as a typed fault with ``started=False``).
- ``deep-frame``: the child answers its first run with a Call whose unknown field nests 5,000
  levels deep (the host's decoder recurses into it and must still end the child for it).
- ``oom-long-trace``: as a program starts, the child prints V8's fatal out-of-memory line followed
  by a backtrace longer than the stderr tail the host keeps, and dies of SIGTRAP as V8 does.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from codemode._child.posted import EntryCall
    from codemode._protocol import Invoke, Run

FAULT = os.environ.get("CODEMODE_TEST_CHILD_FAULT", "")


def _garbage_frame() -> None:
    import time

    from codemode._child import run
    from codemode._protocol import FRAME_HEADER

    async def serve(self: run.Runner, msg: Run | Invoke) -> None:
        os.write(self.link.proto_out, FRAME_HEADER.pack(7) + b"garbage")
        time.sleep(60)

    run.Runner.serve = serve  # type: ignore[method-assign]  # the fault is this replaced method


def _deep_frame() -> None:
    import time

    import msgspec

    from codemode._child import run
    from codemode._protocol import FRAME_HEADER

    async def serve(self: run.Runner, msg: Run | Invoke) -> None:
        fields = {"type": "call", "run_id": 1, "call_id": 1, "provider": "a", "tool": "b", "args_json": "[]"}
        head = bytes([0x80 | (len(fields) + 1)]) + b"".join(
            msgspec.msgpack.encode(k) + msgspec.msgpack.encode(v) for k, v in fields.items()
        )
        body = head + msgspec.msgpack.encode("later") + b"\x91" * 5000 + b"\x90"
        os.write(self.link.proto_out, FRAME_HEADER.pack(len(body)) + body)
        time.sleep(60)

    run.Runner.serve = serve  # type: ignore[method-assign]  # the fault is this replaced method


def _oom_long_trace() -> None:
    import signal

    from codemode._child import engine, run

    serving = False
    real_serve, real_begin = run.Runner.serve, engine.Isolate.begin

    async def serve(self: run.Runner, msg: Run | Invoke) -> None:
        nonlocal serving
        serving = True  # isolates began before this were the child's own (its start-up probe)
        await real_serve(self, msg)

    def begin(
        self: EntryCall, loop: asyncio.AbstractEventLoop, payload_json: str, *, invoke: bool = False
    ) -> engine.Entry:
        if not serving:
            return real_begin(self, loop, payload_json, invoke=invoke)
        trace = "".join(f"    libmini_racer.so(v8::internal::Frame{i}+0x{i:x})\n" for i in range(600))
        os.write(2, f"\n#\n# Fatal JavaScript out of memory: Scavenger\n#\n{trace}".encode())
        os.kill(os.getpid(), signal.SIGTRAP)
        raise AssertionError("unreachable: SIGTRAP ends the process")

    # The fault is these replaced methods.
    run.Runner.serve = serve  # type: ignore[method-assign]
    engine.Isolate.begin = begin  # type: ignore[method-assign]


if FAULT == "garbage-frame":
    _garbage_frame()
elif FAULT == "deep-frame":
    _deep_frame()
elif FAULT == "oom-long-trace":
    _oom_long_trace()
elif FAULT:
    raise SystemExit(f"CODEMODE_TEST_CHILD_FAULT={FAULT!r} names no fault this plugin injects")
