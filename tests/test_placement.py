"""Each child runs on one core of those this process may use, spread evenly (see
codemode/_host/placement.py), unless ``pool.pin_cpus`` is off; a replacement takes the core its
slot had, and two executors in one process do not pile onto the same core. Every thread of
a child keeps the host's scheduling policy (see ``pin_to`` in codemode/_child/process.py: a
batch policy made tool calls wait out a busy neighbour's time slice)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from codemode import SyncIsolateExecutor
from codemode._host.placement import SLOTS_DIR_ENV

ALLOWED = sorted(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(len(ALLOWED) < 2, reason="this process may use one core")


@pytest.fixture(autouse=True)
def _own_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count is host-wide: a private slots directory keeps other processes' children
    (another test run on the machine, say) out of what these tests assert."""
    monkeypatch.setenv(SLOTS_DIR_ENV, str(tmp_path))


def _cores_of(pid: int) -> set[int]:
    """The union of the affinity masks of every thread of ``pid``."""
    cores: set[int] = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        cores |= os.sched_getaffinity(int(tid))
    return cores


def _pids(ex: SyncIsolateExecutor, count: int, without: int | None = None) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = ex.worker_pids
        if len(pids) == count and without not in pids:
            return pids
        ex.execute("() => 0")
        time.sleep(0.05)
    raise AssertionError(f"the pool did not reach {count} children")


@needs_two_cores
def test_children_are_pinned_one_per_core_and_a_replacement_keeps_its_core() -> None:
    with SyncIsolateExecutor(pool={"max_workers": len(ALLOWED)}) as ex:
        pids = _pids(ex, len(ALLOWED))
        cores = {pid: _cores_of(pid) for pid in pids}
        assert all(len(c) == 1 for c in cores.values()), cores  # every thread, one core
        assert set().union(*cores.values()) == set(ALLOWED)  # spread over all of them
        victim = pids[0]
        os.kill(victim, signal.SIGKILL)
        [replacement] = set(_pids(ex, len(ALLOWED), without=victim)) - set(pids)
        assert _cores_of(replacement) == cores[victim]
        assert ex.execute("() => 6 * 7").result == 42


@needs_two_cores
def test_two_executors_do_not_share_a_core_while_another_is_free() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}) as a, SyncIsolateExecutor(pool={"max_workers": 1}) as b:
        [pa], [pb] = _pids(a, 1), _pids(b, 1)
        assert _cores_of(pa) != _cores_of(pb)


def _policies_of(pid: int) -> dict[int, int]:
    """The scheduling policy of every thread of ``pid``."""
    policies = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            policies[int(tid)] = os.sched_getscheduler(int(tid))
    return policies


def test_every_thread_of_a_child_keeps_the_hosts_scheduling_policy() -> None:
    host_policy = os.sched_getscheduler(0)
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        [pid] = _pids(ex, 1)
        # The loop's thread, the thread pool's, and the thread of each prepared isolate.
        policies = _policies_of(pid)
        assert len(policies) >= 3, policies
        assert set(policies.values()) == {host_policy}, policies
        os.kill(pid, signal.SIGKILL)
        [replacement] = _pids(ex, 1, without=pid)  # adopted from the standby
        assert set(_policies_of(replacement).values()) == {host_policy}
        assert ex.execute("() => 6 * 7").result == 42


def test_pin_cpus_off_leaves_children_where_the_host_may_run() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1, "pin_cpus": False}) as ex:
        [pid] = _pids(ex, 1)
        assert _cores_of(pid) == set(ALLOWED)
