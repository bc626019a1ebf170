"""Fault injection for the canvas tests, loaded by a worker's isolate children only when a
test puts this folder on the worker's ``PYTHONPATH`` and names a token folder in
``CODEMODE_TEST_CANVAS_FAULTS``. The runtime package carries none of this.

A program whose code holds ``/*canvas-fault:<kind>:<token>*/`` gets the fault once: the
first child that removes the file ``<token>`` from the token folder injects it, every
later try of the same program runs normally (so a retry can succeed). Kinds:

- ``before-start``: the child answers the run with a frame that is not a message before it
  marks the run started (the pool ends it: WORKER_CRASHED, ``started=False``);
- ``after-start``: the child kills itself with SIGKILL as the program begins, after marking
  it started (WORKER_CRASHED, ``started=True``).

In any other process (the worker itself) the plugin does nothing.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from codemode._child.posted import EntryCall
    from codemode._protocol import Invoke, Run

TOKENS = os.environ.get("CODEMODE_TEST_CANVAS_FAULTS", "")
TAG = re.compile(r"/\*canvas-fault:(before-start|after-start):([\w-]+)\*/")


def _is_child() -> bool:
    try:
        with open("/proc/self/cmdline", "rb") as cmdline:
            return b"codemode._child" in cmdline.read()
    except OSError:
        return False


def _take(token: str) -> bool:
    """Whether this process is the first to use ``token`` (removing its file)."""
    try:
        os.unlink(os.path.join(TOKENS, token))
    except FileNotFoundError:
        return False
    return True


def _install() -> None:
    import signal
    import time

    from codemode._child import engine, run
    from codemode._protocol import FRAME_HEADER

    real_serve, real_begin = run.Runner.serve, engine.Isolate.begin
    kill_next: list[bool] = []

    async def serve(self: run.Runner, msg: Run | Invoke) -> None:
        found = TAG.search(getattr(msg, "code", ""))
        if found is not None and _take(found.group(2)):
            if found.group(1) == "before-start":
                os.write(self.link.proto_out, FRAME_HEADER.pack(7) + b"garbage")
                time.sleep(60)
            else:
                kill_next.append(True)
        await real_serve(self, msg)

    def begin(
        self: EntryCall, loop: asyncio.AbstractEventLoop, payload_json: str, *, invoke: bool = False
    ) -> engine.Entry:
        if kill_next:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_begin(self, loop, payload_json, invoke=invoke)

    # The faults are these replaced methods.
    run.Runner.serve = serve  # type: ignore[method-assign]
    engine.Isolate.begin = begin  # type: ignore[method-assign]


if TOKENS and _is_child():
    _install()
