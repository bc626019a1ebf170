"""The worker's side of one job: claim it, hold its lease, run it, send its outcome.

::

    claim (claim.lua, SET NX) ─ taken ──▶ refuse: a started job never runs twice
       │                      ─ past start-by ──▶ JOB_EXPIRED to the host, not started
       │                      ─ host key gone ──▶ not started
       ▼ started
    lease renewal every lease_ttl/3, on the LeaseKeeper's thread (leases.py): lease, key
       expiries, admission slot; host key gone ─▶ the relay fails the pending calls
    IsolateExecutor.execute(dispatch=relay, outbound=relay.relay_fetch | None | UNSET)
      (kind=invoke: IsolateExecutor.invoke_handle; kind=release: release_handle)
      the program's calls and the host's replies: relay.py
    ─▶ Finished(outcome) | Failed(fault) on up, admission slot freed, lease deleted
       (finish.lua)

The program's deadline is the isolate executor's own (Celery time limits need prefork).

Retained handles (``handles.py``): a ``retain`` job runs with a :class:`HandleRoute` as its
dispatch and policy, and a handle in its outcome is kept in the runner's table under a
fleet handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from ..._config import UNSET
from ..._dispatch import Forwarder
from ..._faults import (
    CANCELLED_TEXT,
    Cancelled,
    Disposed,
    ExecutorError,
    HandleExpired,
    HandleLost,
    InvalidRequest,
    JobExpired,
    WorkerCrashed,
)
from ..._outcome import Outcome
from ..errors import BROKER_ERRORS
from ..redis.keys import JobKeys, admission_key, host_key
from ..wire import SCHEMA_VERSIONS, Close, Failed, Finished, JobSpec, Started, encode
from .handles import HandleRoute, WorkerHandle
from .reader import DownReader
from .relay import READER_DELAY_S, STARTED_DELAY_S, CallRelay

if TYPE_CHECKING:
    from .runner import JobRunner

__all__ = ["Job", "JobEnd"]

log = logging.getLogger("codemode.fleet.worker")

FINAL_PUSH_ATTEMPTS: Final = 3
READER_DRAIN_S: Final = 0.5


class JobEnd(NamedTuple):
    """How a job ended on this worker: its one-line summary, and the code of the fault its
    host got (``None``: an outcome, or nothing ran here)."""

    summary: str
    fault: str | None = None


class Job:
    """One job on this worker, from its claim to its outcome."""

    def __init__(self, runner: JobRunner, spec: JobSpec) -> None:
        self.runner = runner
        self.settings = runner.settings
        self.spec = spec
        self.keys = JobKeys.of(spec.key_prefix, spec.job_id)
        self.host_key = host_key(spec.key_prefix, spec.host_id)
        self.admission = admission_key(spec.key_prefix)
        self.run_task: asyncio.Task[Finished | Failed] | None = None
        self.cancelled = False
        """Revoked by an operator or cancelled by its host: it ends with CANCELLED."""
        self.relay = CallRelay(
            runner.links,
            self.keys,
            job_id=spec.job_id,
            worker_id=runner.worker_id,
            key_ttl_ms=self.settings.key_ttl_ms,
            announced=not spec.quiet_start,
            on_cancel=self._cancel,
        )

    # ---- the job's life ---------------------------------------------------------------

    async def run(self) -> JobEnd:
        """Claim the job, run it, send its outcome; returns how it ended."""
        started_at = time.monotonic()
        if self.spec.v not in SCHEMA_VERSIONS:
            known = " and ".join(f"v{v}" for v in SCHEMA_VERSIONS)
            fault = InvalidRequest(f"This worker reads job schema {known}, not v{self.spec.v}; nothing ran.")
            await self._final(Failed(fault.to_data()))
            return JobEnd(f"refused job {self.spec.job_id}: schema v{self.spec.v}", fault.code)
        refused = await self._claim()
        if refused is not None:
            return JobEnd(refused)
        final = await self._run_claimed()
        await self._final(final, reader=self.relay.reader)
        elapsed = (time.monotonic() - started_at) * 1000
        kind = "finished" if isinstance(final, Finished) else f"failed {final.fault.code}"
        what = "job" if self.spec.kind == "run" else f"{self.spec.kind} job"
        summary = f"{kind} {what} {self.spec.job_id} in {elapsed:.1f} ms"
        return JobEnd(summary, None if isinstance(final, Finished) else final.fault.code)

    async def _claim(self) -> str | None:
        """Claim the job in Redis; ``None`` when this worker runs it, else the summary of why
        it does not."""
        expired = JobExpired(
            "No worker started this job before its start-by time; nothing "
            "ran. Retry when the fleet has capacity, or add workers."
        )
        try:
            claim = await self.runner.scripts.claim(
                [self.keys.claim, self.keys.up, self.keys.lease, self.host_key, self.admission],
                worker=self.runner.worker_id,
                start_by_ms=self.spec.start_by_ms,
                lease_ttl_ms=self.settings.lease_ttl_ms,
                key_ttl_ms=self.settings.key_ttl_ms,
                job_id=self.spec.job_id,
                started=encode(Started(self.runner.worker_id)),
                expired=encode(Failed(expired.to_data())),
                announce=self.relay.announced,
            )
        except BROKER_ERRORS as exc:
            log.warning("job %s: Redis unreachable at claim (%s); not started", self.spec.job_id, exc)
            self.runner.tally.claimed("unreachable")
            return f"not started {self.spec.job_id}: Redis unreachable"
        self.runner.tally.claimed(claim.state)
        if claim.state == "taken":
            log.warning(
                "job %s was already claimed by %s; refusing to run it again "
                "(a started program never runs twice)",
                self.spec.job_id,
                claim.holder,
            )
            return f"refused job {self.spec.job_id}: already claimed by {claim.holder}"
        if claim.state != "started":
            log.info("job %s not started: %s", self.spec.job_id, claim.state)
            return f"not started {self.spec.job_id}: {claim.state}"
        return None

    async def _run_claimed(self) -> Finished | Failed:
        """Run the claimed job under its lease, to the message that ends it."""
        loop = asyncio.get_running_loop()
        relay = self.relay
        self.runner.leases.hold(
            self.spec.job_id,
            [self.keys.lease, self.host_key, self.keys.up, self.keys.down, self.keys.claim, self.admission],
            lambda: relay.host_lapsed(self.spec.host_id),
        )
        start_reader = loop.call_later(READER_DELAY_S, relay.start_reader)
        announce = None if relay.announced else loop.call_later(STARTED_DELAY_S, relay.announce)
        self.run_task = asyncio.ensure_future(self._execute())
        # The consumer thread waits for the job's start (gate.py): a callback scheduled
        # now runs after the run's first step, which takes the program as far as it goes
        # without waiting (with an idle child, into the child).
        loop.call_soon(self.runner.gate.open, self.spec.job_id)
        if self.cancelled:  # revoked between its claim and now
            self.run_task.cancel()
        try:
            return await self.run_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # The worker itself is stopping: end everything, tell the host if we can.
                self.run_task.cancel()
                start_reader.cancel()
                if relay.reader is not None:
                    relay.reader.stop(close=True)
                stopping = Disposed(
                    "The worker shut down during this run; the program had started.", started=True
                )
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._final(Failed(stopping.to_data())))
                raise
            return Failed(Cancelled(CANCELLED_TEXT, started=True).to_data())
        finally:
            self.runner.leases.release(self.spec.job_id)
            start_reader.cancel()
            if announce is not None:
                announce.cancel()
            relay.end()

    def _cancel(self) -> None:
        """The host cancelled the run: it ends as a revoke does."""
        self.revoke()

    def revoke(self) -> None:
        """End the run with CANCELLED (``celery control revoke --terminate``, or the host's
        Cancel): the program's task is cancelled, and with it its isolate's run."""
        self.cancelled = True
        if self.run_task is not None:
            self.run_task.cancel()

    async def _execute(self) -> Finished | Failed:
        try:
            if self.spec.kind == "invoke":
                outcome = await self._invoke()
            elif self.spec.kind == "release":
                outcome = await self._release()
            else:
                outcome = await self._run_program()
            await self.relay.logs_sent()
            if outcome.ran_on is not None:  # the host learns which worker's child it was
                outcome = msgspec.structs.replace(outcome, ran_on=f"{self.runner.worker_id}/{outcome.ran_on}")
        except ExecutorError as exc:
            return Failed(exc.to_data())
        except Exception as exc:  # a bug here must still reach the caller as a fault
            log.exception("job %s: the worker failed while running it", self.spec.job_id)
            return Failed(
                WorkerCrashed(
                    f"Worker {self.runner.worker_id} failed while running the program; the "
                    "program had started.",
                    started=True,
                    causes=(f"{type(exc).__name__}: {exc}",),
                ).to_data()
            )
        return Finished(outcome)

    async def _run_program(self) -> Outcome:
        # A run that may retain its isolate gets a route as its dispatch and policy: the
        # isolate keeps them for its whole life, and each invocation points them at itself.
        route = HandleRoute(self.relay) if self.spec.retain else None
        calls: Forwarder = self.relay if route is None else route
        relay_fetch = self.relay.relay_fetch if route is None else route.relay_fetch
        outbound: Any
        if self.spec.network == "none":
            outbound = None
        elif self.spec.network == "host":
            outbound = relay_fetch
        else:
            outbound = UNSET
        try:
            outcome = await self.runner.executor.execute(
                self.spec.code,
                providers=[{"name": p.name, "tools": list(p.tools)} for p in self.spec.providers],
                dispatch=calls,
                outbound=outbound,
                modules=self.spec.modules,
                timeout=self.spec.timeout_ms,
                count_host_waits=self.spec.count_host_waits,
                retain_handles=self.spec.retain,
                inputs=self._inputs(),
                on_log=self.relay.send_log if self.spec.stream_logs else None,
            )
        finally:
            if route is not None:
                route.job = None
        if outcome.handle is None or route is None:
            return outcome
        entry = self.runner.handles.add(
            outcome.handle, host_id=self.spec.host_id, prefix=self.spec.key_prefix, route=route
        )
        log.info("job %s: retained handle %s for host %s", self.spec.job_id, entry.id, self.spec.host_id)
        try:
            await self.runner.announce(self.spec.key_prefix)
        except BROKER_ERRORS as exc:
            log.warning("job %s: could not write the liveness key (%s)", self.spec.job_id, exc)
        return msgspec.structs.replace(outcome, handle=entry.id)

    def _inputs(self) -> Any:
        """The job's inputs, back from their JSON (UNSET: it has none)."""
        if self.spec.inputs_json is None:
            return UNSET
        try:
            return msgspec.json.decode(self.spec.inputs_json)
        except msgspec.DecodeError as exc:
            raise InvalidRequest(f"The job's inputs are not JSON ({exc}); nothing ran.") from None

    def _request(self) -> dict[str, Any]:
        """The invocation's request, back from ``plain_request``'s JSON (body as bytes)."""
        try:
            data = msgspec.json.decode(self.spec.request_json or "")
            if not isinstance(data, dict):
                raise ValueError("not an object")
            body = data.get("body")
            if isinstance(body, str):
                data["body"] = body.encode("latin-1")
        except (msgspec.DecodeError, ValueError) as exc:  # UnicodeEncodeError is one
            raise InvalidRequest(f"The invocation's request is malformed ({exc}); nothing ran.") from None
        return data

    def _held(self) -> WorkerHandle:
        return self.runner.handles.lookup(self.spec.handle, self.spec.host_id)

    async def _invoke(self) -> Outcome:
        request = self._request()
        entry = self._held()
        async with entry.lock:
            entry = self._held()  # released while this invocation waited?
            entry.route.job = self.relay
            try:
                return await self.runner.executor.invoke_handle(
                    entry.local, request, timeout=self.spec.timeout_ms
                )
            except (HandleLost, HandleExpired):
                self.runner.handles.drop(entry)
                raise
            finally:
                entry.route.job = None

    async def _release(self) -> Outcome:
        entry = self._held()
        async with entry.lock:
            entry = self._held()
            self.runner.handles.drop(entry)
            await self.runner.executor.release_handle(entry.local)
        return Outcome()

    async def _final(self, final: Finished | Failed, reader: DownReader | None = None) -> None:
        """Send the outcome, free the slot, drop the lease, and end the reader cleanly (a
        message of its own on down wakes its BLPOP, so its connection stays reusable)."""
        final_msg = encode(final)
        if reader is not None:
            reader.stop()
        close_msg = encode(Close()) if reader is not None and reader.in_flight else None
        for attempt in range(FINAL_PUSH_ATTEMPTS):
            try:
                # One script, not the same six commands as a MULTI/EXEC pipeline: less
                # client work before the host's outcome goes out.
                await self.runner.scripts.finish(
                    [self.keys.up, self.keys.down, self.admission, self.keys.lease],
                    key_ttl_ms=self.settings.key_ttl_ms,
                    job_id=self.spec.job_id,
                    final=final_msg,
                    close=close_msg,
                )
                break
            except BROKER_ERRORS as exc:
                if attempt == FINAL_PUSH_ATTEMPTS - 1:
                    log.warning(
                        "job %s: could not send its outcome (Redis unreachable: %s)", self.spec.job_id, exc
                    )
                    break
                await asyncio.sleep(0.5 * (attempt + 1))
        if reader is not None:
            await reader.drained(READER_DRAIN_S)
            reader.stop(close=True)
