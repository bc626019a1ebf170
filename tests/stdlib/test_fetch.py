"""Headers, Request, Response and fetch (data: URLs, the host bridge, abort)."""

from __future__ import annotations

from collections.abc import Callable

from codemode.conformance import DISABLED_FETCH_TEXT
from tests.stdlib.conftest import Guest

# A fake host.fetch: echoes the plain request back as JSON, with a couple of headers.
ECHO_FETCH = r"""
(req) => new Promise((resolve) => setTimeout(() => resolve({
  status: req.url.endsWith('/missing') ? 404 : 200,
  statusText: req.url.endsWith('/missing') ? 'Not Found' : 'OK',
  headers: [['content-type', 'application/json'], ['set-cookie', 'a=1'], ['set-cookie', 'b=2']],
  body: new TextEncoder().encode(JSON.stringify({ method: req.method, url: req.url, headers: req.headers,
    body: req.body === null ? null : new TextDecoder().decode(req.body), redirect: req.redirect })),
  url: req.url, redirected: req.url.includes('redir'),
}), 5))
"""


def test_headers(guest: Guest) -> None:
    out = guest.run(
        """
        const h = new Headers({ 'Content-Type': 'text/plain', 'X-B': ' padded ' });
        h.append('x-a', '1'); h.append('X-A', '2');
        h.append('Set-Cookie', 'a=1'); h.append('set-cookie', 'b=2');
        const errs = [];
        for (const f of [() => h.append('bad name', 'v'), () => h.set('x', 'a\\nb'), () => new Headers([['a']])]) {
          try { f(); errs.push('no'); } catch (e) { errs.push(e.constructor.name); }
        }
        h.delete('content-type');
        return [[...h], h.get('x-a'), h.get('X-B'), h.getSetCookie(), h.has('CONTENT-TYPE'), errs,
                [...new Headers([['k', 'v']]).keys()]];
        """
    )
    assert out == [
        [["set-cookie", "a=1"], ["set-cookie", "b=2"], ["x-a", "1, 2"], ["x-b", "padded"]],
        "1, 2",
        "padded",
        ["a=1", "b=2"],
        False,
        ["TypeError"] * 3,
        ["k"],
    ]


def test_response_bodies(guest: Guest) -> None:
    out = guest.run(
        """
        const r = new Response('{"a":1}', { status: 201, statusText: 'Made', headers: { 'X': 'y' } });
        const c = r.clone();
        const j = await r.json();
        let used;
        try { await r.text(); } catch (e) { used = e.constructor.name; }
        const t = await c.text();
        const rj = Response.json({ b: [1] }, { status: 202 });
        const red = Response.redirect('https://example.com/x', 301);
        const err = Response.error();
        const errs = [];
        for (const f of [() => new Response('x', { status: 204 }), () => new Response(null, { status: 99 }),
                         () => Response.redirect('https://e/', 200), () => err.headers.set('a', 'b')]) {
          try { f(); errs.push('no'); } catch (e) { errs.push(e.constructor.name); }
        }
        const blob = await new Response(new Uint8Array([1, 2]), { headers: { 'content-type': 'a/b' } }).blob();
        const stream = new Response(new ReadableStream({ start(ctl) { ctl.enqueue(new TextEncoder().encode('str')); ctl.close(); } }));
        return { j, used, t, status: [r.status, r.statusText, r.ok, r.headers.get('content-type'), r.bodyUsed],
                 rj: [rj.status, rj.headers.get('content-type'), await rj.json()],
                 red: [red.status, red.headers.get('location')], err: [err.type, err.status], errs,
                 blob: [blob.size, blob.type], stream: await stream.text(), nullBody: new Response().body,
                 bodyIsStream: r.body instanceof ReadableStream };
        """
    )
    assert out == {
        "j": {"a": 1},
        "used": "TypeError",
        "t": '{"a":1}',
        "status": [201, "Made", True, "text/plain;charset=UTF-8", True],
        "rj": [202, "application/json", {"b": [1]}],
        "red": [301, "https://example.com/x"],
        "err": ["error", 0],
        "errs": ["TypeError", "RangeError", "RangeError", "TypeError"],
        "blob": [2, "a/b"],
        "stream": "str",
        "nullBody": None,
        "bodyIsStream": True,
    }


