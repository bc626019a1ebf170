"""``codemode batch IN.jsonl -o OUT.jsonl``: every line of a file through ``map``.

::

    IN.jsonl ─ one request per line ─▶ checked (a bad line: reported with its number, skipped)
      ─▶ executor.map (in process, or the fleet with --fleet) ─▶ OUT.jsonl, a line per id
         written and flushed as each run ends, so a killed batch loses nothing finished;
         --resume skips the ids OUT already holds

A request line: ``{"id": "a-1", "code": "async ({ orderId }) => ...", "inputs": {"orderId":
7}, "timeout": 2000, "modules": {...}}`` (``id`` a string or an integer, unique in the file;
``inputs``, the entry function's argument, ``timeout`` and ``modules`` optional). An output
line is ``{"id", "result", "error", "logs", "attempts", "duration_ms", "tool_calls",
"ran_on"}`` for a served run (``error`` set when the program failed, with
``error_detail``: its name, line, column and stack, when the program threw), or ``{"id",
"fault": {"code", "message", "retryable", "started"}, "attempts"}`` when a fault of the
executor remained after retries.

Exit status: 0 every line was served (program errors included), 1 some input lines were
bad (reported on stderr, not run), 2 a fault remained after retries, or bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from ._bulk import Job
from ._faults import ExecutorError, InvalidRequest
from ._outcome import Outcome
from ._retry import RetryPolicy

__all__ = ["add_batch_parser", "run_batch"]

EXIT_OK: Final = 0
EXIT_BAD_LINES: Final = 1
EXIT_FAULT: Final = 2

SUMMARY_EVERY_S: Final = 10.0
"""How often a batch whose stderr is not a terminal prints its one-line progress."""
LINE_FIELDS: Final = frozenset({"id", "code", "timeout", "modules", "inputs"})


class UsageError(Exception):
    """Bad usage: reported on stderr with exit status 2."""


def add_batch_parser(commands: Any) -> None:
    """The ``batch`` subcommand's arguments, on the command line's subparsers."""
    batch = commands.add_parser(
        "batch",
        help="run every request of a JSON Lines file and write one outcome line per id",
        description=(
            "Run one request per line of IN ({id, code, timeout?, modules?}) and write one line per "
            "id to OUT as each run ends. Exit status: 0 every line served, 1 some input lines were "
            "bad, 2 a fault remained after retries or bad usage."
        ),
    )
    batch.add_argument("input", metavar="IN.jsonl", help="the requests, one JSON object per line")
    batch.add_argument("-o", "--output", required=True, metavar="OUT.jsonl", help="where the outcomes go")
    batch.add_argument(
        "--resume", action="store_true", help="skip the ids OUT already holds, append the rest"
    )
    batch.add_argument(
        "--tools", metavar="MODULE:NAME", help="a codemode.ToolRegistry to serve the programs' tool calls"
    )
    batch.add_argument("--fleet", metavar="REDIS_URL", help="run on the fleet behind this Redis instead")
    batch.add_argument("--timeout", type=int, metavar="MS", help="each run's clock unless its line names one")
    batch.add_argument("--memory", type=int, metavar="MB", help="the isolate's memory bound (in process)")
    batch.add_argument("--workers", type=int, metavar="N", help="child processes (in process)")
    batch.add_argument(
        "--concurrency", type=int, metavar="N", help="runs in flight (default: the executor's)"
    )
    batch.add_argument(
        "--attempts", type=int, default=3, metavar="N", help="tries per line for retryable faults"
    )
    batch.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "none"),
        default="auto",
        help="a progress bar (auto: when stderr is a terminal), a periodic line, or nothing",
    )


# ---- input ----------------------------------------------------------------------------


class BadLine(Exception):
    """An input line that cannot run; the batch reports it and goes on."""


@dataclass
class Tally:
    """What the batch did, for the progress display and the summary."""

    total: int = 0
    done: int = 0
    ok: int = 0
    program_errors: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    bad_lines: int = 0
    skipped: int = 0
    started: float = field(default_factory=time.monotonic)

    def rate(self) -> float:
        return self.done / max(1e-9, time.monotonic() - self.started)

    def line(self) -> str:
        rate = self.rate()
        todo = max(0, self.total - self.done - self.bad_lines - self.skipped)
        eta = f", ETA {todo / rate:.0f} s" if rate > 0 and todo else ""
        return (
            f"{self.done}/{self.total - self.skipped} done: {self.ok} ok, {self.program_errors} program "
            f"errors, {sum(self.faults.values())} faults, {self.bad_lines} bad lines; {rate:.0f} lines/s{eta}"
        )


def parse_line(text: str) -> tuple[Hashable, str, dict[str, Any]]:
    """One input line as ``(id, code, execute options)``; :class:`BadLine` says what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise BadLine(f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - LINE_FIELDS)
    if unknown:
        raise BadLine(f"unknown fields {unknown}; a line has id, code, timeout, modules and inputs")
    key = data.get("id")
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise BadLine("id must be a string or an integer")
    code = data.get("code")
    if not isinstance(code, str):
        raise BadLine(f"id {key!r}: code must be a string holding the program")
    options: dict[str, Any] = {}
    for name in ("timeout", "modules", "inputs"):
        if name in data:
            options[name] = data[name]
    return key, code, options


