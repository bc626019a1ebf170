"""A real fleet on this machine, for tests and benchmarks: a private ``redis-server`` on a
free port and codemode worker processes, each started the documented way
(``codemode worker``, as ``python -m codemode worker``), each in its own process group so that stopping it leaves nothing
behind (not its isolate children either).

::

    with RedisServer() as redis, WorkerProcess(BrokerSettings(redis_url=redis.url)) as w:
        ...

:class:`SharedFleet` is one Redis and a few workers, reference-counted so that several test
directories can share one per test session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Final

from .settings import BrokerSettings, WorkerSettings

__all__ = [
    "FAST_FAULTS",
    "READY_MARK",
    "REDIS_ARGS",
    "WORKER_COMMAND",
    "RedisServer",
    "SharedFleet",
    "WorkerProcess",
    "free_port",
    "missing_redis_reason",
    "redis_server_path",
]

READY_MARK: Final = "codemode-worker ready"
"""What a worker prints once its isolate pool is warm and it consumes its queue."""
WORKER_COMMAND: Final = ("python", "-m", "codemode", "worker")
"""The one command that starts a worker, from an installed codemode alone (docker/compose.yaml
runs the same)."""
REDIS_ARGS: Final = ("--save", "", "--appendonly", "no")
"""A throwaway Redis: nothing is persisted, a restart starts empty."""
FAST_FAULTS: Final[Mapping[str, object]] = {"lease_ttl_ms": 3_000, "host_ttl_ms": 3_000, "key_ttl_ms": 20_000}
"""Fleet settings for tests: a dead worker or host is noticed within a few seconds."""


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def missing_redis_reason() -> str | None:
    """Why fleet tests cannot run here (``None`` when they can). Under ``CI=true`` a test
    suite should fail on this, not skip."""
    if redis_server_path() is None:
        return "redis-server is not on PATH; install it (apt-get install redis-server) to run the fleet tests"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the process that started it dies, so a
    test run that is itself killed leaves no Redis or worker behind (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A group of zombies waiting to be reaped is dead for our purposes.
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            stat = (pid_dir / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _stop_group(proc: subprocess.Popen[bytes], *, grace_s: float) -> None:
    """SIGTERM the process group, wait, then SIGKILL whatever is left of it."""
    pgid = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    deadline = time.monotonic() + 10
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def _own_log_dir(owner: object, prefix: str) -> Path:
    """A temporary directory for ``owner``'s logs, removed once ``owner`` is gone (collected,
    or at interpreter exit): tests read the logs while they hold the helper, even after
    stopping it, and a test session leaves no directories behind. A ``log_dir`` a caller
    passes is the caller's, and stays."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    weakref.finalize(owner, shutil.rmtree, path, ignore_errors=True)
    return path


