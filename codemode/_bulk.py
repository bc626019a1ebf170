"""Bulk execution: any number of programs through one executor, a bounded number at a time.

::

    jobs (iterable or async iterable: Job, or a str keyed by its index)
      │ pulled only as runs end and while fewer than ``concurrency`` results wait for the
      │ consumer (in input order: while the reordering buffer has room): flat memory
      ▼
    ``concurrency`` runners, each: pull a job ─▶ execute ─▶ QUEUE_FULL? wait, submit again
                               ─▶ another fault? RetryPolicy: wait and retry, or report it
      │
      ▼
    (key, Outcome | ExecutorError) in completion order   ── map
    the same, in input order (a bounded buffer)          ── map_ordered

Both executors delegate to :func:`map_jobs` and :func:`map_jobs_ordered`; all they need to
offer is :class:`BulkTarget` (``execute`` and a default window). Leaving the loop early,
or cancelling the task that consumes it, cancels every job in flight and waits for them
to end: nothing started here outlives the iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any, Final, Protocol, TypeAlias

from ._config import UNSET, Unset
from ._faults import Disposed, ExecutorError, InvalidRequest, QueueFull
from ._outcome import Outcome
from ._retry import RetryPolicy, note_attempts, with_metadata

__all__ = [
    "BulkResults",
    "BulkTarget",
    "Job",
    "Jobs",
    "Result",
    "RetryArg",
    "SyncBulkResults",
    "iterate_sync",
    "map_jobs",
    "map_jobs_ordered",
]

QUEUE_FULL_FIRST_WAIT_S: Final = 0.005
"""The first wait before a job refused with QUEUE_FULL is submitted again."""
QUEUE_FULL_MAX_WAIT_S: Final = 0.5
"""The longest wait between such submissions (the waits double up to it)."""
ORDERED_BUFFER_FACTOR: Final = 4
"""``map_ordered`` holds at most this many windows of finished results ahead of the one
it waits for."""

JOB_OPTIONS: Final = frozenset(
    {"inputs", "providers", "dispatch", "outbound", "modules", "timeout", "count_host_waits"}
)
"""The ``execute`` keywords a job (or a whole map) may set."""

Result: TypeAlias = Outcome | ExecutorError
"""What a bulk run yields for each job: its outcome, or the fault that remained."""
Jobs: TypeAlias = Iterable[Any] | AsyncIterable[Any]
"""A bulk run's input: ``Job`` objects, or program strings keyed by their index."""
BulkResults: TypeAlias = AsyncIterator[tuple[Hashable, Result]]
SyncBulkResults: TypeAlias = Generator[tuple[Hashable, Result], None, None]
RetryArg: TypeAlias = RetryPolicy | Unset | None
"""``UNSET``: the default :class:`RetryPolicy`; ``None``: one try each."""


class BulkTarget(Protocol):
    """What a bulk run needs of an executor."""

    @property
    def execute(self) -> Callable[..., Awaitable[Outcome]]:
        """``execute(code, **options)``: one run, or an :class:`ExecutorError`."""
        ...

    @property
    def bulk_window(self) -> int:
        """Jobs a map keeps in flight unless told otherwise."""
        ...


def check_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(options) - JOB_OPTIONS)
    if unknown:
        hint = " (a bulk run retains no handles)" if "retain_handles" in unknown else ""
        raise InvalidRequest(f"{where} takes {', '.join(sorted(JOB_OPTIONS))}; not {unknown}{hint}.")
    return {name: value for name, value in options.items() if value is not UNSET}


class Job:
    """One request of a bulk run: a ``key`` to find its result by, the ``code``, and any of
    ``execute``'s options (``inputs``, ``providers``, ``dispatch``, ``outbound``,
    ``modules``, ``timeout``, ``count_host_waits``), which win over the ones given to
    ``map``.

    ``idempotent=True`` says running it twice repeats no side effect the host cares
    about: a fault after its program started may then be retried too.

    ::

        Job("order-7", "async () => store.get('o-7')", timeout=2_000, idempotent=True)
    """

    __slots__ = ("code", "idempotent", "key", "options")

    def __init__(self, key: Hashable, code: str, *, idempotent: bool = False, **options: Any) -> None:
        if not isinstance(idempotent, bool):
            raise InvalidRequest(f"Job.idempotent must be True or False, got {idempotent!r}.")
        self.key = key
        self.code = code
        self.idempotent = idempotent
        self.options = check_options(options, "Job")

    def __repr__(self) -> str:
        return f"Job(key={self.key!r}, code={self.code!r}, idempotent={self.idempotent})"


