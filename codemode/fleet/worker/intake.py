"""The first look a worker takes at a task message: its signature, and how long it queued.

:meth:`Intake.refused` is the hand-off's one call (``strategy.py``), before the job is read,
for execute messages and for ``codemode.run`` (canvas) messages (:meth:`Intake.for_canvas`:
the signature covers the try's headers too, and no host waits on the job):

::

    message ─▶ queue wait observed (metrics, from the producer's enqueue header)
            ─▶ no job key on this worker ─▶ accepted
            ─▶ signature (signing.py) matches the current or the previous key ─▶ accepted
            ─▶ otherwise refused: logged and dead-lettered with the reason, and, when the body
               holds a job an honest host is waiting for, that host told (see below)

Telling the host. A forged message has no honest host; an honest host whose key is wrong
(or missing) should learn it at once, not at its queue timeout. So the worker answers the
job's reply channel, with INVALID_REQUEST naming the key (not retryable: a configuration
mistake), only when all of these hold, checked in one script: the host's heartbeat key
exists, the job holds a slot in the admission set (only a host's admission script puts it
there), and no claim was made on the job (the refusal's own mark is set with it, so a
copy of the job never runs after). A Redis writer without the key can therefore make a
worker write only to a reply channel of a job a live host admitted and no worker took,
and only the same fixed refusal (``redis/lua/refuse.lua``); such a writer can already push to that channel, or
delete the job from its queue, itself. What it cannot do is run code or call tools.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec
import redis
import redis.exceptions

from ..._faults import InvalidRequest
from ..canvas import CANVAS_TASK_NAME
from ..redis.client import sync_client
from ..redis.keys import JobKeys, admission_key, host_key
from ..redis.scripts import lua_source
from ..settings import TASK_NAME, BrokerSettings
from ..signing import REFUSED_MARK, SIGNATURE_HEADER, TRY_HEADERS, JobSigner, refused_text
from ..wire import ENQUEUED_HEADER, Failed, JobSpec, encode, job_from_celery
from .metrics import FleetTally

__all__ = ["REFUSED_MARK", "Intake"]

log = logging.getLogger("codemode.fleet.worker")


class Intake:
    """Screens the messages of one task of one worker (see the module docstring):
    ``task_name``'s, whose signature covers the body and the ``bound`` headers, and whose
    refused jobs' hosts are told when ``tells_hosts``."""

    def __init__(
        self,
        settings: BrokerSettings,
        tally: FleetTally | None = None,
        *,
        task_name: str = TASK_NAME,
        bound: Sequence[str] = (),
        tells_hosts: bool = True,
    ) -> None:
        self.settings = settings
        self.signer = JobSigner.from_settings(settings)
        self.tally = tally
        self.task_name = task_name
        self.bound = tuple(bound)
        self.tells_hosts = tells_hosts
        self._redis: redis.Redis | None = None
        self._answer: Any = None

    @classmethod
    def for_canvas(cls, settings: BrokerSettings, tally: FleetTally | None = None) -> Intake:
        """The intake of ``codemode.run``: signed over the body and the try's headers
        (``TRY_HEADERS``); a refused canvas job has no host to tell."""
        return cls(settings, tally, task_name=CANVAS_TASK_NAME, bound=TRY_HEADERS, tells_hosts=False)

    def refused(self, message: Any, refuse: Any) -> bool:
        """Whether ``message`` must not run; when it must not, it was handed to ``refuse``
        (``(message, reason)``: logged and dead-lettered) and its host told if it waits.
        Settling the message is the caller's part. Never raises."""
        headers = getattr(message, "headers", None)
        headers = headers if isinstance(headers, dict) else {}
        if self.tally is not None:
            self.tally.taken(headers.get(ENQUEUED_HEADER))
        if self.signer is None:
            return False
        signature = headers.get(SIGNATURE_HEADER)
        reason = self.signer.refusal(signature, getattr(message, "body", None), headers, self.bound)
        if reason is None:
            return False
        unsigned = signature is None
        if self.tally is not None:
            self.tally.refuse("unsigned" if unsigned else "bad-signature")
        refuse(message, f"a {self.task_name} message refused: {reason}")
        if self.tells_hosts:
            self._tell_host(message, refused_text(signed=not unsigned))
        return True

    def _tell_host(self, message: Any, text: str) -> None:
        spec = _job(message)
        if spec is None:
            return
        keys = JobKeys.of(spec.key_prefix, spec.job_id)
        failed = encode(Failed(InvalidRequest(text).to_data()))
        try:
            if self._answer is None:
                self._redis = sync_client(self.settings)
                self._answer = self._redis.register_script(lua_source("refuse"))
            said = self._answer(
                keys=[
                    keys.claim,
                    keys.up,
                    host_key(spec.key_prefix, spec.host_id),
                    admission_key(spec.key_prefix),
                ],
                args=[spec.job_id, self.settings.key_ttl_ms, failed, REFUSED_MARK],
            )
        except (redis.exceptions.RedisError, OSError) as exc:
            log.warning("job %s: could not tell its host of the refusal (%s)", spec.job_id, exc)
            return
        said = said.decode() if isinstance(said, bytes) else said
        log.info(
            "job %s: refused; its host %s",
            spec.job_id,
            "was told" if said == "answered" else f"not told ({said})",
        )


def _job(message: Any) -> JobSpec | None:
    """The job a refused message's body holds, if it holds a readable one."""
    try:
        body = msgspec.json.decode(getattr(message, "body", b"") or b"")
        job = (
            body[1]["job"]
            if isinstance(body, list) and len(body) == 3 and isinstance(body[1], dict)
            else None
        )
        return None if job is None else job_from_celery(job)
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError, RecursionError):
        return None
