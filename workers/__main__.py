"""``python -m workers``: the worker command (``codemode worker``), run from the repository."""

import sys

from codemode.fleet.worker.cli import main

sys.exit(main(sys.argv[1:]))
