"""Where the benchmarks write their results: outside the repository, in
``~/.cache/codemode-benchmarks/``, or the directory ``CODEMODE_BENCH_RESULTS`` names
(``tests/fleet/test_benchmark_scripts.py`` runs them into a temporary one, so that a smoke run never
replaces the measured results). Raw results are not committed: ``benchmarks/README.md`` holds the
one current table, and its history is git's."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RESULTS_DIR"]

RESULTS_DIR = Path(os.environ.get("CODEMODE_BENCH_RESULTS") or Path.home() / ".cache" / "codemode-benchmarks")
