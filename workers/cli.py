"""``python -m workers``: the library's worker command, ``codemode worker``
(:mod:`codemode.fleet.worker.cli`), kept under its old name."""

from codemode.fleet.worker.cli import EXIT_USAGE, LOG_LEVELS, celery_argv, main

__all__ = ["EXIT_USAGE", "LOG_LEVELS", "celery_argv", "main"]
