"""The Celery app of a codemode worker, configured from the operator's settings
(``broker_config``, read from the environment): ``celery -A workers.app worker``.

Everything else (the tasks, the hand-off strategy, the runtime, the start and stop of the
isolate pool) is the library's: :func:`codemode.fleet.worker.app.create_app`.
"""

from __future__ import annotations

from broker_config import broker_settings, worker_settings
from codemode.fleet.worker.app import READY_MARK, create_app, jobs_at_once

__all__ = ["READY_MARK", "app", "jobs_at_once", "runtime", "settings"]

_made = create_app(broker_settings(), worker_settings())
app = _made.celery
runtime = _made.runtime
settings = _made.settings
