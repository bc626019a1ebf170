"""The worker's side of one job's reply channel: the program's calls go up, the host's
replies come down, and each pending call gets its answer exactly once.

::

    program's tool call ─ forward() ─┐
    outbound hop ─ relay_fetch() ────┴─▶ ToolCall / FetchCall up (its push riding ahead of
                                         the reader's next BLPOP when it can, reader.py)
    reader (from the first relayed call, or READER_DELAY_S into the run): BLPOP down
       ─▶ ToolReply / FetchReply to the pending call by id (stale or garbage dropped),
          Cancel stops the run, Close stops the reader
    host gone (the lease keeper says so) ─▶ pending calls reject with host_gone_text(),
                                            later ones at once
    reply channel lost ─▶ pending calls reject with BROKER_LOST_TEXT, later ones at once

A :class:`CallRelay` is the job's dispatch (a ``Forwarder``: each call's answer goes to the
child inside the read that brings it) and its outbound policy, unless a
``HandleRoute`` stands between it and a retained isolate (``handles.py``).

A quiet start (``JobSpec.quiet_start``) sends the job's Started with its first call, or on
its own STARTED_DELAY_S into the run (:meth:`CallRelay.announce_later`).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Callable
from typing import Any, Final

import msgspec
import redis.exceptions

from ... import _texts
from ..._dispatch import CallMessage, Forwarder, tool_error
from ..._outbound import OutboundRequest, OutboundResponse
from ..._outcome import LogEntry
from ..errors import BROKER_ERRORS, BROKER_LOST_TEXT, RelayRefused
from ..redis.channel import packed_push, push
from ..redis.keys import JobKeys
from ..redis.link import Links
from ..wire import (
    Cancel,
    Close,
    DownMessage,
    FetchCall,
    FetchReply,
    LogLine,
    Started,
    ToolCall,
    ToolReply,
    decode_down,
    encode,
)
from .reader import DownReader

__all__ = ["READER_DELAY_S", "STARTED_DELAY_S", "CallRelay"]

log = logging.getLogger("codemode.fleet.worker")

READER_DELAY_S: Final = 0.05
"""When the reply channel's reader starts if no call started it: most jobs end sooner and
never read the channel (a BLPOP, the close that ends it and its wake-up saved), and a
Cancel pushed meanwhile waits in the list until the reader takes it."""
STARTED_DELAY_S: Final = 0.05
"""A quiet start (``JobSpec.quiet_start``): how long a job runs before its Started goes up
on its own. A job that calls a tool sooner sends Started with its first call; one that
finishes sooner sends none (its outcome says it ran). Until then the host, if it looks,
finds the claim (``host/session.py``)."""

Answer = ToolReply | FetchReply | str
"""What a pending call resolves to: the host's reply, or a text the call rejects with."""
Settle = Callable[[Answer], object]
"""What a pending call is waiting with: called once, with its answer."""


