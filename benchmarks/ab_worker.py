"""A codemode worker for the fleet's A/Bs: without the private piece ``CODEMODE_BENCH_WITHOUT``
names (``pieces.py``, ``fleet_bench.py --pieces-ab``), with its start gate switched by remote
control when ``CODEMODE_BENCH_GATE_SWITCH`` is set (``gate_switch.py``, ``--gate-ab``), and
marking each step of a job into the file ``CODEMODE_BENCH_STEPS`` names (``steps.py``,
``fleet_bench.py --steps``). Takes ``codemode worker``'s arguments."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate_switch
from pieces import ENV, without_on_worker
from steps import ENV as STEPS_ENV
from steps import mark_worker

without_on_worker(os.environ.get(ENV, ""))
if os.environ.get(gate_switch.ENV):
    gate_switch.install()
if os.environ.get(STEPS_ENV):
    mark_worker(os.environ[STEPS_ENV])

from codemode.fleet.worker.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
