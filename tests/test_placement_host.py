"""CPU placement is counted host-wide (codemode/_host/placement.py): separate host processes,
each with its own executor, spread their children over the cores instead of every one of
them starting on the first core; a process that dies frees its cores for the others."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode._host.placement import SLOTS_DIR_ENV

ALLOWED = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="this process may use one core")

HOST = textwrap.dedent(
    """
    import os, sys
    from codemode import SyncIsolateExecutor

    with SyncIsolateExecutor(pool={"max_workers": 1, "standby": False}) as ex:
        assert ex.execute("() => 1").result == 1
        [pid] = ex.worker_pids
        cores = set()
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                cores |= os.sched_getaffinity(int(tid))
            except ProcessLookupError:
                pass  # the thread ended between the listing and the read
        print(",".join(map(str, sorted(cores))), flush=True)
        sys.stdin.read()  # hold the child until the test closes our stdin
    """
)


class Host:
    """A host process with a one-child executor, alive until :meth:`close`."""

    def __init__(self, slots: Path) -> None:
        env = {**os.environ, SLOTS_DIR_ENV: str(slots)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # (blocks until the child runs: no clock)
        assert line, f"the host process ended without a child (exit {self.proc.wait()})"
        self.cores = {int(c) for c in line.split(",")}

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=60)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[list[Host]]:
    started: list[Host] = []
    yield started
    for host in started:
        host.close()


def test_host_processes_spread_their_children_over_the_cores(tmp_path: Path, hosts: list[Host]) -> None:
    """Counted per process, each of these hosts put its only child on the first core."""
    for _ in ALLOWED:
        hosts.append(Host(tmp_path))
    assert all(len(h.cores) == 1 for h in hosts)
    assert set().union(*(h.cores for h in hosts)) == set(ALLOWED)


def test_a_dead_hosts_cores_are_free_again(tmp_path: Path, hosts: list[Host]) -> None:
    first = Host(tmp_path)
    hosts.append(first)
    first.kill()  # no clean exit: the kernel drops its locks
    second = Host(tmp_path)
    hosts.append(second)
    assert second.cores == first.cores == {ALLOWED[0]}


def test_an_unusable_slots_directory_counts_this_process_alone(tmp_path: Path, hosts: list[Host]) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    host = Host(not_a_dir)
    hosts.append(host)
    assert host.cores == {ALLOWED[0]}  # still pinned, as each process did before
