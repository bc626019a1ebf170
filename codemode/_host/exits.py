"""A child's death, read: its exit status and last words, mapped to a fault or an outcome.

A child that dies before ``Ready`` failed to start; one that dies during a run fails that
run alone. Whether the death is the program's doing decides what the caller gets: V8's
out-of-memory words on stderr, or a run killed past its deadline, are outcomes the model
reads (the declared memory and timeout texts); anything else is ``WORKER_CRASHED``
("Worker N crashed with SIGKILL(-9) ...", the seed's text), saying whether the program had
started.
"""

from __future__ import annotations

import asyncio
import signal

from .. import _texts
from .._faults import ExecutorError, WorkerCrashed
from .._outcome import Outcome

__all__ = ["STDERR_DRAIN_S", "StderrTail", "death_fault", "death_outcome", "describe_exit", "start_failure"]

STDERR_TAIL_BYTES = 8192
STDERR_DRAIN_S = 1.0  # a dead child's stderr reaches EOF at once, unless it left a grandchild


def says_out_of_memory(stderr: bytes | bytearray) -> bool:
    """Whether the child's stderr holds V8's (or the allocator's) out-of-memory words."""
    text = bytes(stderr).lower()
    return b"out of memory" in text or b"allocation failed" in text


def describe_exit(returncode: int | None) -> str:
    """An exit status as a fault names it: ``SIGKILL(-9)``, ``exit status 1``."""
    if returncode is None:
        return "an unknown status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal"
        return f"{name}({returncode})"
    return f"exit status {returncode}"


class StderrTail:
    """The last bytes a child wrote to stderr, and whether it ever said out of memory."""

    def __init__(self) -> None:
        self.tail = bytearray()
        self.said_out_of_memory = False

    async def read(self, reader: asyncio.StreamReader) -> None:
        """Keep the tail until the pipe closes."""
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            self.tail += chunk
            # V8's out-of-memory line comes first and its backtrace after: a long backtrace
            # pushes the line out of the tail, so it is looked for before the tail is cut.
            if not self.said_out_of_memory and says_out_of_memory(self.tail):
                self.said_out_of_memory = True
            if len(self.tail) > STDERR_TAIL_BYTES:
                del self.tail[: len(self.tail) - STDERR_TAIL_BYTES]

    def last_lines(self) -> list[str]:
        return self.tail.decode("utf-8", "replace").strip().splitlines()[-3:]


def start_failure(slot: int, returncode: int | None, stderr: StderrTail) -> WorkerCrashed:
    """A child that exited before it was ready."""
    causes = (f"The child exited with {describe_exit(returncode)} before it was ready.", *stderr.last_lines())
    return WorkerCrashed(f"Worker {slot} failed to start.", causes=causes)


def death_outcome(timeout_ms: int, memory_limit_mb: int, stderr: StderrTail) -> Outcome:
    """A death the program caused and the model should read: out of memory, or wedged."""
    if stderr.said_out_of_memory:
        return Outcome(error=_texts.memory_text(memory_limit_mb))
    return Outcome(error=_texts.timeout_text(timeout_ms))


def death_fault(
    slot: int, returncode: int | None, reason: str | None, started: bool, stderr: StderrTail
) -> ExecutorError:
    """A death during a run that the program did not cause (``reason``: what the host saw
    wrong in the child's frames, when it killed the child for them)."""
    state = "the program had started" if started else "the program had not started"
    if reason is not None:
        what = f"Worker {slot} {reason} while running the program; {state}."
    else:
        what = f"Worker {slot} crashed with {describe_exit(returncode)} while running the program; {state}."
    return WorkerCrashed(what, started=started, causes=tuple(stderr.last_lines()))
