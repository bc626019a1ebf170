"""Wire messages of the fleet: the job a producer enqueues, and both directions of a job's
reply channel.

The job travels inside a Celery message, so it is plain JSON data (Celery's serializer is
json; :func:`job_to_celery` / :func:`job_from_celery`). Reply-channel messages are frozen
tagged ``msgspec.Struct`` unions encoded as msgpack, one reused encoder and one decoder per
direction, dispatched with ``match``. Nothing is pickled.

Schema evolution: new fields get defaults; a field is never retyped or renamed; a job with
a ``v`` this worker does not know is refused with INVALID_REQUEST. Plain jobs are still v1;
jobs that touch retained handles (``retain``, or ``kind`` invoke/release) are v2, so a
worker from before handles refuses them instead of running them as something else; jobs
with ``inputs_json`` are v3, so a worker from before inputs refuses them instead of calling
the entry function without its argument. ``stream_logs`` needs no version: a worker that
ignores it sends no ``LogLine``, and the run's logs still come with its outcome. Neither
does ``Outcome.ran_on`` in ``Finished`` (which worker and child ran the job): a host that
does not know it ignores it, and an older worker's outcome reads as ``None``.

::

    producer ──JobSpec (Celery, JSON)──▶ worker
    host ◀── up: Started | ToolCall | FetchCall | LogLine | Finished | Failed ── worker
    host ── down: ToolReply | FetchReply | Cancel ──▶ worker (and the worker's own Close)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

import msgspec

from .._faults import FaultData
from .._host.nesting import RESULT_TOO_DEEP, fresh_stack
from .._outbound import OutboundRequest, OutboundResponse
from .._outcome import LogEntry, Outcome
from .._request import Provider

__all__ = [
    "ENQUEUED_HEADER",
    "HANDLES_SCHEMA_VERSION",
    "INPUTS_SCHEMA_VERSION",
    "JOB_SCHEMA_VERSION",
    "MAX_FLEET_REQUEST_BYTES",
    "MAX_QUEUE_MESSAGE_BYTES",
    "MESSAGE_HEADROOM_BYTES",
    "SCHEMA_VERSIONS",
    "Cancel",
    "Close",
    "DownMessage",
    "Failed",
    "FetchCall",
    "FetchReply",
    "Finished",
    "JobKind",
    "JobSpec",
    "LogLine",
    "Network",
    "Started",
    "ToolCall",
    "ToolReply",
    "UpMessage",
    "decode_down",
    "decode_up",
    "encode",
    "job_from_celery",
    "job_to_celery",
]

ENQUEUED_HEADER: Final = "codemode_enqueued_ms"
"""A job message's header: the Redis time (ms since the epoch, as the host estimated it) it
was enqueued at; a worker's metrics measure queue waits from it (``worker/metrics.py``)."""

