"""A fleet job, step by step: ``fleet_bench.py --steps``.

Marks a wall-clock time (``time.time_ns``: one clock for every process on the machine) at
each step of a job, in the host and in the worker, by wrapping the functions that take the
step; runs trivial jobs one at a time, and prints, for each step, the median time since the
host's ``execute`` was called and since the step before. The worker is started through
``ab_worker.py`` with ``CODEMODE_BENCH_STEPS`` naming the file its marks go to.

The wrappers cost a few microseconds each, and the marks are written as they are taken;
the table is for finding where a job's time goes, not for the targets (the main run's).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

ENV = "CODEMODE_BENCH_STEPS"

STEPS = (
    ("h_submit", "host: execute called"),
    ("h_admit_send", "host: admission sent (job spec, message, session)"),
    ("h_admit_reply", "host: admission answered (Lua: slot, LPUSH)"),
    ("w_popped", "worker, consumer thread: message popped (kombu's BRPOP)"),
    ("w_recorded", "consumer: kombu's unacked record written"),
    ("w_strategy", "consumer: the execute strategy runs (kombu's message, Celery's consumer)"),
    ("w_handed", "consumer: the request handed to the pool (job read, Request, reserved)"),
    ("w_body", "pool thread: the task body starts (woken, accepted, Celery's tracer)"),
    ("w_loop", "loop thread: the job starts (woken by the pool thread)"),
    ("w_claim_send", "loop: claim sent (Lua)"),
    ("w_claim_reply", "loop: claim answered"),
    ("w_exec", "loop: the isolate run starts"),
    ("w_exec_end", "loop: the isolate run ends"),
    ("w_finish_send", "loop: outcome sent (Lua: up, slot, lease)"),
    ("h_done", "host: outcome read"),
)


class Marks:
    """Where one process writes its marks: a line ``name time_ns`` each."""

    def __init__(self, path: str | Path) -> None:
        self._out: TextIO = Path(path).open("a", buffering=1)  # noqa: SIM115 (open for the process's life)

    def __call__(self, name: str) -> None:
        self._out.write(f"{name} {time.time_ns()}\n")


def _around(
    owner: Any, attribute: str, before: Callable[[], None], after: Callable[[], None] | None = None
) -> None:
    """Wrap the coroutine function ``owner.attribute`` with a mark before and after."""
    inner = getattr(owner, attribute)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        before()
        result = await inner(*args, **kwargs)
        if after is not None:
            after()
        return result

    setattr(owner, attribute, wrapped)


def mark_worker(path: str) -> None:
    """Mark the worker's steps (``ab_worker.py``, before the worker starts)."""
    from codemode import _executor
    from codemode.fleet.redis import scripts
    from codemode.fleet.worker import runner, runtime, strategy, transport

    mark = Marks(path)
    take = transport.RedisChannel._take

    def _take(self: Any, queue: str, item: bytes) -> None:
        mark("w_popped")
        take(self, queue, item)

    transport.RedisChannel._take = _take  # type: ignore[method-assign]
    append = transport.RedisQoS.append

    def recorded(self: Any, message: Any, delivery_tag: Any) -> None:
        append(self, message, delivery_tag)
        mark("w_recorded")

    transport.RedisQoS.append = recorded  # type: ignore[method-assign]
    default = strategy.celery_default

    def celery_default(task: Any, app: Any, consumer: Any, **kwargs: Any) -> Any:
        handler = default(task, app, consumer, **kwargs)

        def marked(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any) -> None:
            mark("w_strategy")
            handler(message, body, ack, reject, callbacks)
            mark("w_handed")

        return marked

    strategy.celery_default = celery_default
    run_job = runtime.WorkerRuntime.run_job

    def marked_run_job(self: Any, job: Any) -> Any:
        mark("w_body")
        return run_job(self, job)

    runtime.WorkerRuntime.run_job = marked_run_job  # type: ignore[method-assign]
    _around(runner.JobRunner, "run", lambda: mark("w_loop"))
    _around(scripts.FleetScripts, "claim", lambda: mark("w_claim_send"), lambda: mark("w_claim_reply"))
    _around(scripts.FleetScripts, "finish", lambda: mark("w_finish_send"))
    _around(_executor.IsolateExecutor, "execute", lambda: mark("w_exec"), lambda: mark("w_exec_end"))


def mark_host(path: str) -> Marks:
    """Mark the host's admission (this process); returns the marker for the rest."""
    from codemode.fleet.redis import scripts

    mark = Marks(path)
    _around(scripts.FleetScripts, "admit", lambda: mark("h_admit_send"), lambda: mark("h_admit_reply"))
    return mark


def timeline(paths: list[Path], since_ns: int) -> list[tuple[str, float, float]]:
    """Each step's median time (us) since its job's ``h_submit`` and since the step before,
    from the marks in ``paths`` taken after ``since_ns``."""
    marks = sorted(
        (int(at), name)
        for path in paths
        for name, at in (line.split() for line in path.read_text().splitlines() if line)
        if int(at) > since_ns
    )
    jobs: list[dict[str, int]] = []
    for at, name in marks:
        if name == "h_submit":
            jobs.append({name: at})
        elif jobs and name not in jobs[-1]:
            jobs[-1][name] = at
    rows, previous = [], 0.0
    for name, _ in STEPS:
        seen = [(job[name] - job["h_submit"]) / 1000 for job in jobs if name in job]
        if not seen:
            continue
        at = statistics.median(seen)
        rows.append((name, at, at - previous))
        previous = at
    return rows


def table(rows: list[tuple[str, float, float]]) -> str:
    what = dict(STEPS)
    lines = [f"{'step (medians, us)':<76}{'at':>8}{'took':>8}", "-" * 92]
    lines += [f"{what[name]:<76}{at:>8.0f}{took:>8.0f}" for name, at, took in rows]
    return "\n".join(lines)
