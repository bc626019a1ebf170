"""Approvals: tools a host serves only once it (or a person) says yes to each call.

A registry made with ``ToolRegistry(approve=...)`` serves tools added with
``approval=True`` this way::

    program calls store.refund(...) ──▶ arguments checked ──▶ approve(ToolCall) ──▶ True:
    the tool runs, its value is the call's result; anything else: the call is rejected with
    REFUSED (the tool never runs)

``approve`` is sync or async and may wait as long as a person takes: the call is open
meanwhile, so with ``count_host_waits=False`` the wait does not use the program's time (with
True it does, and a run whose clock ends while it waits ends with the timeout text; the
wait is cancelled). A sync ``approve`` runs on a worker thread, never on the event loop.
``approve`` that raises rejects the call with a sentence naming the tool, and the exception
is logged (logger ``codemode.tools``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ._spec import ToolSpec

__all__ = ["Approve", "ToolCall", "ask", "refused_text"]

log = logging.getLogger("codemode.tools")


@dataclass(frozen=True)
class ToolCall:
    """One call that waits for approval: which tool, and the arguments the program passed
    (JSON data, already checked against the tool's declaration)."""

    provider: str
    tool: str
    arguments: list[Any]
    """The argument list as the program passed it (a tool given ``parameters=`` gets one
    object: ``arguments[0]``)."""
    spec: ToolSpec


Approve = Callable[[ToolCall], "bool | Awaitable[bool]"]
"""``approve(call) -> bool`` (or an awaitable of it): True lets the call run."""


def refused_text(spec: ToolSpec) -> str:
    """What the program reads when the host does not approve a call."""
    return (
        f"The host did not approve this call to {spec}, so the tool did not run. Do not retry "
        "it: finish without it, and say in the result what needed approval."
    )


def failed_text(spec: ToolSpec) -> str:
    """What the program reads when asking for approval failed in the host."""
    return (
        f"The call to {spec} needs the host's approval, and asking for it failed in the host, so "
        "the tool did not run. Finish without it, and say in the result what needed approval."
    )


async def ask(approve: Approve, call: ToolCall) -> str | None:
    """Ask ``approve`` about ``call``: None when it said True, else the text that rejects
    the call."""
    try:
        if inspect.iscoroutinefunction(approve) or inspect.iscoroutinefunction(
            getattr(approve, "__call__", None)  # noqa: B004
        ):
            verdict: object = await approve(call)  # type: ignore[misc]
        else:
            verdict = await asyncio.to_thread(approve, call)
            if inspect.isawaitable(verdict):
                verdict = await verdict
    except asyncio.CancelledError:
        raise
    except Exception:
        log.warning("approve raised for %s", call.spec, exc_info=True)
        return failed_text(call.spec)
    return None if verdict is True else refused_text(call.spec)