def test_request(guest: Guest) -> None:
    out = guest.run(
        """
        const r = new Request('https://example.com/a', { method: 'post', body: 'hi', headers: { 'X-A': '1' } });
        const r2 = new Request(r, { headers: { 'X-B': '2' } });
        const errs = [];
        for (const f of [() => new Request('/relative'), () => new Request('https://e/', { method: 'GET', body: 'x' }),
                         () => new Request('https://u:p@e/'), () => new Request('https://e/', { method: 'TRACE' })]) {
          try { f(); errs.push('no'); } catch (e) { errs.push(e.constructor.name); }
        }
        return [r.method, r.url, r.headers.get('content-type'), r2.headers.get('x-a'), r2.headers.get('x-b'),
                await r2.text(), r.bodyUsed, r.redirect, r.signal instanceof AbortSignal, errs,
                new Request('https://e/', { method: 'patch' }).method];
        """
    )
    assert out == [
        "POST",
        "https://example.com/a",
        "text/plain;charset=UTF-8",
        None,
        "2",
        "hi",
        True,
        "follow",
        True,
        ["TypeError"] * 4,
        "patch",
    ]


def test_fetch_disabled_network_message(guest: Guest) -> None:
    out = guest.run(
        "return await fetch('https://example.com/').then(() => 'ok', (e) => [e.constructor.name, e.message]);"
    )
    assert out == ["TypeError", DISABLED_FETCH_TEXT]


def test_fetch_data_url_stays_in_isolate(guest: Guest) -> None:
    out = guest.run(
        """
        const r = await fetch('data:text/plain;base64,aGk=');
        const bad = await fetch('data:;base64,%%%').then(() => 'ok', (e) => e.constructor.name);
        const other = await fetch('ftp://x/').then(() => 'ok', (e) => e.constructor.name);
        return [r.status, r.headers.get('content-type'), await r.text(), bad, other];
        """
    )
    assert out == [200, "text/plain", "hi", "TypeError", "TypeError"]


def test_fetch_through_host(guest_with_fetch: Callable[[str], Guest]) -> None:
    guest = guest_with_fetch(ECHO_FETCH)
    out = guest.run(
        """
        const r = await fetch('https://api.example/redir', { method: 'PUT', body: JSON.stringify({ x: 1 }),
                                                             headers: { 'Content-Type': 'application/json' } });
        const echoed = await r.json();
        const missing = await fetch(new Request('https://api.example/missing'));
        let immutable;
        try { r.headers.set('a', 'b'); } catch (e) { immutable = e.constructor.name; }
        return { echoed, status: r.status, ok: r.ok, url: r.url, redirected: r.redirected, type: r.type,
                 cookies: r.headers.getSetCookie(), missing: [missing.status, missing.statusText, missing.ok],
                 immutable };
        """
    )
    assert out == {
        "echoed": {
            "method": "PUT",
            "url": "https://api.example/redir",
            "headers": [["content-type", "application/json"]],
            "body": '{"x":1}',
            "redirect": "follow",
        },
        "status": 200,
        "ok": True,
        "url": "https://api.example/redir",
        "redirected": True,
        "type": "basic",
        "cookies": ["a=1", "b=2"],
        "missing": [404, "Not Found", False],
        "immutable": "TypeError",
    }


def test_fetch_abort(guest_with_fetch: Callable[[str], Guest]) -> None:
    guest = guest_with_fetch(ECHO_FETCH)
    out = guest.run(
        """
        const c = new AbortController();
        const p = fetch('https://api.example/slow', { signal: c.signal });
        c.abort();
        const first = await p.then(() => 'ok', (e) => e.name);
        const pre = await fetch('https://api.example/', { signal: AbortSignal.abort('mine') }).catch((e) => e);
        const t = await fetch('https://api.example/', { signal: AbortSignal.timeout(1) }).catch((e) => e.name);
        return [first, pre, t];
        """
    )
    assert out == ["AbortError", "mine", "TimeoutError"]
