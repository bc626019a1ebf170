"""Fan out 1,000 codemode programs on the fleet and aggregate them in a Celery chord.

Each header job prices one order (a program with the order as its inputs); the chord's
callback is one more program, which gets every header result and sums the served ones,
counting program errors and faults. Faults come back as data (``on_fault="return"``), so
the callback sees every job. A WORKER_CRASHED with ``started=False`` (an isolate child
that died before the program began) is retried by Celery, as the ``codemode.run`` task
declares; one with ``started=True`` would be retried only for a job marked idempotent,
and these jobs are not. Prints one JSON line; exits 1 when a fault remained.

Needs a fleet whose workers keep results (docs/pipelines.md, "Celery canvas")::

    export CODEMODE_REDIS_URL=redis://localhost:6379/0
    export CODEMODE_RESULT_BACKEND=$CODEMODE_REDIS_URL
    codemode worker &
    python examples/canvas_chord.py            # --count N for fewer programs
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from celery import chord

from codemode.fleet.canvas import canvas_app, run_signature

PRICE = """(order) => {
    if (order.qty < 0) throw new Error(`order ${order.id} has a negative quantity`)
    return { id: order.id, cents: Math.round(order.qty * order.unitCents * 1.2) }
}"""

SUMMARY = """(results) => {
    const served = results.filter(r => !r.fault && r.error === null)
    const faults = {}
    for (const r of results.filter(r => r.fault)) faults[r.fault.code] = (faults[r.fault.code] ?? 0) + 1
    return {
        jobs: results.length,
        totalCents: served.reduce((sum, r) => sum + r.result.cents, 0),
        programErrors: results.filter(r => !r.fault && r.error !== null).length,
        retried: results.filter(r => (r.attempts ?? 1) > 1).length,
        faults,
    }
}"""


def orders(count: int) -> list[dict[str, Any]]:
    """``count`` orders; every hundredth has a negative quantity (its program throws)."""
    return [{"id": n, "qty": -1 if n % 100 == 99 else n % 7 + 1, "unitCents": 250} for n in range(count)]


def fan_out(count: int, *, timeout_s: float = 600.0) -> dict[str, Any]:
    """Price ``count`` orders in one chord; returns the callback program's summary."""
    app = canvas_app()
    try:
        header = [run_signature(PRICE, inputs=order, on_fault="return", app=app) for order in orders(count)]
        outcome = chord(header)(run_signature(SUMMARY, app=app)).get(timeout=timeout_s)
    finally:
        app.close()
    if outcome["error"] is not None:
        raise RuntimeError(f"the summary program failed: {outcome['error']}")
    summary: dict[str, Any] = outcome["result"]
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="programs in the chord (default: 1000)")
    args = parser.parse_args(argv)
    summary = fan_out(args.count)
    print(json.dumps(summary, sort_keys=True))
    return 1 if summary["faults"] else 0


if __name__ == "__main__":
    sys.exit(main())