class RedisServer:
    """A private redis-server on a free port; ``restart()`` keeps the port (and loses data)."""

    def __init__(self, port: int | None = None, *, log_dir: Path | None = None) -> None:
        path = redis_server_path()
        if path is None:
            raise FileNotFoundError("redis-server is not on PATH")
        self.binary = path
        self.port = port or free_port()
        self.log_dir = log_dir or _own_log_dir(self, "codemode-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 20.0) -> RedisServer:
        log = (self.log_dir / f"redis-{self.port}.log").open("ab")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", *REDIS_ARGS],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock,
            ):
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            _stop_group(self.proc, grace_s=5)
            self.proc = None

    def kill(self) -> None:
        """SIGKILL: Redis vanishes mid-conversation, as in a crash."""
        if self.proc is not None:
            _stop_group(self.proc, grace_s=0)
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class WorkerProcess:
    """One ``codemode worker`` process with the given settings, in its own process group
    (``cwd``: the directory it starts in; ``env``: variables on top of the settings')."""

    def __init__(
        self,
        settings: BrokerSettings,
        worker: WorkerSettings | None = None,
        *,
        env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        name: str = "worker",
        cwd: Path | None = None,
    ) -> None:
        self.settings = settings
        self.worker = worker or WorkerSettings()
        self.extra_env = dict(env or {})
        self.cwd = cwd
        self.log_dir = log_dir or _own_log_dir(self, "codemode-worker-")
        self.name = name
        self.log_path = self.log_dir / f"{name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            *WORKER_COMMAND[1:],
            "--loglevel",
            "INFO",
            "--hostname",
            f"{self.name}-{time.monotonic_ns()}@%h",
        ]

    def start(self, *, wait: bool = True, timeout_s: float = 60.0) -> WorkerProcess:
        env = {
            **os.environ,
            **self.settings.env(),
            **self.worker.env(),
            **self.extra_env,
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("CELERY_RDB_HOST", None)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()
        if wait:
            self.wait_ready(timeout_s)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, text: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.log_text():
                return True
            time.sleep(0.1)
        return False

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if READY_MARK in self.log_text():
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = "\n".join(self.log_text().splitlines()[-30:])
        self.stop()
        raise RuntimeError(f"worker {self.name} did not become ready:\n{tail}")

    def children(self) -> list[int]:
        """Pids in this worker's process group other than the worker (its isolate children)."""
        if self.proc is None:
            return []
        pids = []
        for pid_dir in Path("/proc").iterdir():
            if not pid_dir.name.isdigit() or int(pid_dir.name) == self.proc.pid:
                continue
            try:
                stat = (pid_dir / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                pids.append(int(pid_dir.name))
        return pids

    def alive(self) -> bool:
        return self.proc is not None and _group_alive(self.proc.pid)

    def kill(self) -> None:
        """SIGKILL the worker process alone (its isolate children die with it)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, grace_s: float = 15.0) -> None:
        """Warm shutdown, then SIGKILL of the whole group: nothing is left behind."""
        if self.proc is not None:
            _stop_group(self.proc, grace_s=grace_s)

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class SharedFleet:
    """One Redis and ``workers`` workers, started on first ``acquire`` and stopped when the
    last holder releases it (and at interpreter exit, whatever happened)."""

    _instance: SharedFleet | None = None
    _refs = 0

    def __init__(self, settings: BrokerSettings, redis: RedisServer, workers: list[WorkerProcess]) -> None:
        self.settings = settings
        self.redis = redis
        self.workers = workers

    @classmethod
    def acquire(
        cls, *, workers: int = 2, concurrency: int = 2, settings: Mapping[str, object] | None = None
    ) -> SharedFleet:
        """Start the fleet (first caller) or share it; ``settings`` default to
        :data:`FAST_FAULTS` (short leases, so tests notice deaths in seconds)."""
        settings = FAST_FAULTS if settings is None else settings
        if cls._instance is None:
            log_dir = _own_log_dir(cls, "codemode-fleet-")
            redis = RedisServer(log_dir=log_dir).start()
            try:
                broker = BrokerSettings(redis_url=redis.url, **dict(settings))  # type: ignore[arg-type]
                procs = [
                    WorkerProcess(
                        broker, WorkerSettings(concurrency=concurrency), log_dir=log_dir, name=f"shared{i}"
                    ).start(wait=False)
                    for i in range(workers)
                ]
                cls._instance = cls(broker, redis, procs)
                for proc in procs:
                    proc.wait_ready()
            except BaseException:
                if cls._instance is not None:
                    cls._instance.stop()
                    cls._instance = None
                redis.stop()
                raise
            import atexit

            atexit.register(cls._atexit)
        cls._refs += 1
        return cls._instance

    @classmethod
    def release(cls) -> None:
        cls._refs -= 1
        if cls._refs <= 0 and cls._instance is not None:
            cls._instance.stop()
            cls._instance = None
            cls._refs = 0

    @classmethod
    def _atexit(cls) -> None:
        if cls._instance is not None:
            cls._instance.stop()
            cls._instance = None

    def stop(self) -> None:
        for proc in self.workers:
            proc.stop()
        self.redis.stop()
