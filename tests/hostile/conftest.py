"""The hostile corpus shares one executor: 2 workers, 128 MB, a 2 s clock.

Module-scoped, so the corpus also checks that one pool survives every program in turn (a
wedged or crashed child is replaced, never reused), and disposed at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode import SyncIsolateExecutor

HOSTILE_MEMORY_MB = 128
HOSTILE_TIMEOUT_MS = 2_000
HOSTILE_WORKERS = 2


def hostile_executor() -> SyncIsolateExecutor:
    """The executor every hostile program runs on (the subprocess host builds the same one)."""
    return SyncIsolateExecutor(
        pool={"max_workers": HOSTILE_WORKERS, "max_queue": 100},
        memory_limit=HOSTILE_MEMORY_MB,
        timeout=HOSTILE_TIMEOUT_MS,
    )


@pytest.fixture(scope="module")
def executor() -> Iterator[SyncIsolateExecutor]:
    ex = hostile_executor()
    yield ex
    ex.dispose()
