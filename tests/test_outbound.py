"""fetch in the three outbound states, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codemode import InvalidRequest, OutboundRequest, OutboundResponse, SyncIsolateExecutor, allow_hosts
from codemode.texts import NETWORK_DISABLED, memory_text, message_ceiling_text, timeout_text


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/hello":
            self._reply(200, b"hello", {"content-type": "text/plain", "x-server": "test"})
        elif self.path == "/redirect":
            self._reply(302, b"", {"location": "/hello"})
        elif self.path == "/elsewhere":
            address = self.server.server_address
            assert isinstance(address, tuple)
            port = address[1]
            self._reply(302, b"", {"location": f"http://localhost:{port}/secret"})
        elif self.path == "/secret":
            self._reply(200, b"secret data")
        elif self.path == "/auth":
            self._reply(200, json.dumps({"auth": self.headers.get("authorization")}).encode())
        elif self.path == "/big":
            self._reply(200, b"x" * (200 * 1024))
        else:
            self._reply(404, b"not found")

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(size)
        self._reply(
            200,
            json.dumps({"got": body.decode(), "type": self.headers.get("content-type")}).encode(),
            {"content-type": "application/json"},
        )


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_absent_uses_the_executors_own_network_with_redirects(
    executor: SyncIsolateExecutor, server: str
) -> None:
    outcome = executor.execute(
        f"""async () => {{
            const r = await fetch('{server}/redirect');
            const p = await fetch('{server}/post', {{ method: 'POST', body: JSON.stringify({{ a: 1 }}),
                                                      headers: {{ 'content-type': 'application/json' }} }});
            return [r.status, await r.text(), r.redirected, r.headers.get('x-server'), await p.json()];
        }}"""
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [200, "hello", True, "test", {"got": '{"a":1}', "type": "application/json"}]


def test_none_means_no_network_with_the_declared_text(executor: SyncIsolateExecutor, server: str) -> None:
    outcome = executor.execute(
        f"async () => {{ try {{ await fetch('{server}/hello') }} catch (e) {{ return [e.name, e.message] }} }}",
        outbound=None,
    )
    assert outcome.result == ["TypeError", NETWORK_DISABLED]
    uncaught = executor.execute(f"async () => fetch('{server}/hello')", outbound=None)
    assert uncaught.error == NETWORK_DISABLED


def test_a_policy_sees_every_request_and_every_redirect_hop(
    executor: SyncIsolateExecutor, server: str
) -> None:
    seen: list[tuple[str, str]] = []

    def policy(request: OutboundRequest) -> OutboundResponse:
        seen.append((request.method, request.url))
        if request.url.endswith("/start"):
            return OutboundResponse(302, [("location", "https://evil.example/steal")])
        if request.host == "evil.example":
            raise PermissionError("evil.example is not on the allow list")
        return OutboundResponse(200, [("content-type", "text/plain")], b"from policy")

    outcome = executor.execute(
        """async () => {
            const ok = await (await fetch('https://api.example/data', { method: 'PUT', body: 'x' })).text();
            try { await fetch('https://api.example/start') } catch (e) { return [ok, e.message] }
        }""",
        outbound=policy,
    )
    assert outcome.result == ["from policy", "evil.example is not on the allow list"]
    assert seen == [
        ("PUT", "https://api.example/data"),
        ("GET", "https://api.example/start"),
        ("GET", "https://evil.example/steal"),  # the redirect hop was presented, not followed blindly
    ]


def test_allow_hosts_refuses_others_and_injects_credentials(
    executor: SyncIsolateExecutor, server: str
) -> None:
    policy = allow_hosts(["127.0.0.1"], inject_headers={"127.0.0.1": {"authorization": "Bearer host-secret"}})
    outcome = executor.execute(
        f"""async () => {{
            const auth = await (await fetch('{server}/auth')).json();
            let refused;
            try {{ await fetch('{server}/elsewhere') }} catch (e) {{ refused = e.message }}
            return [auth, refused, typeof auth.auth];
        }}""",
        outbound=policy,
    )
    assert outcome.error is None, outcome.error
    auth, refused, _ = outcome.result
    assert auth == {"auth": "Bearer host-secret"}  # the credential never entered the isolate's code
    assert refused.startswith("Requests to localhost are not allowed for this run.")


def test_response_bodies_are_bounded_by_the_message_ceiling(server: str) -> None:
    with SyncIsolateExecutor(pool={"max_workers": 1}, max_message_bytes=64 * 1024) as ex:
        outcome = ex.execute(f"async () => (await fetch('{server}/big')).text()")
        assert outcome.error == message_ceiling_text("response body", 64 * 1024)


def test_abort_signal_cancels_and_data_urls_stay_inside(executor: SyncIsolateExecutor) -> None:
    calls: list[str] = []

    async def slow(request: OutboundRequest) -> OutboundResponse:
        calls.append(request.url)
        import asyncio

        await asyncio.sleep(5)
        return OutboundResponse(200)

    outcome = executor.execute(
        """async () => {
            const data = await (await fetch('data:text/plain;base64,aGk=')).text();
            const controller = new AbortController();
            setTimeout(() => controller.abort(), 50);
            try { await fetch('https://slow.example/', { signal: controller.signal }) }
            catch (e) { return [data, e.name] }
        }""",
        outbound=slow,
        timeout=3000,
    )
    assert outcome.result == ["hi", "AbortError"]
    assert calls == ["https://slow.example/"]  # the data: URL never reached the host


def test_a_request_is_bounded_by_the_runs_deadline(executor: SyncIsolateExecutor) -> None:
    async def hang(request: OutboundRequest) -> OutboundResponse:
        import asyncio

        await asyncio.sleep(60)
        return OutboundResponse(200)

    outcome = executor.execute("async () => fetch('https://hang.example/')", outbound=hang, timeout=300)
    assert outcome.error is not None and "timed out at its 300 ms bound" in outcome.error


def test_a_run_has_at_most_16_requests_in_flight_and_the_rest_wait_their_turn(
    executor: SyncIsolateExecutor,
) -> None:
    import asyncio

    in_flight = peak = 0

    async def slow(request: OutboundRequest) -> OutboundResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.005)
        in_flight -= 1
        return OutboundResponse(200, body=request.url.encode())

    outcome = executor.execute(
        "async () => (await Promise.all(Array.from({ length: 200 }, (_, i) => "
        "fetch(`https://api.example/${i}`).then((r) => r.text())))).length",
        outbound=slow,
        timeout=20_000,
    )
    assert outcome.error is None and outcome.result == 200
    assert peak == 16


def test_thousands_of_requests_at_once_settle_inside_the_bound(executor: SyncIsolateExecutor) -> None:
    """Each request is real work for the host (httpx): 5,000 at once once held its event
    loop so long that a 20 s run settled 16 s late and its child was killed."""
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on: every request is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    outcome = executor.execute(
        "async () => (await Promise.allSettled(Array.from({ length: 3000 }, () => "
        f"fetch('http://127.0.0.1:{port}/')))).filter((r) => r.status === 'rejected').length",
        timeout=20_000,
    )
    assert outcome.error is None and outcome.result == 3000
    assert time.monotonic() - started < 21.5


def test_requests_waiting_their_turn_leave_at_once_when_the_run_ends(executor: SyncIsolateExecutor) -> None:
    """Tens of thousands of requests in line when the clock ends the run: each leaves the
    line in constant time (with asyncio.Semaphore, each scanned the line: 14 s to settle)."""
    import asyncio
    import time

    async def slow(request: OutboundRequest) -> OutboundResponse:
        await asyncio.sleep(30)
        return OutboundResponse(200)

    started = time.monotonic()
    outcome = executor.execute(
        "async () => { for (let i = 0; i < 40000; i++) fetch('https://api.example/').catch(() => 0); "
        "await new Promise(() => {}) }",
        outbound=slow,
        timeout=3_000,
    )
    assert outcome.error in (timeout_text(3_000), memory_text(128)), outcome.error
    assert time.monotonic() - started < 10  # not the 14 s a scanned line took, nor the 30 s answers


OUTBOUND_TEXT = (
    "outbound must be left out (the executor's network), None (no network) or a callable policy, got {!r}."
)


def test_an_outbound_that_is_no_policy_is_refused_everywhere_with_one_text() -> None:
    """On a request, and as an executor's default (in-process and fleet): nothing runs."""
    from codemode.fleet import FleetExecutor

    # Each outbound below is the wrong type on purpose: the refusal is what is tested.
    with pytest.raises(InvalidRequest) as made:
        SyncIsolateExecutor(outbound="https://example.com")  # type: ignore[arg-type]
    assert str(made.value) == OUTBOUND_TEXT.format("https://example.com")
    with pytest.raises(InvalidRequest) as fleet:
        FleetExecutor(redis_url="redis://127.0.0.1:1/0", outbound=3)
    assert str(fleet.value) == OUTBOUND_TEXT.format(3)
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        with pytest.raises(InvalidRequest) as asked:
            ex.execute("() => 1", outbound=True)  # type: ignore[arg-type]
        assert str(asked.value) == OUTBOUND_TEXT.format(True)
        assert not asked.value.started
