"""Real MCP server processes for the tests: the SDK-written upstream server over stdio or
HTTP, and ``codemode mcp`` itself; each HTTP one in its own process group, stopped (group
and all) by its context manager."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict, Unpack

from codemode.fleet.testing import free_port
from codemode.mcp import HttpServer, StdioServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
UPSTREAM = str(HERE / "upstream_server.py")
TOKEN = "s3cret"


class Timeouts(TypedDict, total=False):
    """The bounds a test may set on an upstream server (StdioServer's own defaults otherwise)."""

    call_timeout_s: float
    connect_timeout_s: float


def stdio_upstream(name: str = "up", **options: Unpack[Timeouts]) -> StdioServer:
    return StdioServer(name, sys.executable, [UPSTREAM, "stdio"], **options)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_dead(pid: int, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listened on port {port} within {timeout_s} s")


@contextlib.contextmanager
def http_process(command: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """Start an HTTP server process in a group of its own; stop the whole group after."""
    proc = subprocess.Popen(command, cwd=ROOT, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        _wait_port(port, proc)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        assert wait_dead(proc.pid), f"server {proc.pid} left behind"


@contextlib.contextmanager
def http_upstream(name: str = "web", token: str | None = TOKEN) -> Iterator[HttpServer]:
    """The upstream server over HTTP, asking for ``TOKEN``; the client sends ``token``."""
    port = free_port()
    command = [sys.executable, UPSTREAM, "http", str(port), "--token", TOKEN]
    with http_process(command, port):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        yield HttpServer(name, f"http://127.0.0.1:{port}/mcp", headers=headers)