MAX_QUEUE_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest task message a worker takes from its queue (a larger one is dropped unread,
to the queue's dead-letter list); a host refuses to send a job whose message would be
larger, and a FleetExecutor whose request ceiling admits requests its queue cannot carry."""
MESSAGE_HEADROOM_BYTES: Final = 64 * 1024
"""Room a job's message needs beyond its request: Celery's headers, kombu's envelope, the
job's own fields."""
MAX_FLEET_REQUEST_BYTES: Final = MAX_QUEUE_MESSAGE_BYTES * 3 // 4 - MESSAGE_HEADROOM_BYTES
"""The largest ``ceilings.max_request_bytes`` a fleet's queue carries: the message's body is
base64-encoded (four bytes for three) in kombu's envelope, with the headroom above."""

JOB_SCHEMA_VERSION: Final = 1
HANDLES_SCHEMA_VERSION: Final = 2
"""The version of a job that retains a handle, invokes one or releases one."""
INPUTS_SCHEMA_VERSION: Final = 3
"""The version of a job that passes inputs to its entry function (it may also retain)."""
SCHEMA_VERSIONS: Final = (JOB_SCHEMA_VERSION, HANDLES_SCHEMA_VERSION, INPUTS_SCHEMA_VERSION)
"""The versions this worker reads."""

JobKind = Literal["run", "invoke", "release"]
"""``run``: an execute job (``retain`` keeps its isolate if it returns a request handler);
``invoke``: pass ``request_json`` to the retained handler ``handle``; ``release``: dispose it.
Invocations and releases go to the queue of the worker that holds the handle."""

Network = Literal["default", "none", "host"]
"""``default``: the worker's own network (outbound left out); ``none``: no network
(outbound=None); ``host``: every request goes back to the host's policy."""


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One execute job, with every default already applied by the producer."""

    v: int = JOB_SCHEMA_VERSION
    job_id: str
    host_id: str
    key_prefix: str
    code: str
    providers: tuple[Provider, ...] = ()
    network: Network = "default"
    modules: dict[str, Any] | None = None
    timeout_ms: int
    count_host_waits: bool
    start_by_ms: int
    """Redis time (ms since the epoch) after which the job must not start."""
    kind: JobKind = "run"
    retain: bool = False
    """``run`` only: keep the isolate if the program returns a request handler."""
    handle: str | None = None
    """``invoke`` / ``release``: the fleet handle, as the retaining job's outcome carried it."""
    request_json: str | None = None
    """``invoke``: the request as ``codemode._handles.plain_request`` encodes it."""
    quiet_start: bool = False
    """The host learns that the job started from its first call, its outcome, or a Started
    the worker sends STARTED_DELAY_S into the run (``worker/relay.py``), not from a Started
    sent with the claim: a short job wakes its host once, for its outcome. Hosts that
    predate the field leave it False, and get Started with the claim."""
    inputs_json: str | None = None
    """The entry function's one argument, as JSON text (None: it gets none). v3."""
    stream_logs: bool = False
    """Send each log entry up as a ``LogLine`` as the program writes it (``on_log``)."""


# ---- up: worker -> host ------------------------------------------------------------------


class Started(msgspec.Struct, frozen=True, tag="started"):
    """A worker claimed the job; from here on the program may have run."""

    worker: str


class ToolCall(msgspec.Struct, frozen=True, tag="call"):
    """A tool call from the program: three strings, and an id the reply must carry."""

    call_id: int
    provider: str
    tool: str
    args_json: str


class FetchCall(msgspec.Struct, frozen=True, tag="fetch"):
    """One hop of an outbound request, for the host's policy to decide."""

    call_id: int
    request: OutboundRequest


class LogLine(msgspec.Struct, frozen=True, tag="log"):
    """One log entry as the program wrote it (the job asked: ``stream_logs``); the same
    entry is in the outcome's logs too."""

    entry: LogEntry


class Finished(msgspec.Struct, frozen=True, tag="finished"):
    """The run ended; the outcome is what the in-process executor would have returned."""

    outcome: Outcome


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    """The executor could not serve the job: a fault, as data."""

    fault: FaultData


UpMessage = Started | ToolCall | FetchCall | LogLine | Finished | Failed


# ---- down: host -> worker ----------------------------------------------------------------


class ToolReply(msgspec.Struct, frozen=True, tag="reply"):
    """The envelope answering one ToolCall."""

    call_id: int
    envelope: str


class FetchReply(msgspec.Struct, frozen=True, tag="fetched"):
    """The policy's answer to one FetchCall: a response, or the text the fetch rejects with."""

    call_id: int
    response: OutboundResponse | None = None
    error: str | None = None


class Cancel(msgspec.Struct, frozen=True, tag="cancel"):
    """The caller stopped waiting: stop the run."""

    reason: str = "The caller stopped waiting for this run."


class Close(msgspec.Struct, frozen=True, tag="close"):
    """The worker's own last message on down: its reader stops on a whole reply, so the
    pooled connection it blocked on stays reusable (cancelling a BLPOP would drop it)."""


DownMessage = ToolReply | FetchReply | Cancel | Close

_encoder: Final = msgspec.msgpack.Encoder()
_up_decoder: Final = msgspec.msgpack.Decoder(UpMessage)
_down_decoder: Final = msgspec.msgpack.Decoder(DownMessage)


def encode(message: UpMessage | DownMessage) -> bytes:
    """The message as msgpack. An outcome whose result nests too deeply to write even from a
    fresh stack (``codemode/_host/nesting.py``) goes as the run's error instead: the host must
    hear how the run ended, not wait for a lease that lapses."""
    try:
        return _encoder.encode(message)
    except RecursionError:
        try:
            return fresh_stack(_encoder.encode, message)
        except RecursionError:
            if not isinstance(message, Finished):
                raise
            outcome = msgspec.structs.replace(message.outcome, result=None, error=RESULT_TOO_DEEP)
            return _encoder.encode(Finished(outcome))


def decode_up(data: bytes) -> UpMessage:
    """Raises ``msgspec.DecodeError`` on anything that is not an up message (or nests too
    deeply to read even from a fresh stack)."""
    return _decode(_up_decoder.decode, data)


def decode_down(data: bytes) -> DownMessage:
    """Raises ``msgspec.DecodeError`` on anything that is not a down message (or nests too
    deeply to read even from a fresh stack)."""
    return _decode(_down_decoder.decode, data)


_M = TypeVar("_M")


def _decode(decode: Callable[[bytes], _M], data: bytes) -> _M:
    """``decode(data)``, read again from a fresh stack when it nests past this one's room;
    a message too deep even for that raises ``msgspec.DecodeError``."""
    try:
        return decode(data)
    except RecursionError:
        pass
    try:
        return fresh_stack(decode, data)
    except RecursionError:
        raise msgspec.DecodeError("the message nests lists or maps too deeply to read") from None


def job_to_celery(spec: JobSpec) -> dict[str, Any]:
    """The job as plain JSON-compatible data for Celery's json serializer."""
    data: dict[str, Any] = msgspec.to_builtins(spec)
    return data


def job_from_celery(data: object) -> JobSpec:
    """Rebuild a job from a Celery message; raises ``msgspec.ValidationError`` if malformed."""
    return msgspec.convert(data, JobSpec)
