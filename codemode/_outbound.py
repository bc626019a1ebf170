"""Outbound requests a program makes with ``fetch``, in the three states of a request.

* ``outbound`` left out: the executor's own network performs the request (httpx),
  redirects followed.
* ``outbound=None``: there is no network; fetch rejects inside the isolate with
  :data:`codemode.texts.NETWORK_DISABLED` and nothing reaches the host.
* ``outbound=policy``: every request reaches ``policy(OutboundRequest)`` as plain data, and
  every redirect hop is presented to it again as a request of its own, so an allow list
  written the obvious way cannot be bypassed by a 302. The policy returns an
  :class:`OutboundResponse` (or raises: the program's fetch rejects with that text).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import msgspec

from . import _texts

__all__ = [
    "NOT_A_RESPONSE",
    "OutboundPolicy",
    "OutboundRequest",
    "OutboundResponse",
    "allow_hosts",
    "checked_response",
    "handle_fetch",
    "network_policy",
]

MAX_REDIRECTS = 20

log = logging.getLogger("codemode.outbound")


class OutboundRequest(msgspec.Struct, frozen=True):
    """A request as plain data: what a policy sees."""

    method: str
    url: str
    headers: list[tuple[str, str]] = []
    body: bytes = b""

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    def with_headers(self, extra: Mapping[str, str]) -> OutboundRequest:
        names = {k.lower() for k in extra}
        kept = [(k, v) for k, v in self.headers if k.lower() not in names]
        return OutboundRequest(self.method, self.url, kept + list(extra.items()), self.body)


class OutboundResponse(msgspec.Struct, frozen=True):
    """A response as plain data: what a policy returns."""

    status: int
    headers: list[tuple[str, str]] = []
    body: bytes = b""
    status_text: str = ""


OutboundPolicy = Callable[[OutboundRequest], "OutboundResponse | Awaitable[OutboundResponse]"]

_client: httpx.AsyncClient | None = None


def _shared_client() -> httpx.AsyncClient:
    global _client
    if _client is None:
        _client = httpx.AsyncClient(follow_redirects=False, trust_env=False)
    return _client


async def network_policy(request: OutboundRequest, *, timeout_s: float = 30.0) -> OutboundResponse:
    """Perform the request on this host's network (one hop; redirects are the caller's)."""
    response = await _shared_client().request(
        request.method,
        request.url,
        headers=request.headers,
        content=request.body or None,
        timeout=timeout_s,
    )
    return OutboundResponse(
        status=response.status_code,
        headers=list(response.headers.multi_items()),
        body=response.content,
        status_text=response.reason_phrase,
    )


def allow_hosts(
    hosts: Iterable[str],
    *,
    inject_headers: Mapping[str, Mapping[str, str]] | None = None,
    transport: Callable[[OutboundRequest], Awaitable[OutboundResponse]] = network_policy,
) -> Callable[[OutboundRequest], Awaitable[OutboundResponse]]:
    """A policy that lets requests reach only ``hosts`` and adds credentials on the way out.

    ``inject_headers`` maps a host to headers added to every request to it: the credential
    lives in the host, the program never sees it. Every redirect hop is checked again.
    """
    allowed = {h.lower() for h in hosts}
    secrets = {k.lower(): dict(v) for k, v in (inject_headers or {}).items()}

    async def policy(request: OutboundRequest) -> OutboundResponse:
        host = request.host.lower()
        if host not in allowed:
            raise PermissionError(
                f"Requests to {host or request.url} are not allowed for this run. "
                f"Allowed hosts: {', '.join(sorted(allowed))}."
            )
        if host in secrets:
            request = request.with_headers(secrets[host])
        return await transport(request)

    return policy


class _PlainRequest(msgspec.Struct):
    method: str
    url: str
    headers: list[tuple[str, str]]
    body: str | None = None
    redirect: str = "follow"


_plain = msgspec.json.Decoder(_PlainRequest)
_encode = msgspec.json.Encoder()


def _error(text: str) -> str:
    return _encode.encode({"error": text}).decode()


NOT_A_RESPONSE = "The host's outbound policy returned something that is not a response."


def checked_response(answer: object) -> OutboundResponse | None:
    """A policy's answer as a response whose fields have their types (a mapping is
    converted), or ``None``. A Struct is not checked when it is made: a ``str`` body, say,
    would fail later, where the fetch could no longer be answered (the fleet's worker
    drops a reply it cannot decode)."""
    if isinstance(answer, Mapping):
        try:
            return msgspec.convert(answer, OutboundResponse)
        except msgspec.ValidationError:
            return None
    if not isinstance(answer, OutboundResponse):
        return None
    if not (
        type(answer.status) is int
        and isinstance(answer.body, bytes)
        and isinstance(answer.status_text, str)
        and isinstance(answer.headers, list)
        and all(
            isinstance(h, (tuple, list)) and len(h) == 2 and isinstance(h[0], str) and isinstance(h[1], str)
            for h in answer.headers
        )
    ):
        return None
    return answer


async def handle_fetch(
    request_json: str,
    outbound: Any,
    *,
    deadline: float,
    max_bytes: int,
) -> str:
    """Serve one Fetch from a program; always returns a JSON reply (a response or an error).
    Never raises: an exception here would leave the program's fetch waiting for the run's
    timeout."""
    try:
        return await _fetch(request_json, outbound, deadline=deadline, max_bytes=max_bytes)
    except Exception as exc:  # a policy's odd answer, or a bug: the fetch still settles
        log.warning("an outbound request could not be served", exc_info=True)
        return _error(f"The host could not serve this request ({type(exc).__name__}).")


async def _fetch(request_json: str, outbound: Any, *, deadline: float, max_bytes: int) -> str:
    from ._config import UNSET

    if outbound is None:
        return _error(_texts.NETWORK_DISABLED)
    try:
        plain = _plain.decode(request_json)
    except (msgspec.DecodeError, RecursionError):  # (deep unknown fields: msgspec recurses)
        return _error("The request could not be read.")
    body = plain.body.encode("latin-1") if plain.body else b""
    request = OutboundRequest(plain.method.upper(), plain.url, [tuple(h) for h in plain.headers], body)  # type: ignore[misc]
    redirected = False
    for _hop in range(MAX_REDIRECTS + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _error("The request did not finish before the run's deadline.")
        try:
            if outbound is UNSET:
                answer: object = await network_policy(request, timeout_s=remaining)
            else:
                reply = outbound(request)
                answer = await reply if inspect.isawaitable(reply) else reply
        except httpx.HTTPError as exc:
            return _error(f"The request to {request.url} failed: {type(exc).__name__}.")
        except Exception as exc:
            return _error(str(exc) or f"The request to {request.url} was refused.")
        response = checked_response(answer)
        if response is None:
            return _error(NOT_A_RESPONSE)
        location = next((v for k, v in response.headers if k.lower() == "location"), None)
        if plain.redirect == "follow" and response.status in (301, 302, 303, 307, 308) and location:
            method, body = request.method, request.body
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = ("GET" if method != "HEAD" else "HEAD"), b""
            headers = request.headers
            if not body:
                headers = [(k, v) for k, v in headers if k.lower() not in ("content-type", "content-length")]
            new_url = urljoin(request.url, location)
            if urlsplit(new_url).hostname != request.host:
                headers = [(k, v) for k, v in headers if k.lower() not in ("authorization", "cookie")]
            request = OutboundRequest(method, new_url, headers, body)
            redirected = True
            continue
        if plain.redirect == "error" and response.status in (301, 302, 303, 307, 308):
            return _error(f"The request to {request.url} was redirected and redirect is 'error'.")
        if len(response.body) > max_bytes:
            return _error(_texts.message_ceiling_text("response body", max_bytes))
        return _encode.encode(
            {
                "status": response.status,
                "statusText": response.status_text,
                "headers": [[k, v] for k, v in response.headers],
                "body": response.body.decode("latin-1"),
                "url": request.url,
                "redirected": redirected,
            }
        ).decode()
    return _error(f"The request to {plain.url} was redirected more than {MAX_REDIRECTS} times.")
