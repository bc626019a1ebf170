"""The TLS set-up docs/fleet.md gives ("Securing a fleet") works: a Redis that speaks only TLS,
and a worker and a host that reach it with a ``rediss://`` URL naming the CA, serve a job.
The certificates are made here with openssl."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from fleet_helpers import require_redis_server

from codemode.fleet import FleetExecutor
from codemode.fleet.settings import BrokerSettings
from codemode.fleet.testing import WorkerProcess, free_port, redis_server_path

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(where: Path) -> None:
    """A CA, and a server certificate for 127.0.0.1 it signed."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=codemode-test-ca", cwd=where)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "redis.key", "-out", "redis.csr",
             "-subj", "/CN=127.0.0.1", cwd=where)  # fmt: skip
    (where / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "redis.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "redis.crt", "-days", "2", "-extfile", "ext.cnf", cwd=where)  # fmt: skip


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    require_redis_server()
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    make_certificates(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [str(redis_server_path()), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", "redis.crt", "--tls-key-file", "redis.key", "--tls-ca-cert-file", "ca.crt",
         "--tls-auth-clients", "no", "--save", "", "--appendonly", "no"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={tmp_path / 'ca.crt'}"
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.exceptions.ConnectionError:
                if server.poll() is not None:
                    pytest.skip("this redis-server does not speak TLS")
                assert time.monotonic() < deadline, "the TLS redis-server did not answer"
                time.sleep(0.1)
        yield port, tmp_path
    finally:
        server.terminate()
        server.wait(10)


async def test_a_fleet_runs_over_tls(
    tls_redis: tuple[int, Path], start_worker: Callable[..., WorkerProcess]
) -> None:
    port, where = tls_redis
    url = f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={where / 'ca.crt'}"
    settings = replace(BrokerSettings(), redis_url=url)
    start_worker(settings)
    async with FleetExecutor(settings=settings, queue_timeout=60_000) as host:
        assert (await host.execute("async () => 6 * 7")).result == 42
    with pytest.raises(redis.exceptions.ConnectionError):  # plain TCP is not served
        redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=5, socket_timeout=5).ping()
