"""Tool calls on the host's side: envelopes, and the one place where whatever a dispatch
does (returns, raises, returns garbage) becomes an envelope.

A tool call leaves the isolate as three strings (provider, tool, JSON argument list) and
comes back as one: ``{"result": ...}`` or ``{"error": "..."}``. The declaration given to the
model is not a boundary: a program may call any name, and that call arrives here under
the name it used. Refusing it is the dispatch's job; :class:`codemode.tools.ToolRegistry`
does it.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

__all__ = [
    "Dispatcher",
    "Forwarder",
    "Router",
    "RunThreads",
    "dispatch_threads",
    "too_deep_text",
    "tool_error",
    "tool_result",
]

log = logging.getLogger("codemode.tools")

SYNC_CALLS_PER_RUN = 16
"""A run's sync dispatch calls that run in the host at once; more wait their turn."""


def dispatch_threads(runs: int) -> concurrent.futures.ThreadPoolExecutor:
    """An executor's threads for sync dispatch calls: enough for ``runs`` runs at their
    per-run bound, so that no run's call waits for a thread another run holds."""
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=SYNC_CALLS_PER_RUN * max(1, runs), thread_name_prefix="codemode-dispatch"
    )


class RunThreads(concurrent.futures.Executor):
    """One run's share of its executor's dispatch threads: at most ``SYNC_CALLS_PER_RUN``
    of its calls run at once, the rest wait in a line of their own.

    On the event loop's shared default pool (6 threads here), one program's 300 concurrent
    calls to a slow tool held another run's single call for 9.7 s. The line holds work
    items, not tasks waiting on a semaphore: a run that ends with 100,000 calls in line
    drops them at once (a semaphore's cancelled waiters took 10 s to leave its list)."""

    def __init__(self, threads: concurrent.futures.Executor) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._running = 0
        self._line: collections.deque[tuple[concurrent.futures.Future[Any], Callable[[], Any]]] = (
            collections.deque()
        )

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        work = functools.partial(fn, *args, **kwargs)
        with self._lock:
            if self._running >= SYNC_CALLS_PER_RUN:
                self._line.append((future, work))
                return future
            self._running += 1
        self._start(future, work)
        return future

    def _start(self, future: concurrent.futures.Future[Any], work: Callable[[], Any]) -> None:
        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(work())
            except BaseException as exc:
                future.set_exception(exc)

        try:
            self._threads.submit(run).add_done_callback(self._next)
        except RuntimeError as exc:  # the executor was shut down: the call cannot run
            future.set_exception(exc)
            self._next(None)

    def _next(self, _: object) -> None:
        """A call finished: start the first one still wanted, else free its place."""
        with self._lock:
            while self._line:
                future, work = self._line.popleft()
                if not future.cancelled():
                    break
            else:
                self._running -= 1
                return
        self._start(future, work)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Drop the calls still in line (the run is over); running ones finish."""
        with self._lock:
            line, self._line = self._line, collections.deque()
        for future, _ in line:
            future.cancel()


_encoder = msgspec.json.Encoder()


def tool_result(value: Any) -> str:
    """The envelope for a successful call: ``{"result": value}`` (value must be JSON data)."""
    return _encoder.encode({"result": value}).decode()


def tool_error(message: str) -> str:
    """The envelope that rejects the program's call with ``message`` (for the model to read)."""
    return _encoder.encode({"error": str(message)}).decode()


class _Envelope(msgspec.Struct, forbid_unknown_fields=False):
    # The result is checked to be JSON, not built into Python objects: the envelope goes on
    # as the dispatch wrote it (for a 1 KB result, 2 us against 8 us a reply, here).
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: str | msgspec.UnsetType = msgspec.UNSET


_envelope_decoder = msgspec.json.Decoder(_Envelope)


