"""Fleet versus in-process, measured in one run on this machine.

Starts a private redis-server and one codemode worker (``python -m workers``, threads pool,
concurrency 2), and an in-process IsolateExecutor with the same pool size, then measures:

* a trivial job's round trip (``() => 0``), in process and through the fleet with task
  events off and on (the same worker, turned over between blocks by Celery's remote
  control: :class:`RemoteControl`);
* a job making 10 sequential tool calls, fleet and in-process (each timed row alternates
  the two in blocks of BLOCK jobs);
* one tool call over the reply channel (from the slope of 0 vs 50 sequential calls),
  against a raw Redis list round trip (RPUSH/BLPOP between two processes, hiredis), timed
  in blocks between the blocks of jobs (and once more after them, back to back);
* throughput of trivial jobs with 16 in flight from one host;
* Celery's own round trip on the same worker and queue: a ``codemode.ping`` task (no
  isolate, no claim: the worker pushes ``pong`` onto a list the host waits on), sent with
  Celery's ``send_task``, and sent as codemode's producer sends a job (the message's bytes
  made beforehand, one LPUSH: no kombu publisher on the sending side). What the fleet adds
  to a trivial job beyond the second is codemode's own framing (admission, claim, lease,
  the outcome on the reply channel).

Prints a table and writes ``fleet.json`` in the results directory (``outputs.py``)::

    python benchmarks/fleet_bench.py [--runs 200]
    python benchmarks/fleet_bench.py --quiet-start-ab   # what a quiet start saves
    python benchmarks/fleet_bench.py --busy 1           # beside a spinning neighbour

``--quiet-start-ab`` runs trivial jobs in alternating blocks of ten, with and without
``JobSpec.quiet_start`` (Started with the claim, as hosts that predate it ask), on one
worker, and prints both distributions.

``--worker-ab TREE`` runs two workers side by side, this tree's and the one in the source
tree ``TREE`` (its ``codemode``, ``workers`` and ``broker_config`` first on the worker's
PYTHONPATH; the host is this tree's for both), each on a Redis of its own, and times
trivial and 10-call jobs through each in alternating blocks, with each worker's CPU per
job: the A/B for a change to the worker::

    git worktree add /tmp/base HEAD~1
    python benchmarks/fleet_bench.py --worker-ab /tmp/base

``--events`` starts the workers of ``--worker-ab``, ``--pieces-ab`` and ``--steps`` with
task events on (``codemode worker --events``: what Flower watches).

``--pieces-ab`` judges each of the fleet's private pieces: fleets with their own Redis,
worker and host side by side, one with every piece and one per piece done the library's
way instead (``pieces.py``), trivial and 50-call jobs in alternating blocks; a piece earns
its place when it saves 0.3 ms of a trivial job or a quarter of a tool call::

    python benchmarks/fleet_bench.py --pieces-ab [--runs 600] [--events]

``--gate-ab`` times trivial jobs on one worker with the consumer's start gate
(``codemode/fleet/worker/gate.py``) on and off, and task events off and on, all four
switched by remote control between alternating blocks (``gate_switch.py``)::

    python benchmarks/fleet_bench.py --gate-ab [--runs 600]

``--steps`` marks the time at each step of ``--runs`` trivial jobs, in the host and in the
worker (``steps.py``), and prints each step's median: where a fleet job's time goes::

    python benchmarks/fleet_bench.py --steps --runs 300 [--events]

``--link-cost`` times one channel push (the push script, one message) sent through
redis-py's asyncio client and through the fleet's links (``codemode/fleet/redis/link.py``),
alternating in blocks, and prints wall time and this process's CPU per command::

    python benchmarks/fleet_bench.py --link-cost
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from neighbours import busy_neighbours
from outputs import RESULTS_DIR

from codemode import IsolateExecutor, tool_result
from codemode.fleet import FleetExecutor
from codemode.fleet.host.producer import transport_bytes
from codemode.fleet.settings import PING_TASK_NAME, BrokerSettings, WorkerSettings
from codemode.fleet.testing import WORKER_COMMAND, RedisServer, WorkerProcess

RESULTS = RESULTS_DIR / "fleet.json"


class EventfulWorker(WorkerProcess):
    """``codemode worker --events``: task events from the start."""

    def command(self) -> list[str]:
        return [*super().command(), "--events"]


def worker_class(events: bool) -> type[WorkerProcess]:
    return EventfulWorker if events else WorkerProcess


TOOLS = [{"name": "t", "tools": ["x"]}]
TEN_CALLS = "async () => { let s = 0; for (let i = 0; i < 10; i++) s += await t.x(i); return s }"
FIFTY_CALLS = "async () => { let s = 0; for (let i = 0; i < 50; i++) s += await t.x(i); return s }"

ECHO = """
import sys, redis
r = redis.Redis.from_url(sys.argv[1])
print("ready", flush=True)
while True:
    item = r.blpop(["ping"], timeout=1)  # not 0: redis-py 8 times a socket out in 5 s
    if item is None:
        continue
    if item[1] == b"stop":
        break
    r.rpush("pong", item[1])
