"""A codemode worker without the private piece ``CODEMODE_BENCH_WITHOUT`` names (``pieces.py``):
the other side of ``fleet_bench.py --pieces-ab``. Takes ``codemode worker``'s arguments."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pieces import ENV, without_on_worker

without_on_worker(os.environ.get(ENV, ""))

from codemode.fleet.worker.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
