"""Closing an isolate waits for its thread to finish what was posted to it, before the
context is freed.

mini-racer's teardown does not wait for a task that is already running and takes the
engine context out from under it: a task that starts just as the context is freed reads a
null pointer and the child dies with SIGSEGV. So ``Isolate.close`` drains the thread first
(``Isolate.drain_soon``, then waiting for its answer). Here a script still running on the
isolate's thread when ``close`` is called must have finished before ``close`` returns, the
drain posted early or not: a close that freed at once would return in microseconds (and
could crash the process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_close_waits_for_the_task_running_on_the_isolate_thread() -> None:
    script = textwrap.dedent("""
        import asyncio, json, time
        from codemode._child.limits import MB
        from codemode._child.main import Child
        from codemode._child.runtime import LAYOUT
        from codemode._child.engine import Isolate

        async def main():
            child = Child(1, 128, 1 << 20, 100, 0, 1)
            child.load_stdlib()
            child.install_runtime()
            loop = asyncio.get_running_loop()
            closes = []
            for i in range(4):
                isolate = Isolate()
                await isolate.prepare(loop, child.boot_values(), 128 * MB, LAYOUT)
                busy = asyncio.ensure_future(isolate.ctx.eval_cancelable(
                    "const t = Date.now(); while (Date.now() - t < 150) {} 7"))
                await asyncio.sleep(0.02)  # the script is running now
                if i % 2:
                    isolate.drain_soon()  # as the child does when a run ends: posted early
                started = time.monotonic()
                await asyncio.to_thread(isolate.close)
                closes.append(time.monotonic() - started)
                await asyncio.wait({busy}, timeout=5)  # its answer, or its cancellation
            print(json.dumps({"closes": closes}))

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    closes = json.loads(proc.stdout.strip().splitlines()[-1])["closes"]
    # The script had ~130 ms left when close was called; closing waited for it.
    assert all(c >= 0.08 for c in closes), closes