def _job(index: int, item: Any) -> Job:
    if isinstance(item, Job):
        return item
    if isinstance(item, str):
        return Job(index, item)
    raise InvalidRequest(
        f"map takes Job objects or program strings; item {index} is a {type(item).__name__}. "
        "Wrap it as Job(key, code, ...)."
    )


def _window(target: BulkTarget, concurrency: int | None) -> int:
    if concurrency is None:
        return target.bulk_window
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidRequest(f"concurrency must be an integer >= 1, got {concurrency!r}.")
    return concurrency


def _policy(retry: RetryPolicy | Unset | None) -> RetryPolicy:
    if retry is UNSET:
        return RetryPolicy()
    if retry is None:
        return RetryPolicy.never()
    if not isinstance(retry, RetryPolicy):
        raise InvalidRequest(f"retry must be a RetryPolicy or None (no retries), got {retry!r}.")
    return retry


async def run_job(target: BulkTarget, job: Job, defaults: Mapping[str, Any], policy: RetryPolicy) -> Result:
    """One job to its end: its outcome (with attempts and duration) or the fault that
    remained. A QUEUE_FULL is waited out, never counted as a try nor reported."""
    options = {**defaults, **job.options}
    started = time.monotonic()
    attempt = 1
    full_wait = QUEUE_FULL_FIRST_WAIT_S
    while True:
        try:
            outcome = await target.execute(job.code, **options)
        except QueueFull:
            await asyncio.sleep(full_wait * (0.5 + random.random() / 2))
            full_wait = min(QUEUE_FULL_MAX_WAIT_S, full_wait * 2)
            continue
        except ExecutorError as fault:
            if isinstance(fault, Disposed) or not policy.retries(fault, attempt, idempotent=job.idempotent):
                note_attempts(fault, attempt)
                return fault
            await asyncio.sleep(policy.delay_s(attempt))
            attempt += 1
            continue
        return with_metadata(outcome, attempt, started)


class _Flight:
    """The jobs of one bulk run, and the source they are pulled from.

    ``window`` runner tasks each pull a job, run it to its end, put the result on
    ``finished`` and pull the next, the way a caller awaiting ``execute`` in a loop would
    (no task per job). A runner waits before pulling while ``window`` results wait for the
    consumer, or while ``may_pull`` (the ordered form's buffer) says no.
    """

    def __init__(
        self,
        target: BulkTarget,
        source: Iterable[Any] | AsyncIterable[Any],
        window: int,
        defaults: Mapping[str, Any],
        policy: RetryPolicy,
    ) -> None:
        self.target = target
        self.window = window
        self.defaults = defaults
        self.policy = policy
        self.finished: deque[tuple[int, Hashable, Result]] = deque()
        self.may_pull: Callable[[int], bool] = lambda _seq: True
        self._sync: Iterator[Any] | None = None
        self._async: AsyncIterator[Any] | None = None
        if isinstance(source, AsyncIterable):
            self._async = aiter(source)
        elif isinstance(source, Iterable) and not isinstance(source, (str, bytes)):
            self._sync = iter(source)
        else:
            raise InvalidRequest(
                f"map takes an iterable or an async iterable of jobs, got {type(source).__name__}."
            )
        self._pull_lock = asyncio.Lock()
        self.next_seq = 0
        self.exhausted = False
        self.error: BaseException | None = None
        """What a runner raised that is not an executor fault (it ends the run)."""
        self.runners: set[asyncio.Task[None]] = set()
        self._wakeup: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None

    def start(self) -> None:
        for _ in range(self.window):
            task = asyncio.ensure_future(self._runner())
            self.runners.add(task)
            task.add_done_callback(self._runner_done)

    def _runner_done(self, task: asyncio.Task[None]) -> None:
        self.runners.discard(task)
        if not task.cancelled() and task.exception() is not None and self.error is None:
            self.error = task.exception()
        self.wake()

    async def _runner(self) -> None:
        while True:
            while len(self.finished) >= self.window or not self.may_pull(self.next_seq):
                if self.exhausted:
                    return
                if self._room is None or self._room.done():
                    self._room = asyncio.get_running_loop().create_future()
                await self._room
            pulled = await self._pull()
            if pulled is None:
                return
            seq, job = pulled
            result = await run_job(self.target, job, self.defaults, self.policy)
            self.finished.append((seq, job.key, result))
            self.wake()

    async def _pull(self) -> tuple[int, Job] | None:
        """The next job and its sequence number, or ``None`` when the source is done."""
        if self.exhausted:
            return None
        if self._sync is not None:
            try:
                item = next(self._sync)
            except StopIteration:
                self.exhausted = True
                return None
        else:
            assert self._async is not None
            async with self._pull_lock:  # an async iterator takes one anext at a time
                if self.exhausted:
                    return None
                try:
                    item = await anext(self._async)
                except StopAsyncIteration:
                    self.exhausted = True
                    return None
        seq = self.next_seq
        self.next_seq = seq + 1
        return seq, _job(seq, item)

    def wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def room(self) -> None:
        """The consumer took a result: runners waiting for room look again."""
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    async def next(self) -> tuple[int, Hashable, Result] | None:
        """The next finished result, or ``None`` when every job has been handed out."""
        while True:
            if self.error is not None:
                raise self.error
            if self.finished:
                entry = self.finished.popleft()
                self.room()
                if isinstance(entry[2], Disposed):
                    raise entry[2]
                return entry
            if not self.runners:
                return None
            self.room()
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None

    async def cancel(self) -> None:
        """Cancel every runner (and the job it runs) and wait for them to end."""
        pending = list(self.runners)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.shield(asyncio.gather(*pending, return_exceptions=True))
        self.runners.clear()