def _checked(provider: str, tool: str, reply: object, max_bytes: int) -> str:
    if not isinstance(reply, str):
        return tool_error(
            f"The tool {provider}.{tool} failed in the host: its dispatch returned "
            f'{type(reply).__name__}, not an envelope string like {{"result": ...}}.'
        )
    # (A character is at most 4 bytes of UTF-8: a short reply needs no encoding to measure.)
    if len(reply) * 4 > max_bytes and (
        len(reply) > max_bytes or len(reply.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        return tool_error(
            f"The tool {provider}.{tool} answered with more than the {max_bytes}-byte ceiling "
            "on one message. Ask it for less per call (page, filter or summarize)."
        )
    try:
        envelope = _envelope_decoder.decode(reply)
    except msgspec.DecodeError:
        return tool_error(
            f"The tool {provider}.{tool} failed in the host: its dispatch returned text that is "
            'not a JSON envelope ({"result": ...} or {"error": "..."}).'
        )
    except RecursionError:  # (msgspec's reading recurses: past Python's limit it raises this)
        return tool_error(too_deep_text(provider, tool))
    if envelope.error is msgspec.UNSET and envelope.result is msgspec.UNSET:
        return tool_error(
            f'The tool {provider}.{tool} failed in the host: its envelope has neither "result" nor "error".'
        )
    return reply


def too_deep_text(provider: str, tool: str) -> str:
    """What a call reads when its reply nests lists and objects deeper than the host can
    read (about a thousand levels: each level is a frame of the decoder's recursion)."""
    return (
        f"The tool {provider}.{tool} answered with data nested too deeply to read. "
        "Ask it for flatter data (fewer levels of lists and objects)."
    )


def _failed(provider: str, tool: str, exc: Exception) -> str:
    return tool_error(
        f"The tool {provider}.{tool} failed in the host ({type(exc).__name__}). "
        "Try another approach, or report that this tool is failing."
    )


class CallMessage(Protocol):
    """What a tool call arrives as: the provider, the tool and the JSON argument list."""

    @property
    def provider(self) -> str: ...

    @property
    def tool(self) -> str: ...

    @property
    def args_json(self) -> str: ...


class _CallArgs(msgspec.Struct, frozen=True):
    provider: str
    tool: str
    args_json: str


class Forwarder(abc.ABC):
    """A dispatch that hands each call on and answers it later through a callback: no
    coroutine, task or loop turn of its own per call.

    The fleet's worker is one: each call goes up its job's reply channel, and the reply
    is read inside the link that brings it, where the answer is written to the child
    straight away (``codemode/fleet/worker/relay.py``). As a coroutine dispatch, each call
    would cost the worker a coroutine, a stand-in task and a loop turn between the reply and
    its answer; as a forwarder it costs none of them.
    An executor serves a forwarder's calls with :meth:`forward`; awaited as a dispatch, it
    works as any other."""

    @abc.abstractmethod
    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None:
        """Send ``call`` on; ``answer`` gets its envelope exactly once, later or at once, on
        this loop's thread. Must not raise: a failure is an error envelope."""

    async def __call__(self, provider: str, tool: str, args_json: str) -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def answer(envelope: str) -> None:
            if not future.done():
                future.set_result(envelope)

        self.forward(_CallArgs(provider, tool, args_json), answer)
        return await future


DispatchFunction = Callable[[str, str, str], Any]
"""``(provider, tool, args_json) -> envelope``, sync or async."""


class Router(abc.ABC):
    """A dispatch that names, per call, the function that serves it and whether that
    function is async: :class:`Dispatcher` awaits an async one on the loop and runs a sync
    one on the run's dispatch threads, as it does a whole dispatch of either kind, so that
    a registry mixing sync and async tools never runs a sync one on the loop. Awaited as a
    dispatch, it works as any other."""

    @abc.abstractmethod
    def route(self, provider: str, tool: str) -> tuple[DispatchFunction, bool]:
        """The function serving this one call, and whether it is a coroutine function.
        Runs on the loop for every call: a lookup, nothing that waits."""

    async def __call__(self, provider: str, tool: str, args_json: str) -> str:
        serve, is_async = self.route(provider, tool)
        if is_async:
            reply: str = await serve(provider, tool, args_json)
        else:
            reply = await asyncio.to_thread(serve, provider, tool, args_json)
        return reply


def _is_async(dispatch: Callable[[str, str, str], Any]) -> bool:
    return inspect.iscoroutinefunction(dispatch) or inspect.iscoroutinefunction(
        getattr(dispatch, "__call__", None)  # noqa: B004
    )


class Dispatcher:
    """One run's way to the host's dispatch, which always comes back with a valid envelope.

    Async dispatch runs on the loop; sync dispatch runs in a thread (the run's share,
    ``threads``), so calls a program makes with ``Promise.all`` run concurrently in the
    host. Which of the two a dispatch is, is looked at once, when the run starts (for a
    :class:`Router`, once per call, from what its route answers): every
    tool call of a run takes this path, and the host's part of a call was what the
    benchmark's (b) paid above the reference design (docs/performance.md, "Tool calls")."""

    __slots__ = ("_async", "_dispatch", "_max_bytes", "_router", "_threads", "calls", "forwards")

    def __init__(
        self, dispatch: Callable[[str, str, str], Any] | None, max_bytes: int, threads: RunThreads
    ) -> None:
        self._dispatch = dispatch
        self._async = dispatch is not None and _is_async(dispatch)
        self._router = dispatch if isinstance(dispatch, Router) else None
        self._max_bytes = max_bytes
        self._threads = threads
        self.forwards = isinstance(dispatch, Forwarder)
        """Whether calls may be served with :meth:`forward` (the dispatch is a Forwarder)."""
        self.calls = 0
        """The tool calls this run made so far, each counted as it arrives, however it
        ends (``Outcome.tool_calls``)."""

    def forward(self, call: CallMessage, answer: Callable[[str], object]) -> None:
        """Hand ``call`` to the forwarding dispatch; ``answer`` gets the envelope it comes
        back with, checked as :meth:`call` checks one."""
        self.calls += 1
        forwarder = self._dispatch
        assert isinstance(forwarder, Forwarder)
        provider, tool, max_bytes = call.provider, call.tool, self._max_bytes
        try:
            forwarder.forward(call, lambda reply: answer(_checked(provider, tool, reply, max_bytes)))
        except Exception as exc:  # (a bug: a forwarder answers its failures)
            log.warning("dispatch for %s.%s raised", provider, tool, exc_info=True)
            answer(_failed(provider, tool, exc))

    async def call(self, call: CallMessage) -> str:
        """The envelope for one call (a child's Call, a fleet job's ToolCall): the
        dispatch's, checked, or one that says what failed. (The message itself, not its
        three fields: the worker serves a call with this method and the message, no
        Python frame between them.)"""
        self.calls += 1
        provider, tool, args_json = call.provider, call.tool, call.args_json
        dispatch = self._dispatch
        if dispatch is None:
            return tool_error(f"No tools are served to this run, so {provider}.{tool} cannot be called.")
        is_async = self._async
        try:
            if self._router is not None:
                dispatch, is_async = self._router.route(provider, tool)
            if is_async:
                reply = await dispatch(provider, tool, args_json)
            else:
                in_thread = functools.partial(
                    contextvars.copy_context().run, dispatch, provider, tool, args_json
                )
                reply = await asyncio.get_running_loop().run_in_executor(self._threads, in_thread)
                if inspect.isawaitable(reply):
                    reply = await reply
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("dispatch for %s.%s raised", provider, tool, exc_info=True)
            return _failed(provider, tool, exc)
        return _checked(provider, tool, reply, self._max_bytes)
