"""The consumer's start gate (``codemode/fleet/worker/gate.py``) turned on and off in a
running worker: the other side of ``fleet_bench.py --gate-ab``.

``ab_worker.py`` (with ``CODEMODE_BENCH_GATE_SWITCH`` set) installs a remote control command
of Celery's kind (``celery.worker.control.control_command``), ``codemode_bench_gate``, that
sets the bound of the wait in every runtime of the worker process: 0, and the consumer goes
on at once after each hand-off, as it did before the gate. One worker, so both sides share
its cores, its isolate children and its Redis.
"""

from __future__ import annotations

from typing import Any

ENV = "CODEMODE_BENCH_GATE_SWITCH"
COMMAND = "codemode_bench_gate"


def install() -> None:
    """Register the command, and keep each runtime the worker makes (before it starts)."""
    from celery.worker.control import control_command

    from codemode.fleet.worker import runtime
    from codemode.fleet.worker.gate import START_WAIT_S

    runtimes: list[Any] = []
    init = runtime.WorkerRuntime.__init__

    def kept(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        runtimes.append(self)

    runtime.WorkerRuntime.__init__ = kept  # type: ignore[method-assign]

    @control_command(args=[("on", int)], signature="<0|1>")  # type: ignore[untyped-decorator]
    def codemode_bench_gate(state: Any, on: int) -> dict[str, str]:
        for each in runtimes:
            each.gate.bound_s = START_WAIT_S if on else 0.0
        return {"ok": f"start gate {'on' if on else 'off'} in {len(runtimes)} runtime(s)"}
