"""``codemode batch``: a JSON Lines file through ``map``, in a real command process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codemode import QueueFull
from codemode._batch import outcome_record
from codemode._retry import note_attempts

ROOT = Path(__file__).resolve().parent.parent
BOUND_S = 180


def batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode", "batch", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def write_lines(path: Path, lines: list[Any]) -> None:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_line_gets_one_record_and_bad_lines_are_named(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "in.jsonl",
        [
            {"id": "a", "code": "async () => 6 * 7"},
            "{not json",
            {"id": "b", "code": "async () => { console.log('hi'); throw new Error('no such order') }"},
            {"id": "c", "code": "async ({ x }) => x + 1", "inputs": {"x": 1}},
            {"id": "a", "code": "async () => 0"},
            {
                "id": 7,
                "code": "async () => { await new Promise((r) => setTimeout(r, 5000)) }",
                "timeout": 300,
            },
            {"code": "async () => 1"},
        ],
    )
    done = batch("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # bad lines, no fault
    by_id = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
    assert set(by_id) == {"a", "b", "c", 7}
    assert by_id["c"]["result"] == 2  # a line's inputs are the entry function's argument
    assert by_id["a"]["result"] == 42 and by_id["a"]["error"] is None and by_id["a"]["attempts"] == 1
    assert "no such order" in by_id["b"]["error"] and by_id["b"]["logs"] == [{"level": "log", "text": "hi"}]
    assert by_id["b"]["error_detail"]["line"] == 1 and by_id["b"]["error_detail"]["name"] == "Error"
    assert by_id[7]["error"].startswith("Execution timed out at its 300 ms bound.")
    err = done.stderr
    assert "in.jsonl, line 2: not JSON" in err
    assert "line 5: id 'a' already appeared on line 1" in err
    assert "line 7: id must be a string or an integer" in err
    assert "4 lines run" in err and "2 ok, 2 program errors, 0 faults" in err


def test_a_fault_that_remains_is_recorded_and_fails_the_batch(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "in.jsonl",
        [
            {"id": "ok", "code": "async () => 1"},
            {"id": "too-long", "code": "async () => 1", "timeout": 10**9},
        ],
    )
    done = batch("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    by_id = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
    assert by_id["too-long"]["fault"]["code"] == "INVALID_REQUEST"
    assert by_id["too-long"]["fault"]["retryable"] is False
    assert "INVALID_REQUEST: 1" in done.stderr


def test_a_fault_record_counts_the_tries_the_fault_ended() -> None:
    fault = QueueFull("busy")
    note_attempts(fault, 3)
    record = outcome_record("j", fault)
    assert record["attempts"] == 3 and record["fault"]["code"] == "QUEUE_FULL"
    assert outcome_record("k", QueueFull("busy"))["attempts"] == 1


def test_tools_come_from_a_registry_named_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "shop_tools.py").write_text(
        "from codemode import ToolRegistry\n"
        "tools = ToolRegistry()\n"
        "@tools.tool('shop', 'price')\n"
        "def price(item):\n"
        "    return {'apple': 3}[item]\n"
        "not_a_registry = 5\n"
    )
    write_lines(tmp_path / "in.jsonl", [{"id": 1, "code": "async () => (await shop.price('apple')) * 2"}])
    done = batch("in.jsonl", "-o", "out.jsonl", "--tools", "shop_tools:tools", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert records(tmp_path / "out.jsonl")[0]["result"] == 6
    wrong = batch("in.jsonl", "-o", "other.jsonl", "--tools", "shop_tools:not_a_registry", cwd=tmp_path)
    assert wrong.returncode == 2 and "is not a codemode.ToolRegistry" in wrong.stderr


def test_an_existing_output_is_not_overwritten_without_resume(tmp_path: Path) -> None:
    write_lines(tmp_path / "in.jsonl", [{"id": 1, "code": "async () => 1"}])
    (tmp_path / "out.jsonl").write_text('{"id": 0}\n')
    done = batch("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and "pass --resume" in done.stderr
    assert (tmp_path / "out.jsonl").read_text() == '{"id": 0}\n'


def test_a_killed_batch_resumes_and_every_id_is_written_exactly_once(tmp_path: Path) -> None:
    count = 300
    write_lines(
        tmp_path / "in.jsonl",
        [
            {
                "id": f"job-{i}",
                "code": f"async () => {{ await new Promise((r) => setTimeout(r, 30)); return {i} }}",
            }
            for i in range(count)
        ],
    )
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "codemode", "batch", "in.jsonl", "-o", "out.jsonl", "--workers", "2"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + BOUND_S
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 40:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the batch ended before it could be killed mid-run"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    written_before = out.read_text().count("\n")
    assert 40 <= written_before < count
    done = batch("in.jsonl", "-o", "out.jsonl", "--resume", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ids = [r["id"] for r in records(out)]
    assert sorted(ids) == sorted(f"job-{i}" for i in range(count))  # each exactly once
    assert f"{written_before} ids were already in the output" in done.stderr
    assert all(r["result"] == int(r["id"].split("-")[1]) for r in records(out))


def test_the_progress_bar_and_the_periodic_line_do_not_change_the_output(tmp_path: Path) -> None:
    write_lines(tmp_path / "in.jsonl", [{"id": i, "code": f"async () => {i}"} for i in range(30)])
    bar = batch("in.jsonl", "-o", "bar.jsonl", "--progress", "bar", cwd=tmp_path)
    lines = batch("in.jsonl", "-o", "lines.jsonl", "--progress", "lines", cwd=tmp_path)
    assert bar.returncode == lines.returncode == 0, bar.stderr + lines.stderr
    assert "30/30" in bar.stderr  # the bar's last state: every line done
    for name in ("bar.jsonl", "lines.jsonl"):
        assert sorted(r["result"] for r in records(tmp_path / name)) == list(range(30))


def test_the_bulk_benchmark_runs(tmp_path: Path) -> None:
    """A short run of benchmarks/bulk_bench.py, so that it keeps working between measurements."""
    done = subprocess.run(
        [sys.executable, "bulk_bench.py", "--n", "60", "--rounds", "1", "--batch-lines", "10,20"],
        cwd=ROOT / "benchmarks",
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CODEMODE_BENCH_RESULTS": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "map/pool" in done.stdout and json.loads((tmp_path / "bulk.json").read_text())["batch"]
