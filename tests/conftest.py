"""Shared fixtures: real executors over real child processes, and a check that no test
leaves a child process behind."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode import SyncIsolateExecutor


def child_pids() -> list[int]:
    """Live codemode children of this test process."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        if ppid == me and b"codemode._child" in cmd and state != "Z":
            found.append(int(entry))
    return found


CHILD_FAULTS = Path(__file__).resolve().parent / "child_faults"


def child_fault_env(fault: str) -> dict[str, str]:
    """A child environment that loads the test fault plugin (``tests/child_faults``) and names
    one of its faults: the runtime package itself carries no fault injection."""
    path = os.pathsep.join(p for p in (str(CHILD_FAULTS), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, CODEMODE_TEST_CHILD_FAULT=fault)


def wait_no_children(timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = child_pids()
        if not left:
            return []
        time.sleep(0.05)
    return child_pids()


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` is a live child; return those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if p in child_pids()]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@pytest.fixture(scope="module")
def executor() -> Iterator[SyncIsolateExecutor]:
    """A warm pool of 2, shared by a module's tests, disposed at the end."""
    ex = SyncIsolateExecutor(pool={"max_workers": 2, "max_queue": 100}, timeout=10_000)
    yield ex
    ex.dispose()


@pytest.fixture(scope="session", autouse=True)
def no_children_left_behind() -> Iterator[None]:
    yield
    left = wait_no_children()
    assert not left, f"child processes left behind: {left}"


# Markers by where a test lives, so that a developer can run the fast part alone
# (``pytest -m "not fleet and not hostile and not slow"``); the default command runs everything.
_MARKS_BY_PATH = {
    "tests/fleet/": "fleet",
    "tests/hostile/": "hostile",
    "tests/fleet/test_benchmark_scripts.py": "bench",
    # Several seconds each: real MCP server processes, command-line runs in subprocesses,
    # every byte pair of every legacy encoding, a pdoc build, the agent example end to end.
    "tests/mcp/": "slow",
    "tests/test_cli.py": "slow",
    "tests/test_batch.py": "slow",
    "tests/test_api_docs.py": "slow",
    "tests/test_agent_example.py": "slow",
    "tests/stdlib/test_legacy_encodings.py": "slow",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = str(config.rootpath)
    for item in items:
        where = str(item.path)[len(root) + 1 :]
        for prefix, mark in _MARKS_BY_PATH.items():
            if where.startswith(prefix):
                item.add_marker(mark)
