"""Entry point of a child process.

``python -m codemode._child WORKER_ID MEMORY_MB MSG_BYTES LOGS probe|probed CPU|any|standby``

``standby``: load the engine, then wait for the host's ``Adopt`` (slot and core) before
preparing isolates and answering Ready (see ``Pool``'s standby child).
"""

import sys

from .main import main

main(sys.argv[1:])
