"""The fleet's Redis keyspace: every key it writes, named in one place, each with a TTL.

Per job ``J`` (a uuid4 hex), in one hash slot (``{J}``)::

    <prefix>:job:{J}:up      list  worker -> host: Started, ToolCall, FetchCall, Finished, Failed
    <prefix>:job:{J}:down    list  host -> worker: ToolReply, FetchReply, Cancel
    <prefix>:job:{J}:claim   str   who started the job (SET NX): a worker id, "expired",
                                   "cancelled" or "host-gone"; the first writer wins
    <prefix>:job:{J}:lease   str   the running worker's lease (PX lease_ttl, refreshed)

Per host ``H`` (one per FleetExecutor), per worker ``W`` and fleet-wide::

    <prefix>:host:{H}        str   the host's heartbeat (PX host_ttl, refreshed)
    <prefix>:worker:{W}      str   the worker's liveness (PX lease_ttl, refreshed every third),
                                   under its own prefix and every prefix it holds handles for
    <prefix>:admission       zset  admitted jobs, scored by when their slot lapses (ms,
                                   Redis time); a job's slot is freed by ZREM when it ends

Every key is written with an expiry and re-armed while its job lives, so a host or worker
that dies leaves nothing behind for longer than ``key_ttl_ms``.

Per Celery queue ``Q`` (kombu's own keys are the queue ``Q`` itself and its unacked records)::

    Q.dead                   list  messages a worker could not take, newest first, each a JSON
                                   object with its reason (``worker/deadletter.py``); bounded, and it
                                   expires DEAD_LETTER_TTL_S after the last one
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import WORKER_QUEUE_PREFIX

__all__ = ["JobKeys", "admission_key", "dead_letter_key", "host_key", "worker_key", "worker_queue"]


@dataclass(frozen=True)
class JobKeys:
    """The four keys of one job."""

    up: str
    down: str
    claim: str
    lease: str

    @classmethod
    def of(cls, prefix: str, job_id: str) -> JobKeys:
        base = f"{prefix}:job:{{{job_id}}}"
        return cls(up=f"{base}:up", down=f"{base}:down", claim=f"{base}:claim", lease=f"{base}:lease")

    def all(self) -> tuple[str, str, str, str]:
        return (self.up, self.down, self.claim, self.lease)


def host_key(prefix: str, host_id: str) -> str:
    return f"{prefix}:host:{host_id}"


def admission_key(prefix: str) -> str:
    return f"{prefix}:admission"


def worker_key(prefix: str, worker_id: str) -> str:
    """The worker's liveness key: while it exists, the worker's retained handles live."""
    return f"{prefix}:worker:{worker_id}"


def worker_queue(worker_id: str) -> str:
    """The Celery queue only this worker consumes: invocations of the handles it holds."""
    return f"{WORKER_QUEUE_PREFIX}{worker_id}"


def dead_letter_key(queue: str) -> str:
    """The list a worker moves the messages of ``queue`` it cannot take to."""
    return f"{queue}.dead"