async def map_jobs(
    target: BulkTarget,
    jobs: Iterable[Any] | AsyncIterable[Any],
    *,
    concurrency: int | None = None,
    retry: RetryPolicy | Unset | None = UNSET,
    options: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[Hashable, Result]]:
    """Yield ``(key, Outcome | ExecutorError)`` for every job, in completion order.

    At most ``concurrency`` jobs are in flight (default: the executor's ``bulk_window``),
    and at most as many finished results wait for the consumer; the next job is pulled
    from ``jobs`` only when one ends. ``options`` are ``execute``'s
    keywords for every job (a job's own win). A fault that remains after ``retry`` is
    yielded, not raised; DISPOSED ends the whole run (nothing more can be served).
    """
    flight = _Flight(
        target, jobs, _window(target, concurrency), check_options(options or {}, "map"), _policy(retry)
    )
    flight.start()
    try:
        while (entry := await flight.next()) is not None:
            yield entry[1], entry[2]
    finally:
        await flight.cancel()


async def map_jobs_ordered(
    target: BulkTarget,
    jobs: Iterable[Any] | AsyncIterable[Any],
    *,
    concurrency: int | None = None,
    retry: RetryPolicy | Unset | None = UNSET,
    options: Mapping[str, Any] | None = None,
    buffer: int | None = None,
) -> AsyncIterator[tuple[Hashable, Result]]:
    """:func:`map_jobs` in input order. Results that finish ahead of the one awaited wait
    in a buffer of at most ``buffer`` (default: four windows); when it is full, no new job
    starts until the awaited one ends."""
    window = _window(target, concurrency)
    if buffer is None:
        buffer = ORDERED_BUFFER_FACTOR * window
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 0:
        raise InvalidRequest(f"buffer must be an integer >= 0, got {buffer!r}.")
    flight = _Flight(target, jobs, window, check_options(options or {}, "map_ordered"), _policy(retry))
    held: dict[int, tuple[Hashable, Result]] = {}
    head = 0
    # A job may start while it and everything between it and the head fit: the ones in
    # flight plus the buffer.
    flight.may_pull = lambda seq: seq - head < window + buffer
    flight.start()
    try:
        while (finished := await flight.next()) is not None:
            seq, key, result = finished
            held[seq] = (key, result)
            while head in held:
                entry = held.pop(head)
                head += 1
                yield entry
    finally:
        await flight.cancel()


def iterate_sync(loop: asyncio.AbstractEventLoop, results: AsyncIterator[Any]) -> Generator[Any, None, None]:
    """Step an async iterator that lives on ``loop`` (another thread's) from sync code.

    Leaving the loop early, or an exception here (KeyboardInterrupt included), cancels the
    step in progress, waits for it to unwind and closes the iterator on its loop."""
    steps: list[asyncio.Task[Any]] = []

    async def step() -> tuple[bool, Any]:
        task = asyncio.current_task()
        assert task is not None
        steps[:] = [task]
        try:
            return False, await anext(results)
        except StopAsyncIteration:
            return True, None

    async def close() -> None:
        for task in steps:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        closer = getattr(results, "aclose", None)
        if closer is not None:
            await closer()

    try:
        while True:
            done, value = asyncio.run_coroutine_threadsafe(step(), loop).result()
            if done:
                return
            yield value
    finally:
        if not loop.is_closed():
            asyncio.run_coroutine_threadsafe(close(), loop).result()
