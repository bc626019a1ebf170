"""The child's start-up check of the engine behaviours it depends on.

The pool's first child runs it before it answers ``Ready``; what is missing goes in the
``Ready`` frame, and the host refuses to serve with such an engine (its replacements run the
same binary with the same flags and skip the check).
"""

from __future__ import annotations

import asyncio

import msgspec

from .limits import MB
from .runtime import LAYOUT
from .spares import boot_values

__all__ = ["probe_engine"]


async def probe_engine(memory_limit_mb: int) -> list[str]:
    """Check every engine behaviour this child depends on; return what is missing."""
    from .engine import Isolate

    loop = asyncio.get_running_loop()
    missing: list[str] = []
    isolate = Isolate()
    try:
        await isolate.prepare(loop, boot_values(), memory_limit_mb * MB, LAYOUT)
    except Exception as exc:
        return [f"cannot create an isolate and install the runtime ({exc})"]
    rang = asyncio.Event()
    isolate.on_bell = rang.set
    ctx = isolate.ctx
    try:
        await ctx.eval_cancelable("globalThis.__probe = 1")
        await isolate.start(
            msgspec.json.encode(
                ["async () => { await new Promise((r) => setTimeout(r, 1)); return 7 }", [], "none"]
            ).decode()
        )
        await asyncio.wait_for(rang.wait(), 2.0)
        if ["d", "7"] not in isolate.read_journal():
            missing.append("does not run a timer through Atomics.waitAsync")
    except Exception:
        missing.append("does not deliver a notification from the isolate to the host")
    try:
        task = asyncio.ensure_future(ctx.eval_cancelable("for(;;){}"))
        await asyncio.sleep(0.002)
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
        if not await isolate.responsive(1.0):
            missing.append("does not stop a running script when its task is cancelled")
    except Exception:
        missing.append("does not stop a running script when its task is cancelled")
    try:
        if not isinstance(isolate.memory_limit_reached(), bool):
            missing.append("does not report reaching the hard memory limit")
    except Exception:
        missing.append("does not report reaching the hard memory limit")
    if not missing:
        isolate.close()
    return missing
