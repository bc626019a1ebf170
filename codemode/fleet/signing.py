"""Signed jobs: an HMAC over each job message's body, made by producers and checked by workers.

With ``CODEMODE_JOB_KEY`` set, a producer puts ``hmac-sha256=<hex>`` in the task message's
:data:`SIGNATURE_HEADER`: HMAC-SHA256, under the key, of the message body exactly as the
producer wrote it (the JSON ``[args, kwargs, embed]`` that carries the job, before kombu's
base64). A worker with the key set recomputes it over the body it received and refuses a
message whose header is missing, malformed or different (``worker/intake.py``): anyone who
can write to the queue but does not hold the key cannot make the fleet run code or call
tools.

What else a signature covers depends on the task. An execute job's body holds everything
the worker acts on (the job's id, code, providers, deadline and reply channel), so its
signature covers the body alone. A ``codemode.run`` message (Celery canvas) has its
identity in Celery's headers: which try it is (``id``, ``retries``: the try's claim), when
it may run (``eta``, ``expires``) and the group it counts toward (``group``,
``group_index``). Its signature covers those headers too (:data:`TRY_HEADERS`), so a copy of
a signed message under another task id or retry number, or with its expiry taken off, is
refused like an altered one. Celery republishes a retried task with its old headers, the
signature among them, and a new ``retries``: the worker that publishes the retry (or a
chain's next task, or a chord's callback) signs the message again (``canvas.py``,
:func:`~codemode.fleet.canvas.sign_canvas_messages`).

Rotation: a worker accepts the current key and ``CODEMODE_JOB_KEY_PREVIOUS``; a producer
signs with the current one. docs/threat-model.md says what this covers and what it does not.

::

    producer: [headers named] + body ──HMAC(job_key)──▶ headers[codemode_signature] = "hmac-sha256=<hex>"
    worker:   [headers named] + body ──HMAC(job_key), HMAC(job_key_previous)──▶ one matches? run : refuse
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from .settings import ENV_JOB_KEY, ENV_JOB_KEY_PREVIOUS, BrokerSettings

__all__ = [
    "REFUSED_MARK",
    "SCHEME",
    "SIGNATURE_HEADER",
    "TRY_HEADERS",
    "JobSigner",
    "refused_text",
    "signed_bytes",
]

SIGNATURE_HEADER: Final = "codemode_signature"
"""The task message header that carries a job's signature."""
SCHEME: Final = "hmac-sha256="
"""What a signature starts with; the hex digest follows."""
_DIGEST_CHARS: Final = hashlib.sha256().digest_size * 2
TRY_HEADERS: Final = ("task", "id", "retries", "eta", "expires", "group", "group_index")
"""The Celery headers a ``codemode.run`` signature covers with the body (see the module
docstring)."""
REFUSED_MARK: Final = "refused"
"""The claim of an execute job a worker refused (its host told): no worker starts it after."""
_REFUSED_TEXT: Final = (
    "A worker refused this job: {why}. Producers and workers must share {env} (workers also "
    "accept the previous key while keys rotate); nothing ran."
)


def refused_text(signed: bool) -> str:
    """What the host of a refused job is told (INVALID_REQUEST, not retryable: a
    configuration mistake), by whether the job carried a signature."""
    why = "its signature does not match the worker's job key" if signed else "the job was not signed"
    return _REFUSED_TEXT.format(why=why, env=ENV_JOB_KEY)


class JobSigner:
    """Signs job bodies with the current key and checks them against the current and the
    previous key. Made from the settings: :meth:`from_settings` gives ``None`` when no key
    is set (jobs are neither signed nor checked)."""

    def __init__(self, key: str, previous: str = "") -> None:
        self._keys = tuple(k.encode() for k in (key, previous) if k)
        if not self._keys:
            raise ValueError(f"a JobSigner needs a key ({ENV_JOB_KEY})")

    @classmethod
    def from_settings(cls, settings: BrokerSettings) -> JobSigner | None:
        if not settings.job_key:
            return None
        return cls(settings.job_key, settings.job_key_previous)

    def sign(
        self, body: bytes, headers: Mapping[str, object] | None = None, bound: Sequence[str] = ()
    ) -> str:
        """The header value that signs ``body`` (and the ``bound`` names of ``headers``: see
        :func:`signed_bytes`) with the current key. Raises ``TypeError`` for a bound header
        that is not JSON data."""
        return (
            SCHEME + hmac.new(self._keys[0], signed_bytes(body, headers, bound), hashlib.sha256).hexdigest()
        )

    def refusal(
        self,
        signature: object,
        body: object,
        headers: Mapping[str, object] | None = None,
        bound: Sequence[str] = (),
    ) -> str | None:
        """Why a message with this header value, this body and these headers must not run,
        or ``None`` when a key this worker holds signed it (over the body and the ``bound``
        headers)."""
        if signature is None:
            return (
                f"it is not signed (no {SIGNATURE_HEADER} header), and this worker runs only "
                f"jobs signed with its key ({ENV_JOB_KEY})"
            )
        if not (
            isinstance(signature, str)
            and signature.startswith(SCHEME)
            and len(signature) == len(SCHEME) + _DIGEST_CHARS
        ):
            return f"its {SIGNATURE_HEADER} header is not {SCHEME}<{_DIGEST_CHARS} hex digits>"
        if isinstance(body, str):
            body = body.encode("utf-8")
        if not isinstance(body, bytes):
            return f"its body is {type(body).__name__}, not bytes that a signature covers"
        try:
            signed = signed_bytes(body, headers, bound)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return f"its headers {', '.join(bound)} are not JSON data that a signature covers"
        given = signature[len(SCHEME) :].encode("ascii", "replace")
        for key in self._keys:
            if hmac.compare_digest(hmac.new(key, signed, hashlib.sha256).hexdigest().encode(), given):
                return None
        return (
            f"its signature matches neither {ENV_JOB_KEY} nor {ENV_JOB_KEY_PREVIOUS} of this "
            "worker: the job was altered after it was signed, or signed with another key"
        )


def signed_bytes(body: bytes, headers: Mapping[str, object] | None, bound: Sequence[str]) -> bytes:
    """What a signature covers: ``body`` alone when no header is ``bound``, else the JSON
    list of those headers' values (``null`` for one absent), a newline, and ``body``. The
    same on both sides: a producer's header values are what the worker decodes from JSON."""
    if not bound:
        return body
    values = [None if headers is None else headers.get(name) for name in bound]
    return msgspec.json.encode(values) + b"\n" + body
