"""codemode: run model-written JavaScript in a fresh V8 isolate per execution.

Each run gets an empty isolate inside a supervised child process, bounded by a host-clock
deadline and a memory limit; the program's tool calls come back to the host as data.

The public names are re-exported here from private modules; ``__all__`` is the contract
(a test keeps it sorted and complete): the executors and their protocols, the outcome types,
tools, config, faults and ``normalize_code``. The defaults and bounds are named constants in
:mod:`codemode.limits`; the declared sentences a program's model reads are in
:mod:`codemode.texts`. The executor, the dispatch helpers, the entry-form
normalizer and the outbound policy are imported on first use (PEP 562): they pull in httpx
and tree-sitter, which every child process would otherwise load at start-up (it imports
this package first) without using them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._config import UNSET, Ceilings, PoolConfig
from ._contract import Executor, SyncExecutor
from ._faults import (
    BrokerUnreachable,
    Cancelled,
    Disposed,
    ExecutorError,
    FaultData,
    HandleExpired,
    HandleLost,
    HostGone,
    InvalidRequest,
    JobExpired,
    QueueFull,
    WorkerCrashed,
    fault_from_data,
)
from ._outcome import LogEntry, Outcome, ProgramError
from ._request import Provider

if TYPE_CHECKING:
    from ._bulk import Job
    from ._dispatch import tool_error, tool_result
    from ._executor import IsolateExecutor
    from ._outbound import OutboundRequest, OutboundResponse, allow_hosts
    from ._retry import RetryPolicy
    from ._source.normalize import normalize_code
    from ._sync_executor import SyncIsolateExecutor
    from .tools import ToolRegistry

_LAZY = {
    "Job": "._bulk",
    "RetryPolicy": "._retry",
    "IsolateExecutor": "._executor",
    "SyncIsolateExecutor": "._sync_executor",
    "ToolRegistry": ".tools",
    "tool_error": "._dispatch",
    "tool_result": "._dispatch",
    "normalize_code": "._source.normalize",
    "OutboundRequest": "._outbound",
    "OutboundResponse": "._outbound",
    "allow_hosts": "._outbound",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "UNSET",
    "BrokerUnreachable",
    "Cancelled",
    "Ceilings",
    "Disposed",
    "Executor",
    "ExecutorError",
    "FaultData",
    "HandleExpired",
    "HandleLost",
    "HostGone",
    "InvalidRequest",
    "IsolateExecutor",
    "Job",
    "JobExpired",
    "LogEntry",
    "OutboundRequest",
    "OutboundResponse",
    "Outcome",
    "PoolConfig",
    "ProgramError",
    "Provider",
    "QueueFull",
    "RetryPolicy",
    "SyncExecutor",
    "SyncIsolateExecutor",
    "ToolRegistry",
    "WorkerCrashed",
    "allow_hosts",
    "fault_from_data",
    "normalize_code",
    "tool_error",
    "tool_result",
]
