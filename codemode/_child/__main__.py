"""Entry point of a child process.

``python -m codemode._child WORKER_ID MEMORY_MB MSG_BYTES LOGS [probe|probed]``
"""

import sys

from .main import main

main(sys.argv[1:])
