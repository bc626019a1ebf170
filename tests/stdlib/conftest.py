"""Fixtures for the guest standard library tests.

Every test runs its JavaScript in a fresh isolate prepared by the conformance harness
(``codemode.conformance.isolate``), which emulates the executor's lazy module loader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from py_mini_racer import MiniRacer

from codemode.conformance import isolate, run_async


class Guest:
    """A fresh isolate with the standard library; ``run`` executes an async function body."""

    def __init__(self, mr: MiniRacer) -> None:
        self.mr = mr

    def run(self, body: str) -> Any:
        """Run ``body`` inside an async function and return its JSON-decoded result."""
        return run_async(self.mr, body, timeout_s=20.0)

    def logs(self) -> list[dict[str, str]]:
        """Every ``{level, text}`` entry the console module recorded so far."""
        result: list[dict[str, str]] = self.run("return __stdlibLogs;")
        return result


@pytest.fixture
def guest() -> Iterator[Guest]:
    """A fresh isolate per test, network disabled (host.fetch rejects)."""
    with isolate() as mr:
        yield Guest(mr)


@pytest.fixture
def guest_with_fetch() -> Iterator[Callable[[str], Guest]]:
    """Factory: an isolate whose ``host.fetch`` is the given JS function expression."""
    opened: list[Any] = []

    def make(host_fetch_js: str) -> Guest:
        cm = isolate(host_fetch_js=host_fetch_js)
        mr = cm.__enter__()
        opened.append(cm)
        return Guest(mr)

    yield make
    for cm in opened:
        cm.__exit__(None, None, None)
