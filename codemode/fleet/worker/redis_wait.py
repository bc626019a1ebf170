"""Before a worker starts: does Redis answer? Said on the first line when it does not.

Celery itself retries a broker it cannot reach forever, behind its banner, in log lines a
reader has to scroll for. The worker asks first: Redis answering, it starts; Redis not
answering, it says so at once and waits (as long as it takes, or ``--wait-for-redis``
seconds, then exits 1); Redis answering with a refusal (a wrong password, say), it stops
with exit 2, because waiting does not fix a configuration.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import TextIO

from ..redis.client import sync_client
from ..settings import ENV_REDIS_URL, BrokerSettings

__all__ = ["EXIT_NOT_STARTED", "POLL_S", "shown_url", "wait_for_redis"]

EXIT_NOT_STARTED = 1
"""Redis did not answer within ``--wait-for-redis``: the worker did not start."""
EXIT_REFUSED = 2
"""Redis answered with a refusal (authentication, an unknown database): nothing to retry."""
POLL_S = 1.0
"""How often an unanswered Redis is asked again."""


def shown_url(url: str) -> str:
    """``url`` with its password masked, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:**@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def wait_for_redis(settings: BrokerSettings, wait_s: float | None, err: TextIO) -> int | None:
    """``None`` once Redis answers; else the exit status (``wait_s``: give up after that
    long; ``None``: wait as long as it takes)."""
    import redis

    url = shown_url(settings.redis_url)
    client = sync_client(settings)
    deadline = None if wait_s is None else time.monotonic() + wait_s
    told = False
    try:
        while True:
            try:
                client.ping()
            except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as exc:
                print(
                    f"codemode worker: Redis at {url} refused the connection ({exc}). Fix "
                    f"--redis-url or ${ENV_REDIS_URL}; the worker did not start.",
                    file=err,
                    flush=True,
                )
                return EXIT_REFUSED
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
                if not told:
                    told = True
                    then = (
                        "waiting for it as long as it takes (--wait-for-redis SECONDS gives up sooner)."
                        if wait_s is None
                        else f"waiting up to {wait_s:g} s for it (--wait-for-redis)."
                    )
                    print(
                        f"codemode worker: Redis at {url} is not answering ({exc}); {then}",
                        file=err,
                        flush=True,
                    )
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    print(
                        f"codemode worker: Redis at {url} did not answer within {wait_s:g} s; the "
                        f"worker did not start. Start Redis, or check --redis-url / ${ENV_REDIS_URL}.",
                        file=err,
                        flush=True,
                    )
                    return EXIT_NOT_STARTED
                time.sleep(POLL_S if left is None else min(POLL_S, left))
                continue
            if told:
                print(f"codemode worker: Redis at {url} answers; starting.", file=err, flush=True)
            return None
    finally:
        client.close()