def done_ids(path: str) -> set[Hashable]:
    """The ids OUT already holds. A torn last line (a batch killed mid-write) is cut off,
    so that appending starts on a line of its own."""
    ids: set[Hashable] = set()
    if not os.path.exists(path):
        return ids
    with open(path, "rb+") as handle:
        good_end = 0
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            with contextlib.suppress(ValueError):
                record = json.loads(raw)
                if isinstance(record, dict) and "id" in record:
                    ids.add(record["id"])
            good_end += len(raw)
        handle.truncate(good_end)
    return ids


# ---- output -----------------------------------------------------------------------------


def outcome_record(key: Hashable, result: Outcome | ExecutorError) -> dict[str, Any]:
    if isinstance(result, ExecutorError):
        fault = result.to_data()
        return {
            "id": key,
            "fault": {
                "code": fault.code,
                "message": fault.message,
                "retryable": fault.retryable,
                "started": fault.started,
            },
            "attempts": fault.attempts,
        }
    record: dict[str, Any] = {
        "id": key,
        "result": result.result,
        "error": result.error,
        "logs": [entry.to_dict() for entry in result.logs],
        "attempts": result.attempts,
        "duration_ms": result.duration_ms,
        "tool_calls": result.tool_calls,
        "ran_on": result.ran_on,
    }
    if result.error_detail is not None:
        record["error_detail"] = result.error_detail.to_dict()
    return record


class Progress:
    """A rich progress bar on a terminal; otherwise a line on stderr every few seconds."""

    def __init__(self, mode: str, stderr: TextIO, tally: Tally) -> None:
        if mode == "auto":
            mode = "bar" if stderr.isatty() else "lines"
        self.mode = mode
        self.stderr = stderr
        self.tally = tally
        self._next_line = time.monotonic() + SUMMARY_EVERY_S
        self._bar: Any = None
        self._task: Any = None
        if mode == "bar":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("batch"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]} lines/s"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
                console=Console(file=stderr),
                transient=False,
            )
            self._task = self._bar.add_task("batch", total=tally.total - tally.skipped, rate="0", status="")
            self._bar.start()

    def update(self) -> None:
        t = self.tally
        if self._bar is not None:
            faults = sum(t.faults.values())
            status = (
                f"{t.program_errors} program errors, {faults} faults" if t.program_errors or faults else ""
            )
            self._bar.update(
                self._task, completed=t.done + t.bad_lines, rate=f"{t.rate():.0f}", status=status
            )
        elif self.mode == "lines" and time.monotonic() >= self._next_line:
            self._next_line = time.monotonic() + SUMMARY_EVERY_S
            print(f"codemode batch: {t.line()}", file=self.stderr, flush=True)

    def stop(self) -> None:
        if self._bar is not None:
            self.update()
            self._bar.stop()


# ---- the run ----------------------------------------------------------------------------


def _count_lines(path: str) -> int:
    count = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            count += chunk.count(b"\n")
    return count


def _load_tools(spec: str | None) -> dict[str, Any]:
    if spec is None:
        return {}
    from . import ToolRegistry

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--tools takes package.module:name, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--tools: cannot import {module_name}: {exc}") from None
    finally:
        sys.path.pop(0)
    registry = getattr(module, attr, None)
    if not isinstance(registry, ToolRegistry):
        raise UsageError(f"--tools: {spec} is not a codemode.ToolRegistry (got {type(registry).__name__})")
    return {"providers": registry.providers(), "dispatch": registry.dispatch}


