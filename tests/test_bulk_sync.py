"""``SyncIsolateExecutor.map``: the bulk contract as a blocking iterator."""

from __future__ import annotations

import os
import time
from pathlib import Path

from codemode import Job, Outcome, SyncIsolateExecutor


def _children() -> set[int]:
    """This process's live child processes."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def test_sync_map_and_map_ordered_serve_every_job() -> None:
    with SyncIsolateExecutor(pool={"max_workers": 2, "max_queue": 2}) as executor:
        done = dict(executor.map(f"async () => {i} * 2" for i in range(50)))
        ordered = [key for key, _ in executor.map_ordered([Job(c, f"async () => '{c}'") for c in "abcde"])]
    assert sorted(int(str(k)) for k in done) == list(range(50))
    assert all(isinstance(o, Outcome) and o.result == 2 * int(str(k)) for k, o in done.items())
    assert ordered == list("abcde")


def test_leaving_a_sync_map_early_cancels_its_runs_and_leaves_no_child() -> None:
    before = _children()
    executor = SyncIsolateExecutor(pool={"max_workers": 2, "max_queue": 2})
    try:
        codes = ["async () => 'first'"] + ["async () => { while (true) {} }"] * 10
        results = executor.map(codes, timeout=60_000)
        key, outcome = next(results)
        assert isinstance(outcome, Outcome) and (key, outcome.result) == (0, "first")
        started = time.monotonic()
        results.close()  # what leaving a for loop early does to the generator
        # The endless runs were cancelled: the executor serves again long before 60 s.
        assert executor.execute("async () => 'next'").result == "next"
        assert time.monotonic() - started < 40
    finally:
        executor.dispose()
    deadline = time.monotonic() + 30
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children() - before == set()
