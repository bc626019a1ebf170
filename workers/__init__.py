"""The deployable codemode Celery worker: a thin package over :mod:`codemode.fleet.worker`.

Start a worker with Celery's own command line, the app configured from the environment
(``broker_config``)::

    CODEMODE_REDIS_URL=redis://localhost:6379/0 celery -A workers worker -c 2

or with ``python -m workers`` (the same as ``codemode worker``, which an installed codemode
runs without this repository). ``celery -A workers worker`` finds the app as this
package's ``celery`` attribute, loaded on first access (importing the package alone loads
neither Celery nor the app).
"""

from __future__ import annotations

from typing import Any

__all__ = ["celery"]


def __getattr__(name: str) -> Any:
    if name == "celery":
        from workers.app import app

        return app
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
