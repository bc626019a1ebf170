"""Both executors satisfy :class:`codemode.Executor`, checked by mypy over the contract suite
(its fixture yields either as an ``Executor``, and the tests call it as one): an executor
whose ``execute`` lost or retyped a request field fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_holds_both_executors_to_the_contract() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "tests/contract/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