"""


async def dispatch(provider: str, tool: str, args_json: str) -> str:
    return tool_result(1)


def summarize(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
        "n": len(ordered),
    }


BLOCK = 50
"""Jobs per block when in-process and fleet alternate (see side_by_side)."""


async def side_by_side(
    runs: dict[str, Callable[[], Awaitable[Any]]],
    n: int,
    warmup: int = 10,
    raw: RawEcho | None = None,
    before: dict[str, Callable[[], Awaitable[Any]]] | None = None,
    block: int = BLOCK,
) -> dict[str, list[float]]:
    """``n`` timed jobs of each kind, in alternating blocks of BLOCK: the fleet's overhead
    is a difference of two medians, and this machine's speed drifts by more than that
    between one measurement and the next (one run measured in-process trivial jobs at 2.0
    ms where 0.9 is usual, and the fleet as adding 1.1 ms). ``raw``: a block of raw Redis
    round trips after each block of jobs (see RawEcho). ``before``: what to do ahead of each
    block (and of the warm-up) of a kind, untimed, such as turning task events on."""
    before = before or {}
    for name, run in runs.items():
        if name in before:
            await before[name]()
        for _ in range(warmup):
            await run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    while any(len(v) < n for v in samples.values()):
        for name, run in runs.items():
            if name in before:
                await before[name]()
            for _ in range(min(block, n - len(samples[name]))):
                began = time.perf_counter()
                await run()
                samples[name].append((time.perf_counter() - began) * 1000)
            if raw is not None:
                await asyncio.sleep(RAW_SETTLE_S)  # the last job's aftermath, not the raw's
                raw.sample(RAW_BLOCK)
    return samples


async def throughput(executor: Any, seconds: float = 3.0, in_flight: int = 16) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def lane() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            outcome = await executor.execute("() => 0")
            assert outcome.error is None, outcome.error
            done += 1

    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(in_flight)))
    return done / (time.perf_counter() - began)


def _ping_message(app: Any, queue: str, reply_key: str) -> bytes:
    """A ``codemode.ping`` message in the bytes kombu's Redis transport keeps in a queue:
    Celery's own headers and body (``as_task_v2``) in the envelope codemode's producer
    writes for a job (``codemode/fleet/host/producer.py``)."""
    task_id = str(uuid.uuid4())
    message = app.amqp.as_task_v2(
        task_id, PING_TASK_NAME, args=(reply_key,), kwargs={}, argsrepr=repr((reply_key,)), kwargsrepr="{}"
    )
    body = json.dumps(list(message.body), separators=(",", ":")).encode()
    return transport_bytes(
        message.headers, body, correlation_id=task_id, reply_to=str(app.thread_oid), queue=queue
    )


def celery_round_trip(url: str, runs: int, *, pushed: bool = False) -> list[float]:
    """A no-op Celery task, sent and answered through the same Redis and worker: sent with
    ``send_task``, or (``pushed``) its message made beforehand and pushed onto the queue in
    one command, as codemode's producer does a job's (the worker's side of Celery alone)."""
    settings = BrokerSettings(redis_url=url)
    app = Celery("codemode-bench", set_as_current=False)
    app.conf.update(settings.celery_config())
    client = redis.Redis.from_url(url)
    keys = [f"codemode-bench:{'pushed-' if pushed else ''}pong:{i}" for i in range(runs + 20)]
    messages = [_ping_message(app, settings.queue, key) for key in keys] if pushed else []
    samples = []
    try:
        for i, key in enumerate(keys):
            began = time.perf_counter()
            if pushed:
                client.lpush(settings.queue, messages[i])
            else:
                app.send_task(PING_TASK_NAME, args=[key], queue=settings.queue)
            if client.blpop([key], timeout=10) is None:
                raise RuntimeError("no worker answered the ping task within 10 s")
            if i >= 20:
                samples.append((time.perf_counter() - began) * 1000)
    finally:
        client.close()
        app.close()
    return samples


RAW_BLOCK = 100
"""Raw round trips timed after each block of jobs (see RawEcho)."""
RAW_SETTLE_S = 0.1
"""The pause before a block of raw round trips: the last job's aftermath (a spare isolate
prepared, a worker's acks) runs in it rather than during the raw block."""


class RawEcho:
    """A raw Redis list round trip (RPUSH here, BLPOP and RPUSH in an echo process, BLPOP
    here: sync redis-py with hiredis on both sides), timed in blocks between the blocks of
    jobs: the fleet's call bound is twice its median, and on this machine it moves as much
    as the fleet's call does between one minute and the next (0.13 ms in one run, 0.30 in
    the next, measured after the jobs; the fleet's call 0.47-0.50 in both)."""

    def __init__(self, url: str) -> None:
        self._echo = subprocess.Popen([sys.executable, "-c", ECHO, url], stdout=subprocess.PIPE)
        assert self._echo.stdout is not None
        self._echo.stdout.readline()
        self._client = redis.Redis.from_url(url)
        self.samples: list[float] = []
        self.sample(50, keep=False)

    def sample(self, runs: int, *, keep: bool = True) -> list[float]:
        client, samples = self._client, []
        for _ in range(runs):
            began = time.perf_counter()
            client.rpush("ping", b"x")
            client.blpop(["pong"], timeout=5)
            samples.append((time.perf_counter() - began) * 1000)
        if keep:
            self.samples.extend(samples)
        return samples

    def close(self) -> None:
        self._client.rpush("ping", b"stop")
        self._client.close()
        self._echo.wait(10)


class RemoteControl:
    """Turns a worker's settings over with Celery's own remote control, waiting for its
    answer, so that trivial jobs under each setting alternate on one worker in one run: its
    task events (``celery control enable_events`` / ``disable_events``), and any command a
    worker registers (``gate_switch.py``)."""

    def __init__(self, url: str) -> None:
        self._app = Celery("codemode-bench-control", set_as_current=False)
        self._app.conf.update(BrokerSettings(redis_url=url).celery_config())
        self._events: bool | None = None

    async def broadcast(self, command: str, **arguments: Any) -> None:
        """Send ``command`` to the workers; raises unless one answers within 5 s."""
        replies = await asyncio.to_thread(
            self._app.control.broadcast, command, arguments=arguments, reply=True, timeout=5.0
        )
        if not replies:
            raise RuntimeError(f"no worker answered {command} within 5 s")

    async def set_events(self, on: bool) -> None:
        if self._events is not on:
            await self.broadcast("enable_events" if on else "disable_events")
            self._events = on

    def close(self) -> None:
        self._app.close()


async def measure(url: str, runs: int) -> dict[str, Any]:
    settings = BrokerSettings(redis_url=url)
    out: dict[str, Any] = {}
    raw = RawEcho(url)
    events = RemoteControl(url)
    try:
        async with (
            IsolateExecutor(pool={"max_workers": 2, "max_queue": 100}) as local,
            FleetExecutor(settings=settings) as fleet,
        ):
            executors = {"inprocess": local, "fleet": fleet}
            # Trivial jobs three ways in one series of blocks: in process, and through the
            # worker with task events off and on (turned over between blocks).
            trivial = await side_by_side(
                {
                    "inprocess": lambda: local.execute("() => 0"),
                    "fleet": lambda: fleet.execute("() => 0"),
                    "fleet_events": lambda: fleet.execute("() => 0"),
                },
                runs,
                raw=raw,
                before={
                    "fleet": lambda: events.set_events(False),
                    "fleet_events": lambda: events.set_events(True),
                },
            )
            await events.set_events(False)
            out["inprocess_trivial"] = summarize(trivial["inprocess"])
            out["fleet_trivial"] = summarize(trivial["fleet"])
            out["fleet_events_trivial"] = summarize(trivial["fleet_events"])
            rows = {
                "10_tool_calls": (lambda ex: ex.execute(TEN_CALLS, providers=TOOLS, dispatch=dispatch), runs),
                "50_tool_calls": (
                    lambda ex: ex.execute(FIFTY_CALLS, providers=TOOLS, dispatch=dispatch),
                    max(20, runs // 5),
                ),
            }
            for row, (job, n) in rows.items():
                samples = await side_by_side(
                    {name: (lambda ex=ex, job=job: job(ex)) for name, ex in executors.items()}, n, raw=raw
                )
                for name in executors:
                    out[f"{name}_{row}"] = summarize(samples[name])
            for name, executor in executors.items():
                fifty = out.pop(f"{name}_50_tool_calls")
                out[f"{name}_one_tool_call"] = {
                    "median_ms": round((fifty["median_ms"] - out[f"{name}_trivial"]["median_ms"]) / 50, 3),
                    "how": "(median of a 50-call job - median of a trivial job) / 50",
                }
                out[f"{name}_throughput_per_s"] = round(await throughput(executor), 1)
        out["redis_list_round_trip"] = {
            **summarize(raw.samples),
            "how": f"in blocks of {RAW_BLOCK} between the blocks of jobs",
        }
        out["redis_list_round_trip_alone"] = {
            **summarize(raw.sample(runs * 5)),
            "how": "after the jobs, back to back",
        }
    finally:
        raw.close()
        events.close()
    out["celery_noop_round_trip"] = summarize(celery_round_trip(url, runs))
    out["celery_noop_pushed_round_trip"] = summarize(celery_round_trip(url, runs, pushed=True))
    return out


async def quiet_start_ab(url: str, jobs: int) -> dict[str, dict[str, float]]:
    """Trivial jobs, alternating in blocks of ten between a quiet start and Started sent
    with the claim. The host has no knob for it (a quiet start is what every job that
    retains nothing gets), so the job spec the client builds is wrapped here."""
    from codemode.fleet import _client

    real = _client.JobSpec
    quiet = {"on": True}

    def spec(**fields: Any) -> Any:
        fields["quiet_start"] = bool(fields.get("quiet_start")) and quiet["on"]
        return real(**fields)

    _client.JobSpec = spec  # type: ignore[assignment,misc]
    samples: dict[bool, list[float]] = {True: [], False: []}
    try:
        async with FleetExecutor(settings=BrokerSettings(redis_url=url)) as fleet:
            for _ in range(50):
                await fleet.execute("() => 0")
            for i in range(2 * jobs):
                quiet["on"] = (i // 10) % 2 == 0
                began = time.perf_counter()
                outcome = await fleet.execute("() => 0")
                samples[quiet["on"]].append((time.perf_counter() - began) * 1000)
                assert outcome.error is None, outcome.error
    finally:
        _client.JobSpec = real  # type: ignore[misc]
    return {"quiet_start": summarize(samples[True]), "started_with_claim": summarize(samples[False])}


def _process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_ab(tree: str, jobs: int, events: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """Trivial and 10-call jobs through this tree's worker and ``tree``'s, each on its own
    Redis, in alternating blocks; latency and the worker's CPU per job."""
    sides = {"this tree": {}, tree: {"PYTHONPATH": str(Path(tree).resolve())}}
    # ``python -m workers`` puts the current directory first on sys.path: leave the tree.
    os.chdir("/")
    out: dict[str, dict[str, dict[str, float]]] = {}

    async def measure_side_by_side(urls: dict[str, str], workers: dict[str, WorkerProcess]) -> None:
        async with contextlib.AsyncExitStack() as stack:
            fleets = {
                name: await stack.enter_async_context(FleetExecutor(settings=BrokerSettings(redis_url=url)))
                for name, url in urls.items()
            }
            kinds: dict[str, Callable[[FleetExecutor], Awaitable[Any]]] = {
                "trivial": lambda ex: ex.execute("() => 0"),
                "10_tool_calls": lambda ex: ex.execute(TEN_CALLS, providers=TOOLS, dispatch=dispatch),
            }
            for kind, job in kinds.items():
                cpu = {name: 0.0 for name in fleets}

                def timed(
                    name: str, job: Any = job, cpu: dict[str, float] = cpu
                ) -> Callable[[], Awaitable[Any]]:
                    async def run() -> Any:
                        before = _process_cpu_s(workers[name].pid)
                        outcome = await job(fleets[name])
                        cpu[name] += _process_cpu_s(workers[name].pid) - before
                        assert outcome.error is None, outcome.error

                    return run

                samples = await side_by_side({name: timed(name) for name in fleets}, jobs)
                for name in fleets:
                    out.setdefault(name, {})[kind] = {
                        **summarize(samples[name]),
                        "worker_cpu_ms": round(cpu[name] * 1000 / len(samples[name]), 3),
                    }

    with contextlib.ExitStack() as stack:
        urls, workers = {}, {}
        for i, (name, env) in enumerate(sides.items()):
            server = stack.enter_context(RedisServer())
            worker = stack.enter_context(
                worker_class(events)(
                    BrokerSettings(redis_url=server.url),
                    WorkerSettings(concurrency=2),
                    env=env,
                    name=f"ab{i}",
                )
            )
            urls[name], workers[name] = server.url, worker
        asyncio.run(measure_side_by_side(urls, workers))
    return out


class PiecesWorker(WorkerProcess):
    """A worker started through ``ab_worker.py``: without the private piece its environment's
    ``CODEMODE_BENCH_WITHOUT`` names, if any (``pieces.py``)."""

    def command(self) -> list[str]:
        own = [sys.executable, str(Path(__file__).resolve().parent / "ab_worker.py")]
        return [*own, *super().command()[len(WORKER_COMMAND) :]]


class EventfulPiecesWorker(PiecesWorker, EventfulWorker):
    """A :class:`PiecesWorker` with task events from the start (``--events``)."""


PIECES_BLOCK = 5
"""Jobs per block in ``--pieces-ab``: a side per piece besides the one with all of them,
and a 50-call job takes tens of ms, so blocks are small enough for each side to meet every
phase of the machine."""
SAVES_MS = 0.3
"""A private piece stays if it saves at least this much of a trivial job..."""
SAVES_CALL = 0.25
"""...or this share of a relayed tool call (issue: each private piece earns its place)."""


def pieces_ab(jobs: int, events: bool = False) -> dict[str, Any]:
    """Trivial and 50-call jobs through a fleet per side, each a Redis, a worker and a host of
    its own, in alternating blocks: all of codemode's private pieces, and each piece left out
    in turn (``pieces.py``). What a piece saves is the difference of the medians; a tool
    call's cost is ``(50-call job - trivial job) / 50`` on each side."""
    from pieces import HOST_SIDE, PIECES, WORKER_SIDE, without_on_host

    sides = {"all pieces": "", **{f"without {piece}": piece for piece in PIECES}}
    os.chdir("/")  # the workers run this tree's code from the installed package
    out: dict[str, Any] = {"sides": {}, "pieces": {}}

    async def run_sides(urls: dict[str, str]) -> None:
        async with contextlib.AsyncExitStack() as stack:
            fleets = {}
            for name, url in urls.items():
                fleet = await stack.enter_async_context(FleetExecutor(settings=BrokerSettings(redis_url=url)))
                if sides[name] in HOST_SIDE:
                    await without_on_host(fleet, sides[name])
                fleets[name] = fleet
            kinds: dict[str, tuple[Callable[[FleetExecutor], Awaitable[Any]], int]] = {
                "trivial": (lambda ex: ex.execute("() => 0"), jobs),
                "50_tool_calls": (
                    lambda ex: ex.execute(FIFTY_CALLS, providers=TOOLS, dispatch=dispatch),
                    max(20, jobs // 5),
                ),
            }
            for kind, (job, n) in kinds.items():

                def timed(name: str, job: Any = job) -> Callable[[], Awaitable[Any]]:
                    async def run() -> None:
                        outcome = await job(fleets[name])
                        assert outcome.error is None, outcome.error

                    return run

                samples = await side_by_side({name: timed(name) for name in fleets}, n, block=PIECES_BLOCK)
                for name in fleets:
                    out["sides"].setdefault(name, {})[kind] = summarize(samples[name])

    with contextlib.ExitStack() as stack:
        urls = {}
        for i, (name, piece) in enumerate(sides.items()):
            server = stack.enter_context(RedisServer())
            env = {"CODEMODE_BENCH_WITHOUT": piece} if piece in WORKER_SIDE else {}
            stack.enter_context(
                (EventfulPiecesWorker if events else PiecesWorker)(
                    BrokerSettings(redis_url=server.url),
                    WorkerSettings(concurrency=2),
                    env=env,
                    name=f"piece{i}",
                )
            )
            urls[name] = server.url
        asyncio.run(run_sides(urls))
    rows = out["sides"]
    for row in rows.values():
        row["one_tool_call"] = {
            "median_ms": round((row["50_tool_calls"]["median_ms"] - row["trivial"]["median_ms"]) / 50, 4)
        }
    base = rows["all pieces"]
    for name, piece in sides.items():
        if not piece:
            continue
        saves_ms = rows[name]["trivial"]["median_ms"] - base["trivial"]["median_ms"]
        without_call = rows[name]["one_tool_call"]["median_ms"]
        saves_call = (
            (without_call - base["one_tool_call"]["median_ms"]) / without_call if without_call else 0.0
        )
        out["pieces"][piece] = {
            "saves_trivial_ms": round(saves_ms, 3),
            "saves_tool_call_share": round(saves_call, 3),
            "earns_its_place": saves_ms >= SAVES_MS or saves_call >= SAVES_CALL,
        }
    out["machine"] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "events": events,
    }
    return out


def pieces_table(results: dict[str, Any]) -> str:
    lines = [
        f"{'side (median ms)':<20}{'trivial job':>14}{'50-call job':>14}{'one call':>12}",
        "-" * 60,
    ]
    for name, row in results["sides"].items():
        lines.append(
            f"{name:<20}{row['trivial']['median_ms']:>14.3f}{row['50_tool_calls']['median_ms']:>14.3f}"
            f"{row['one_tool_call']['median_ms']:>12.4f}"
        )
    for piece, verdict in results["pieces"].items():
        lines.append(
            f"{piece}: saves {verdict['saves_trivial_ms']:.3f} ms of a trivial job and "
            f"{verdict['saves_tool_call_share']:.0%} of a tool call: "
            f"{'earns its place' if verdict['earns_its_place'] else 'does not earn its place'} "
            f"(bar: {SAVES_MS} ms or {SAVES_CALL:.0%})"
        )
    return "\n".join(lines)


async def _step_jobs(url: str, jobs: int, mark: Callable[[str], None]) -> int:
    """Trivial jobs one at a time, each between host marks, a pause between them (the
    worker's aftermath of one job is not the next job's); returns when the timed ones began."""
    async with FleetExecutor(settings=BrokerSettings(redis_url=url)) as fleet:
        for _ in range(30):
            await fleet.execute("() => 0")
        began = time.time_ns()
        for _ in range(jobs):
            mark("h_submit")
            outcome = await fleet.execute("() => 0")
            mark("h_done")
            assert outcome.error is None, outcome.error
            await asyncio.sleep(0.002)
    return began


def steps(jobs: int, events: bool = False) -> str:
    """A fleet job, step by step (``steps.py``): marks in the host and a marking worker."""
    import tempfile

    from steps import ENV as STEPS_ENV
    from steps import mark_host, table, timeline

    os.chdir("/")
    with tempfile.TemporaryDirectory() as tmp, RedisServer() as server:
        host_marks, worker_marks = Path(tmp, "host"), Path(tmp, "worker")
        mark = mark_host(str(host_marks))
        with (EventfulPiecesWorker if events else PiecesWorker)(
            BrokerSettings(redis_url=server.url),
            WorkerSettings(concurrency=2),
            env={STEPS_ENV: str(worker_marks)},
            name="steps",
        ):
            began = asyncio.run(_step_jobs(server.url, jobs, mark))
            time.sleep(0.5)  # the worker's last marks
        return table(timeline([host_marks, worker_marks], began))


GATE_SIDES = {
    "gate on, events off": (True, False),
    "gate off, events off": (False, False),
    "gate on, events on": (True, True),
    "gate off, events on": (False, True),
}


def gate_ab(jobs: int) -> dict[str, dict[str, float]]:
    """Trivial jobs on one worker with its start gate on and off (``gate_switch.py``), with
    task events off and on, each switched by remote control between alternating blocks."""
    from gate_switch import COMMAND
    from gate_switch import ENV as GATE_ENV

    os.chdir("/")
    with RedisServer() as server:
        url = server.url
        control = RemoteControl(url)

        def switch(gate: bool, events: bool) -> Callable[[], Awaitable[None]]:
            async def before() -> None:
                await control.set_events(events)
                await control.broadcast(COMMAND, on=int(gate))

            return before

        async def run() -> dict[str, list[float]]:
            async with FleetExecutor(settings=BrokerSettings(redis_url=url)) as fleet:

                async def trivial() -> None:
                    outcome = await fleet.execute("() => 0")
                    assert outcome.error is None, outcome.error

                return await side_by_side(
                    {name: trivial for name in GATE_SIDES},
                    jobs,
                    before={name: switch(*sides) for name, sides in GATE_SIDES.items()},
                )

        try:
            with PiecesWorker(
                BrokerSettings(redis_url=url), WorkerSettings(concurrency=2), env={GATE_ENV: "1"}, name="gate"
            ):
                samples = asyncio.run(run())
        finally:
            control.close()
    return {name: summarize(samples[name]) for name in GATE_SIDES}


PUSH_SCRIPT = """
redis.call('RPUSH', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1
"""
"""The channel's push as a script, as the fleet sent it until RPUSH and PEXPIRE went
pipelined (``codemode/fleet/redis/channel.py``)."""


async def link_cost(url: str, commands: int, block: int = 500) -> dict[str, dict[str, float]]:
    """One push per command, in alternating blocks of ``block`` commands: as a script
    through redis-py's client and through a link, and as the channel pushes now (RPUSH and
    PEXPIRE in one write on a link); wall and CPU (this process) per push."""
    from codemode.fleet.redis.channel import push
    from codemode.fleet.redis.client import make_client
    from codemode.fleet.redis.link import Links

    settings = BrokerSettings(redis_url=url)
    client = make_client(settings)
    links = Links(client.connection_pool, timeout_s=settings.socket_timeout_s)
    through_client = client.register_script(PUSH_SCRIPT)
    through_link = links.script(PUSH_SCRIPT)
    message = b"x" * 200
    ways: dict[str, Callable[[], Awaitable[Any]]] = {
        "script, redis-py client": lambda: through_client(keys=["bench:push"], args=[60_000, message]),
        "script, link": lambda: through_link(["bench:push"], [60_000, message]),
        "RPUSH + PEXPIRE, link": lambda: push(links, "bench:push", message, ttl_ms=60_000),
    }
    spent = {name: [0.0, 0.0, 0] for name in ways}
    try:
        for way in ways.values():  # connect, load the script
            await way()
        for i in range(len(ways) * commands // block):
            name = list(ways)[i % len(ways)]
            way = ways[name]
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(block):
                await way()
            spent[name][0] += time.perf_counter() - wall
            spent[name][1] += time.process_time() - cpu
            spent[name][2] += block
            await client.delete("bench:push")
    finally:
        await links.aclose()
        await client.aclose()
    return {
        name: {"wall_us": round(w / n * 1e6, 1), "cpu_us": round(c / n * 1e6, 1), "n": n}
        for name, (w, c, n) in spent.items()
    }


def table(results: dict[str, Any]) -> str:
    rows = [
        ("trivial job round trip", "inprocess_trivial", "fleet_trivial"),
        ("  with task events on", "inprocess_trivial", "fleet_events_trivial"),
        ("job with 10 tool calls", "inprocess_10_tool_calls", "fleet_10_tool_calls"),
        ("one tool call", "inprocess_one_tool_call", "fleet_one_tool_call"),
    ]
    lines = [f"{'measure (median ms)':<34}{'in-process':>12}{'fleet':>12}", "-" * 58]
    for label, a, b in rows:
        lines.append(f"{label:<34}{results[a]['median_ms']:>12.3f}{results[b]['median_ms']:>12.3f}")
    lines.append(
        f"{'throughput, 16 in flight (jobs/s)':<34}"
        f"{results['inprocess_throughput_per_s']:>12.1f}"
        f"{results['fleet_throughput_per_s']:>12.1f}"
    )
    ratio = results["fleet_throughput_per_s"] / results["inprocess_throughput_per_s"]
    lines.append(f"{'  fleet / in-process':<34}{'':>12}{ratio:>12.2f}")
    lines.append(
        f"{'raw Redis list round trip':<34}{'':>12}{results['redis_list_round_trip']['median_ms']:>12.3f}"
    )
    lines.append(
        f"{'  the same, after the jobs':<34}{'':>12}"
        f"{results['redis_list_round_trip_alone']['median_ms']:>12.3f}"
    )
    lines.append(
        f"{'Celery no-op task round trip':<34}{'':>12}{results['celery_noop_round_trip']['median_ms']:>12.3f}"
    )
    lines.append(
        f"{'  the same, pushed as a job is':<34}{'':>12}"
        f"{results['celery_noop_pushed_round_trip']['median_ms']:>12.3f}"
    )
    judged = targets(results)
    added = judged[0]["measured"]
    celery = results["celery_noop_pushed_round_trip"]["median_ms"]
    lines.append(
        f"fleet adds {added:.3f} ms to a trivial job: Celery's round trip "
        f"({celery:.3f} ms, pushed) and {added - celery:.3f} ms of codemode's framing"
    )
    for target in judged:
        lines.append(
            f"target: {target['what']}: {target['measured']:.3f} against "
            f"{target['bound']:.3f} ms, {'met' if target['met'] else 'missed'}"
        )
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The fleet's targets, judged on this run's medians: at most 1.5 ms added to a trivial
    job over in-process with task events off and 2.0 ms with them on (the same worker,
    events turned over between blocks), and a tool call over the reply channel at most twice
    a raw Redis round trip plus the call's own cost in process (dispatch and the isolate hop)."""
    inprocess = results["inprocess_trivial"]["median_ms"]
    judged = []
    for key, events, bound in (("fleet_trivial", "off", 1.5), ("fleet_events_trivial", "on", 2.0)):
        added = results[key]["median_ms"] - inprocess
        judged.append(
            {
                "what": f"trivial job, added over in-process (task events {events})",
                "measured": added,
                "bound": bound,
                "met": added <= bound,
            }
        )
    call_bound = (
        2 * results["redis_list_round_trip"]["median_ms"] + results["inprocess_one_tool_call"]["median_ms"]
    )
    call = results["fleet_one_tool_call"]["median_ms"]
    judged.append(
        {
            "what": "one tool call, against 2x raw round trip + in-process call",
            "measured": call,
            "bound": call_bound,
            "met": call <= call_bound,
        }
    )
    return judged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--quiet-start-ab",
        action="store_true",
        help="trivial jobs with and without a quiet start, interleaved",
    )
    parser.add_argument(
        "--link-cost",
        action="store_true",
        help="a push through redis-py's client and through a link, interleaved",
    )
    parser.add_argument(
        "--worker-ab", metavar="TREE", help="this tree's worker against the one in source tree TREE"
    )
    parser.add_argument(
        "--pieces-ab",
        action="store_true",
        help="the worker and host with each private piece against without it (pieces.py), interleaved",
    )
    parser.add_argument(
        "--gate-ab",
        action="store_true",
        help="trivial jobs with the worker's start gate on and off, events off and on (gate_switch.py)",
    )
    parser.add_argument("--steps", action="store_true", help="a trivial fleet job, step by step (steps.py)")
    parser.add_argument(
        "--events",
        action="store_true",
        help="--worker-ab / --pieces-ab / --steps: workers send task events (codemode worker --events)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run beside N spinning neighbour processes (results in fleet_busy.json)",
    )
    args = parser.parse_args(argv)
    if args.worker_ab:
        ab = worker_ab(args.worker_ab, args.runs, args.events)
        for name, kinds in ab.items():
            for kind, row in kinds.items():
                print(
                    f"{name:<24} {kind:<14} median {row['median_ms']:.3f} ms  "
                    f"p95 {row['p95_ms']:.3f} ms  worker CPU {row['worker_cpu_ms']:.3f} ms "
                    f"per job (n={row['n']})"
                )
        return 0
    if args.gate_ab:
        for name, row in gate_ab(args.runs).items():
            print(
                f"{name:<24} median {row['median_ms']:.3f} ms  mean {row['mean_ms']:.3f} ms  p95 {row['p95_ms']:.3f} ms (n={row['n']})"
            )
        return 0
    if args.steps:
        print(steps(args.runs, args.events))
        return 0
    if args.pieces_ab:
        verdicts = pieces_ab(args.runs, args.events)
        print(pieces_table(verdicts))
        path = RESULTS.with_name("fleet_pieces_events.json" if args.events else "fleet_pieces.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(verdicts, indent=2) + "\n")
        print(f"\nwrote {path}")
        return 0
    if args.link_cost:
        with RedisServer() as server:
            costs = asyncio.run(link_cost(server.url, 20_000))
        for name, row in costs.items():
            print(
                f"{name:<16} wall {row['wall_us']:7.1f} us  CPU {row['cpu_us']:7.1f} us "
                f"per command (n={row['n']})"
            )
        return 0
    if args.quiet_start_ab:
        with (
            RedisServer() as server,
            WorkerProcess(BrokerSettings(redis_url=server.url), WorkerSettings(concurrency=2), name="ab"),
        ):
            ab = asyncio.run(quiet_start_ab(server.url, 1500))
        for name, row in ab.items():
            print(
                f"{name:<20} median {row['median_ms']:.3f} ms  p95 {row['p95_ms']:.3f} ms  "
                f"mean {row['mean_ms']:.3f} ms  (n={row['n']})"
            )
        return 0
    load_before = os.getloadavg()[0]
    with RedisServer() as server:
        worker = WorkerProcess(
            BrokerSettings(redis_url=server.url), WorkerSettings(concurrency=2), name="bench"
        )
        with worker, busy_neighbours(args.busy):
            results = asyncio.run(measure(server.url, args.runs))
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "redis_server": subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "worker": "python -m workers, threads pool, concurrency 2, 2 isolate children",
        "inprocess": "IsolateExecutor, 2 isolate children",
        "busy_neighbours": args.busy,
        "events": "off and on, turned over between blocks of trivial jobs (RemoteControl)",
    }
    results["throughput_ratio"] = round(
        results["fleet_throughput_per_s"] / results["inprocess_throughput_per_s"], 3
    )
    results["targets"] = targets(results)
    print(table(results))
    name = "fleet_busy" if args.busy else "fleet"
    path = RESULTS.with_name(f"{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