class CallRelay(Forwarder):
    """One job's calls to its host, over ``keys``' up and down channels on ``links``.

    ``worker_id`` goes in the Started it sends; ``on_cancel`` is called when the host
    cancels the run; ``announced``: whether the host has (or is about to have) Started."""

    def __init__(
        self,
        links: Links,
        keys: JobKeys,
        *,
        job_id: str,
        worker_id: str,
        key_ttl_ms: int,
        announced: bool,
        on_cancel: Callable[[], object],
    ) -> None:
        self.links = links
        self.keys = keys
        self.job_id = job_id
        self.worker_id = worker_id
        self.key_ttl_ms = key_ttl_ms
        self.on_cancel = on_cancel
        self.pending: dict[int, Settle] = {}
        """The calls sent up and not answered yet, by call id."""
        self.ids = itertools.count(1)
        self.host_gone = False
        self.broker_lost = False
        self.ended = False
        self.reader: DownReader | None = None
        self.dropped = 0
        """Messages on down that were not replies (dropped, and logged)."""
        self.announced = announced
        self._pushes: set[asyncio.Task[None]] = set()
        """Pushes of calls that could not ride ahead of the reader's BLPOP (referenced till done)."""
        self._announcing: asyncio.Task[None] | None = None
        self._log_lines: list[bytes] = []
        """LogLines (``send_log``) waiting for the push in flight to end."""
        self._logging: asyncio.Task[None] | None = None

    # ---- the job's end and its host ---------------------------------------------------

    def end(self) -> None:
        """The run has ended: every call still pending fails, none is sent any more."""
        self.ended = True
        self.fail_pending("This run has ended.")

    def host_lapsed(self, host_id: str) -> None:
        """The lease keeper found this job's host key gone (its slot is freed already)."""
        if self.ended or self.host_gone:
            return
        log.warning(
            "job %s: host %s stopped its heartbeat (its process died, stalled, or lost Redis); "
            "failing its pending calls",
            self.job_id,
            host_id,
        )
        self.host_gone = True
        self.fail_pending(_texts.host_gone_text())

    def fail_pending(self, text: str) -> None:
        pending, self.pending = self.pending, {}
        for settle in pending.values():
            settle(text)

    # ---- live logs ----------------------------------------------------------------------

    def send_log(self, entry: LogEntry) -> None:
        """``on_log`` of a job that streams its logs: the entry goes up as a LogLine, in
        order (one push at a time; entries that come meanwhile go together in the next).
        Best effort: a push that fails is logged, and the entries are in the outcome."""
        if self.host_gone or self.broker_lost:
            return
        if not self.announced:  # a quiet start: Started goes up first
            self.announced = True
            self._log_lines.append(encode(Started(self.worker_id)))
        self._log_lines.append(encode(LogLine(entry)))
        if self._logging is None or self._logging.done():
            self._logging = asyncio.ensure_future(self._push_logs())

    async def _push_logs(self) -> None:
        while self._log_lines and not self.broker_lost:
            lines, self._log_lines = self._log_lines, []
            try:
                await push(self.links, self.keys.up, *lines, ttl_ms=self.key_ttl_ms)
            except Exception as exc:  # (never the run's failure: its outcome has the logs)
                log.warning("job %s: could not send log lines to its host (%s)", self.job_id, exc)
                return

    async def logs_sent(self) -> None:
        """Wait for the LogLines sent so far to be pushed: they go up before the outcome."""
        if self._logging is not None:
            await asyncio.shield(self._logging)

    # ---- Started ------------------------------------------------------------------------

    def announce(self) -> None:
        """A quiet start that ran STARTED_DELAY_S without a call: send its Started now."""
        if self.announced or self.ended:
            return
        self.announced = True
        self._announcing = asyncio.ensure_future(self._send_started())  # referenced till done

    async def _send_started(self) -> None:
        try:
            await push(self.links, self.keys.up, encode(Started(self.worker_id)), ttl_ms=self.key_ttl_ms)
        except BROKER_ERRORS as exc:  # the host's lease check tells it the job runs
            log.warning("job %s: could not send Started (%s)", self.job_id, exc)

    # ---- the down channel -------------------------------------------------------------

    def start_reader(self) -> None:
        """The run has gone READER_DELAY_S without a call: read down alone."""
        if not self.ended:
            self._reader().start()

    def _reader(self) -> DownReader:
        if self.reader is None:
            self.reader = DownReader(
                self.links,
                self.keys.down,
                park_s=READER_DELAY_S,
                on_message=self._on_down,
                on_lost=self._on_down_lost,
            )
        return self.reader

    def _on_down(self, raw: bytes | None) -> bool:
        """A message on down (``None``: the reader's BLPOP timed out), inside the reader's
        link (``reader.py``); returns whether the reader parks (no call is pending)."""
        if raw is None:
            return False
        try:
            message: DownMessage = decode_down(raw)
        except msgspec.DecodeError as exc:
            self.dropped += 1
            log.warning(
                "job %s: dropped a message on its reply channel that is not a reply (%d bytes: %s)",
                self.job_id,
                len(raw),
                exc,
            )
            return False
        match message:
            case Close():
                if self.reader is not None:
                    self.reader.stop()
            case Cancel(reason=reason):
                log.info("job %s: cancelled by its host (%s)", self.job_id, reason)
                self.on_cancel()
            case ToolReply(call_id=call_id) | FetchReply(call_id=call_id):
                # (a tool call's answer goes to the child from here)
                if not self._settle(call_id, message):
                    log.info("job %s: dropped a stale reply to call %d", self.job_id, call_id)
                    return False
                return not self.pending
        return False

    def _on_down_lost(self, exc: BaseException) -> None:
        if self.ended:
            return
        log.warning("job %s: reply channel lost (%s)", self.job_id, exc)
        self.broker_lost = True
        self.fail_pending(BROKER_LOST_TEXT)

    # ---- calls up -----------------------------------------------------------------------

    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None:
        """The job's dispatch: send a tool call up; ``answer`` gets its envelope inside the
        read that brings the host's reply."""
        provider, tool = call.provider, call.tool

        def settle(reply: Answer) -> None:
            if isinstance(reply, ToolReply):
                answer(reply.envelope)
            elif isinstance(reply, str):
                answer(tool_error(reply))
            else:
                answer(
                    tool_error(
                        f"The host answered the call to {provider}.{tool} with a reply of the wrong kind."
                    )
                )

        self._send(lambda call_id: ToolCall(call_id, provider, tool, call.args_json), settle)

    async def relay_fetch(self, request: OutboundRequest) -> OutboundResponse:
        """The worker executor's outbound policy: each hop is decided by the host's policy."""
        answer = await self._ask(lambda call_id: FetchCall(call_id, request))
        if isinstance(answer, str):
            raise RelayRefused(answer)
        if isinstance(answer, FetchReply):
            if answer.response is not None:
                return answer.response
            raise RelayRefused(answer.error or f"The request to {request.url} was refused.")
        raise RelayRefused("The host answered this request with a reply of the wrong kind.")

    async def _ask(self, message_for: Any) -> Answer:
        """Send one call up and wait for its answer (or a text the call rejects with)."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()

        def settle(answer: Answer) -> None:
            if not future.done():
                future.set_result(answer)

        call_id = self._send(message_for, settle)
        try:
            return await future
        finally:
            self.pending.pop(call_id, None)

    def _send(self, message_for: Any, settle: Settle) -> int:
        """Send one call up, its push riding ahead of the reader's next BLPOP when it can;
        ``settle`` gets its answer once (at once, if the host or Redis is known gone).
        Returns the call's id."""
        call_id = next(self.ids)
        if self.host_gone:
            settle(_texts.host_gone_text())
            return call_id
        if self.broker_lost:
            settle(BROKER_LOST_TEXT)
            return call_id
        self.pending[call_id] = settle
        messages = [encode(message_for(call_id))]
        if not self.announced:  # a quiet start's first call: Started goes up just before it
            self.announced = True
            messages.insert(0, encode(Started(self.worker_id)))
        if not self._ride(call_id, messages):
            task = asyncio.ensure_future(self._push_alone(call_id, messages))
            self._pushes.add(task)
            task.add_done_callback(self._pushes.discard)
        return call_id

    async def _push_alone(self, call_id: int, messages: list[bytes]) -> None:
        """A call's push on a link of its own (the reader is reading already)."""
        try:
            await push(self.links, self.keys.up, *messages, ttl_ms=self.key_ttl_ms)
        except BROKER_ERRORS as exc:
            log.warning(
                "job %s: could not send a call to its host (%s: %s)", self.job_id, type(exc).__name__, exc
            )
            self.broker_lost = True
            self._settle(call_id, BROKER_LOST_TEXT)
        except redis.exceptions.ResponseError as exc:  # refused: this call fails, not Redis
            self._push_failed(call_id, str(exc))
        except Exception as exc:  # a bug: the call must still be answered
            log.exception("job %s: a call's push failed", self.job_id)
            self._push_failed(call_id, f"{type(exc).__name__}: {exc}")

    def _ride(self, call_id: int, messages: list[bytes]) -> bool:
        """Send a call's push ahead of the reader's next BLPOP, in one write, when the
        reader has none in flight (not started yet, or parked after a reply); whether it
        did. Otherwise the reader is reading (or starts to) before the call is pushed on
        its own: the reply must find it waiting."""
        if self.ended:
            return False
        return self._reader().ride(
            packed_push(self.keys.up, messages, self.key_ttl_ms),
            functools.partial(self._push_failed, call_id),
        )

    def _push_failed(self, call_id: int, error: str) -> None:
        self._settle(call_id, f"The worker could not send this call to its host ({error}).")

    def _settle(self, call_id: int, answer: Answer) -> bool:
        """Give a pending call its answer (it leaves the pending calls); whether it was
        pending."""
        settle = self.pending.pop(call_id, None)
        if settle is None:
            return False
        settle(answer)
        return True
