"""The codemode Celery worker: the app, the execute task, and the command that starts it.

Start a worker (one command; ``codemode worker`` calls the same ``main``)::

    CODEMODE_REDIS_URL=redis://localhost:6379/0 python -m workers --concurrency 2

``celery -A workers worker`` finds the app as this package's ``celery`` attribute, loaded on
first access (importing the package alone loads neither Celery nor the app, so ``workers.cli``
can say what is missing when the fleet extra is not installed).
"""

from __future__ import annotations

from typing import Any

__all__ = ["celery"]


def __getattr__(name: str) -> Any:
    if name == "celery":
        from workers.app import app

        return app
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