def _executor(args: argparse.Namespace) -> Any:
    if args.fleet:
        if args.memory is not None or args.workers is not None:
            raise UsageError("--memory and --workers are each fleet worker's own settings, not the batch's")
        try:
            from .fleet import FleetExecutor
        except ModuleNotFoundError as exc:
            raise UsageError(
                f"--fleet needs the fleet extra (missing module {exc.name!r}): pip install 'codemode[fleet]'"
            ) from None
        settings: dict[str, Any] = {"redis_url": args.fleet}
        if args.timeout is not None:
            settings["timeout"] = args.timeout
        return FleetExecutor(**settings)
    from ._executor import IsolateExecutor

    local: dict[str, Any] = {}
    if args.timeout is not None:
        local["timeout"] = args.timeout
    if args.memory is not None:
        local["memory_limit"] = args.memory
    if args.workers is not None:
        local["pool"] = {"max_workers": args.workers}
    return IsolateExecutor(**local)


def _jobs(path: str, skip: set[Hashable], tally: Tally, stderr: TextIO) -> Iterator[Job]:
    """The runnable lines of ``path``, read as ``map`` asks for them."""
    seen: dict[Hashable, int] = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                key, code, options = parse_line(text)
                if key in seen:
                    raise BadLine(f"id {key!r} already appeared on line {seen[key]}")
                seen[key] = number
                job = Job(key, code, **options)
            except (BadLine, InvalidRequest) as exc:
                tally.bad_lines += 1
                print(f"codemode batch: {path}, line {number}: {exc}", file=stderr, flush=True)
                continue
            if key in skip:
                tally.skipped += 1
                continue
            yield job


async def _run(args: argparse.Namespace, stderr: TextIO) -> Tally:
    tally = Tally(total=_count_lines(args.input))
    skip = done_ids(args.output) if args.resume else set()
    if not args.resume and os.path.exists(args.output) and os.path.getsize(args.output) > 0:
        raise UsageError(f"{args.output} already has lines: pass --resume to continue it, or remove it")
    tools = _load_tools(args.tools)
    policy = RetryPolicy(attempts=args.attempts)
    progress: Progress | None = None
    async with _executor(args) as executor:
        with open(args.output, "a", encoding="utf-8") as out:
            progress = Progress(args.progress, stderr, tally)
            try:
                jobs = _jobs(args.input, skip, tally, stderr)
                async for key, result in executor.map(
                    jobs, concurrency=args.concurrency, retry=policy, **tools
                ):
                    out.write(json.dumps(outcome_record(key, result), ensure_ascii=False) + "\n")
                    out.flush()
                    tally.done += 1
                    if isinstance(result, ExecutorError):
                        tally.faults[result.code] += 1
                    elif result.error is None:
                        tally.ok += 1
                    else:
                        tally.program_errors += 1
                    progress.update()
            finally:
                progress.stop()
    return tally


def _summary(tally: Tally) -> Iterator[str]:
    elapsed = time.monotonic() - tally.started
    yield (
        f"codemode batch: {tally.done} lines run in {elapsed:.1f} s ({tally.rate():.0f} lines/s): "
        f"{tally.ok} ok, {tally.program_errors} program errors, {sum(tally.faults.values())} faults"
    )
    for code, count in sorted(tally.faults.items()):
        yield f"  {code}: {count}"
    if tally.bad_lines:
        yield f"  {tally.bad_lines} input lines were bad (reported above) and did not run"
    if tally.skipped:
        yield f"  {tally.skipped} ids were already in the output (--resume) and did not run again"


def run_batch(args: argparse.Namespace, stderr: TextIO) -> int:
    """The ``batch`` subcommand; returns its exit status."""
    for name in ("timeout", "memory", "workers", "concurrency", "attempts"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"codemode batch: --{name} must be a positive number, got {value}", file=stderr)
            return EXIT_FAULT
    if not os.path.isfile(args.input):
        print(f"codemode batch: cannot read {args.input}: no such file", file=stderr)
        return EXIT_FAULT
    try:
        tally = asyncio.run(_run(args, stderr))
    except UsageError as exc:
        print(f"codemode batch: {exc}", file=stderr)
        return EXIT_FAULT
    except ExecutorError as exc:
        print(f"codemode batch: executor fault {exc.code}: {exc.message}", file=stderr)
        return EXIT_FAULT
    for line in _summary(tally):
        print(line, file=stderr)
    if tally.faults:
        return EXIT_FAULT
    return EXIT_BAD_LINES if tally.bad_lines else EXIT_OK
