"""Liveness from a thread of its own: what says "still here" must not wait for a free loop.

The host's heartbeat key and a worker's job leases used to be refreshed by tasks on the
event loop that also runs the host's tools. A tool that blocked that loop (sync work inside
an async dispatch) for longer than the key's TTL made a live host look dead: the worker
failed the host's pending calls, and the host called a job that finished meanwhile a crash.
A :class:`BeatThread` calls its beat on a daemon thread, and each beat uses a synchronous
Redis client of its own (``client.sync_client``), so nothing a user supplies can hold it up; only a stalled process, or a lost
Redis, stops it.

::

    loop thread (tools, sessions, jobs)      beat thread (this module)
      start() ──────────────────────────────▶ every interval: beat()  (own Redis client)
      stop()  ── event, join ───────────────▶ ends after the beat in flight
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["BeatThread"]

log = logging.getLogger("codemode.fleet")


class BeatThread:
    """Calls ``beat`` every ``interval_s`` on a daemon thread until :meth:`stop`.

    ``beat`` handles its own Redis errors (each caller says what a failed beat means); an
    exception that escapes it is logged and the beats go on."""

    def __init__(self, name: str, interval_s: float, beat: Callable[[], object]) -> None:
        self.interval_s = interval_s
        self._beat = beat
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            try:
                self._beat()
            except Exception:  # a bug in a beat must not end liveness for good
                log.exception("%s: a beat failed", self._thread.name)

    def stop(self, timeout_s: float) -> bool:
        """Stop after the beat in flight; whether the thread ended within ``timeout_s``."""
        self._stopping.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()
