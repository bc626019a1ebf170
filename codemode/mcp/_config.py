"""Where an upstream MCP server is and how long codemode waits for it: one small frozen
object per server, checked when it is made (a wrong setting is a ``ValueError`` naming the
field, never a failure at the first tool call)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from ._names import check_provider_name

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "HttpServer",
    "ServerConfig",
    "StdioServer",
]

DEFAULT_CALL_TIMEOUT_S: Final = 60.0
"""How long one tool call may take before the program's call is rejected."""
DEFAULT_CONNECT_TIMEOUT_S: Final = 30.0
"""How long starting (or reaching) a server and listing its tools may take."""


def _seconds(owner: str, name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{owner}: {name} must be a positive number of seconds, got {value!r}.")


def _strings(owner: str, name: str, value: object) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{owner}: {name} must map strings to strings, got {value!r}.")


@dataclass(frozen=True)
class StdioServer:
    """An MCP server that codemode starts as a child process and talks to over its
    stdin and stdout. ``name`` is the global the program reaches its tools through."""

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    """Added to a small default environment (the SDK's: ``HOME``, ``PATH``, ...), not to
    the host's: a server sees no credential the host did not give it."""
    cwd: str | None = None
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    def __post_init__(self) -> None:
        check_provider_name(self.name)
        owner = f"MCP server {self.name!r}"
        if not isinstance(self.command, str) or not self.command:
            raise ValueError(f"{owner}: command must be the program to start, got {self.command!r}.")
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise ValueError(f"{owner}: args must be a list of strings, got {self.args!r}.")
        object.__setattr__(self, "args", tuple(self.args))
        if self.env is not None:
            _strings(owner, "env", self.env)
        _seconds(owner, "call_timeout_s", self.call_timeout_s)
        _seconds(owner, "connect_timeout_s", self.connect_timeout_s)

    @property
    def where(self) -> str:
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class HttpServer:
    """An MCP server reached over streamable HTTP at ``url``; ``headers`` go with every
    request (``{"Authorization": "Bearer ..."}``) and stay in the host."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    def __post_init__(self) -> None:
        check_provider_name(self.name)
        owner = f"MCP server {self.name!r}"
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{owner}: url must be an http:// or https:// URL, got {self.url!r}.")
        _strings(owner, "headers", self.headers)
        _seconds(owner, "call_timeout_s", self.call_timeout_s)
        _seconds(owner, "connect_timeout_s", self.connect_timeout_s)

    @property
    def where(self) -> str:
        # Never the headers: they may carry a credential.
        return self.url


ServerConfig = StdioServer | HttpServer
