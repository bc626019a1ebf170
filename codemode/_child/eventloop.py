"""The event loop each child runs: uvloop's (libuv, in C) where it is installed, which
codemode's dependencies do on Linux and macOS; asyncio's own elsewhere, or everywhere with
``CODEMODE_LOOP=asyncio`` in the host's environment (children inherit it).

The loop's own work (its iterations, callbacks, timers and the wake-ups from the isolate's
thread) is a good part of what a run costs a child, and uvloop's costs less of it, on a
trivial run and more so on a tool call (``benchmarks/bench.py --env-ab CODEMODE_LOOP=...``
measures the two side by side).

Only the children's loops: the host's loop is the host's (an async host runs codemode on its
own). The sync facade's thread keeps asyncio's: with it on uvloop, one full test run hung
after the host killed a wedged child (the run in flight never ended, the loop sat idle), and
asyncio's child watcher is the one the fault tests have always exercised from that thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any

__all__ = ["ENV_LOOP", "run"]

ENV_LOOP = "CODEMODE_LOOP"


def run(main: Coroutine[Any, Any, None]) -> None:
    """``asyncio.run(main)``, on uvloop's loop unless it is missing or not wanted."""
    if os.environ.get(ENV_LOOP, "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            uvloop.run(main)
            return
    asyncio.run(main)
