"""``python -m codemode``: the same command line as the ``codemode`` script."""

import sys

from .cli import main

sys.exit(main())
