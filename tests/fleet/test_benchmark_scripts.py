"""The benchmark scripts still run: each, briefly, into a temporary results directory.

The numbers are measured by hand (``benchmarks/README.md``); this only keeps the scripts
from rotting between measurements (an import moved, an option renamed), and checks that
what they write has the fields the README's tables are read from. The Node reference is
not run here (it needs ``benchmarks/reference/setup.sh``). Here, beside the fleet tests,
for the check that a redis-server is there to start (``fleet_helpers``); the in-process
script needs none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_helpers import require_redis_server

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(script: str, *args: str, results: Path) -> str:
    env = {**os.environ, "CODEMODE_BENCH_RESULTS": str(results)}
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def test_bench_runs_every_in_process_row_beside_a_busy_neighbour(tmp_path: Path) -> None:
    out = _run("bench.py", "--n", "30", "--rounds", "1", "--busy", "1", results=tmp_path)
    assert "tool call round trip" in out and "timeout 300 ms settles" in out, out
    report = json.loads((tmp_path / "busy.json").read_text())
    assert report["machine"]["busy_neighbours"] == 1
    ours = report["ours"]
    for scenario in ("trivial", "tools10", "cpu"):
        assert ours[scenario]["throughput_per_s"] > 0 and ours[scenario]["median_ms"] > 0
    assert 299 < ours["timeout"]["settle_ms_median"] < 400
    assert ours["memory"]["rss_per_child_mb"] > 0
    assert not (tmp_path / "latest.json").exists()


@pytest.mark.fleet
def test_fleet_bench_prints_every_fleet_target(tmp_path: Path) -> None:
    require_redis_server()
    out = _run("fleet_bench.py", "--runs", "20", results=tmp_path)
    assert out.count("target: ") == 3, out
    results = json.loads((tmp_path / "fleet.json").read_text())
    assert [t["what"] for t in results["targets"]] == [
        "trivial job, added over in-process (task events off)",
        "trivial job, added over in-process (task events on)",
        "one tool call, against 2x raw round trip + in-process call",
    ], results["targets"]
    assert [t["bound"] for t in results["targets"][:2]] == [1.5, 2.0]
    assert results["fleet_events_trivial"]["median_ms"] > 0
    assert results["fleet_one_tool_call"]["median_ms"] > 0
    assert results["redis_list_round_trip"]["median_ms"] > 0


@pytest.mark.fleet
def test_fleet_bench_pieces_ab_judges_each_private_piece(tmp_path: Path) -> None:
    """Each private piece against the library's way (``benchmarks/pieces.py``): every side
    runs real jobs (a side whose variant broke the fleet fails its jobs' assertions)."""
    require_redis_server()
    out = _run("fleet_bench.py", "--pieces-ab", "--runs", "10", results=tmp_path)
    results = json.loads((tmp_path / "fleet_pieces.json").read_text())
    assert set(results["pieces"]) == {"messages", "link"}, out
    assert set(results["sides"]) == {"all pieces", "without messages", "without link"}
    for side in results["sides"].values():
        assert side["trivial"]["median_ms"] > 0 and side["50_tool_calls"]["median_ms"] > 0
    assert out.count("earns its place") + out.count("does not earn its place") >= 2, out


@pytest.mark.fleet
def test_fleet_bench_steps_times_every_step_of_a_job(tmp_path: Path) -> None:
    """Marks from the host and the worker meet in one table (``benchmarks/steps.py``)."""
    require_redis_server()
    out = _run("fleet_bench.py", "--steps", "--runs", "20", results=tmp_path)
    for step in (
        "message popped",
        "unacked record written",
        "the task body starts",
        "claim answered",
        "host: outcome read",
    ):
        assert step in out, out


@pytest.mark.fleet
def test_fleet_bench_gate_ab_switches_the_gate_in_a_running_worker(tmp_path: Path) -> None:
    """The start gate on and off, events off and on (``benchmarks/gate_switch.py``): every
    side runs real jobs, and the worker answers each switch (else the run fails)."""
    require_redis_server()
    out = _run("fleet_bench.py", "--gate-ab", "--runs", "10", results=tmp_path)
    for side in ("gate on, events off", "gate off, events off", "gate on, events on", "gate off, events on"):
        assert f"{side} " in out and "(n=10)" in out, out


def test_mcp_bench_times_calls_in_programs_and_splits_one(tmp_path: Path) -> None:
    out = _run("mcp_bench.py", "--rounds", "1", "--per-round", "2", results=tmp_path)
    report = json.loads((tmp_path / "mcp.json").read_text())
    assert report["median_ms"]["direct"] > 0 and report["ratio_per_call_to_direct"] > 0, out
    parts = _run("mcp_bench.py", "--parts", results=tmp_path)
    for part in (
        "arguments checked",
        "hop into the tool set's thread",
        "the tool set's dispatch",
        "direct call",
    ):
        assert part in parts, parts
