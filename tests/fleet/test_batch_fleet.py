"""``codemode batch --fleet``: a JSON Lines file served by the shared fleet's workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.fleet.testing import SharedFleet

pytestmark = pytest.mark.fleet

ROOT = Path(__file__).resolve().parent.parent.parent


def test_batch_on_the_fleet_writes_every_id_once(fleet: SharedFleet, tmp_path: Path) -> None:
    lines = [{"id": i, "code": f"async () => {i} * 3"} for i in range(60)]
    lines.append({"id": "throws", "code": "async () => { throw new Error('bad input') }"})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode",
            "batch",
            "in.jsonl",
            "-o",
            "out.jsonl",
            "--fleet",
            fleet.settings.redis_url,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        # The fleet's other settings (key prefix, queue, leases) as its workers have them.
        env={**os.environ, **fleet.settings.env(), "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    records = {r["id"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert len(records) == 61
    assert all(records[i]["result"] == 3 * i for i in range(60))
    assert "bad input" in records["throws"]["error"]
    assert "60 ok, 1 program errors, 0 faults" in done.stderr
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode",
            "batch",
            "in.jsonl",
            "-o",
            "x.jsonl",
            "--fleet",
            "r://x",
            "--workers",
            "2",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert refused.returncode == 2 and "each fleet worker's own settings" in refused.stderr
