"""Request and Response bodies: reading that a program's Object.prototype.then cannot steer,
and the disturbed, locked and used states the Fetch Standard defines."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.stdlib.conftest import Guest

# Object.prototype.then replaced by a function that answers once with a forged read result
# (then removes itself). A body read that resolved a promise with a { value, done } record
# would take the forgery.
FORGED_THEN = """
const forge = (result) => {
  Object.prototype.then = function (onFulfilled) {
    delete Object.prototype.then;
    onFulfilled(result);
  };
};
const te = new TextEncoder();
const helloStream = () => new ReadableStream({ start(c) { c.enqueue(te.encode('hello')); c.close(); } });
"""

FORGERIES = [
    "{ done: false, value: te.encode('bye') }",
    "{ done: false, value: undefined }",
    "{ done: false, value: 8.2 }",
    "{ done: true }",
    "{ done: false, value: helloStream().getReader() }",
]


@pytest.mark.parametrize("forgery", FORGERIES)
def test_stream_body_ignores_a_forged_then(guest: Guest, forgery: str) -> None:
    out = guest.run(
        FORGED_THEN
        + f"""
        const response = new Response(helloStream());
        forge({forgery});
        let text;
        try {{ text = await response.text(); }} finally {{ delete Object.prototype.then; }}
        return text;
        """
    )
    assert out == "hello"


@pytest.mark.parametrize(
    "make",
    [
        "new Response('hello')",
        "new Response(helloStream())",
        "new Request('https://x.test/', { method: 'POST', body: helloStream(), duplex: 'half' })",
        "new Response(helloStream()).clone()",
        "(() => { const r = new Response('hello'); r.body; return r; })()",
    ],
)
def test_every_reader_ignores_a_forged_then(guest: Guest, make: str) -> None:
    # text() resolves with a string (no `then` lookup at all); the bytes on their way there
    # never cross a promise, whatever the body's origin (bytes, a stream, a tee'd clone).
    out = guest.run(
        FORGED_THEN
        + f"""
        const body = {make};
        forge({{ done: false, value: te.encode('bye') }});
        let text;
        try {{ text = await body.text(); }} finally {{ delete Object.prototype.then; }}
        return text;
        """
    )
    assert out == "hello"


def test_request_body_sent_by_fetch_ignores_a_forged_then(guest_with_fetch: Callable[[str], Guest]) -> None:
    guest = guest_with_fetch(
        "(req) => Promise.resolve(Object.assign(Object.create(null), { status: 200, statusText: 'OK',"
        " headers: [], body: req.body, url: req.url }))"
    )
    out = guest.run(
        FORGED_THEN
        + """
        // This trap forges only read results ({ value, done }); any other object (the Response
        // that fetch's promise resolves with, as the standard says) passes through unchanged.
        let forged = 0;
        Object.prototype.then = function trap(onFulfilled) {
          delete Object.prototype.then;
          if (Object.hasOwn(this, 'done')) { forged++; onFulfilled({ done: false, value: te.encode('bye') }); }
          else onFulfilled(this);
          Object.prototype.then = trap;
        };
        let text;
        try {
          const response = await fetch('https://x.test/', { method: 'POST', body: helloStream(), duplex: 'half' });
          text = await response.text();
        } finally { delete Object.prototype.then; }
        return [text, forged];
        """
    )
    assert out == ["hello", 0]


def test_used_body_is_disturbed_locked_and_unusable(guest: Guest) -> None:
    # After a read: bodyUsed, the body stream (even one first asked for after the read) is
    # locked and disturbed, a second read rejects with TypeError, clone() throws TypeError.
    out = guest.run(
        """
        const outcome = async (f) => { try { await f(); return 'ok'; } catch (e) { return e.constructor.name; } };
        const results = [];
        for (const make of [() => new Response('abc'), () => new Response(new Blob(['abc']).stream()),
                            () => new Request('https://x.test/', { method: 'PUT', body: 'abc' })]) {
          const r = make();
          const before = r.bodyUsed;  // .body is not asked for before the read
          const text = await r.text();
          results.push([before, text, r.bodyUsed, r.body.locked, await outcome(() => r.text()),
                        await outcome(() => r.arrayBuffer()), await outcome(() => r.clone())]);
        }
        return results;
        """
    )
    assert out == [[False, "abc", True, True, "TypeError", "TypeError", "TypeError"]] * 3


def test_locked_and_partly_read_streams(guest: Guest) -> None:
    out = guest.run(
        """
        const outcome = async (f) => { try { await f(); return 'ok'; } catch (e) { return e.constructor.name; } };
        // Locked but not read: not used, yet unusable (reads reject, clone throws).
        const locked = new Response('abc');
        const reader = locked.body.getReader();
        const lockedState = [locked.bodyUsed, await outcome(() => locked.text()), await outcome(() => locked.clone())];
        // One read through the reader: disturbed, so used.
        const first = await reader.read();
        reader.releaseLock();
        const readState = [first.done, locked.bodyUsed, await outcome(() => locked.text()), await outcome(() => locked.clone())];
        // Canceled: disturbed too.
        const canceled = new Response('abc');
        await canceled.body.cancel();
        // A disturbed or locked stream cannot become a body.
        const disturbed = new ReadableStream({ pull(c) { c.enqueue(new Uint8Array(1)); } });
        await disturbed.getReader().read();
        const lockedStream = new ReadableStream();
        lockedStream.getReader();
        return [lockedState, readState, canceled.bodyUsed,
                await outcome(() => new Response(disturbed)), await outcome(() => new Response(lockedStream))];
        """
    )
    assert out == [
        [False, "TypeError", "TypeError"],
        [False, True, "TypeError", "TypeError"],
        True,
        "TypeError",
        "TypeError",
    ]


def test_clone_then_read_both_and_pending_reads(guest: Guest) -> None:
    out = guest.run(
        """
        const outcome = async (f) => { try { await f(); return 'ok'; } catch (e) { return e.constructor.name; } };
        const r = new Response(new Blob(['abc']).stream());
        const c = r.clone();
        const both = [await r.text(), await c.text(), r.bodyUsed, c.bodyUsed];
        // A second read started while the first is pending fails at once.
        const slow = new Response(new ReadableStream({ start(ctl) { setTimeout(() => { ctl.enqueue(new Uint8Array([104])); ctl.close(); }, 10); } }));
        const firstRead = slow.text();
        const secondRead = await outcome(() => slow.text());
        // A chunk that is not a Uint8Array fails the read with TypeError.
        const wrong = await outcome(() => new Response(new ReadableStream({ start(ctl) { ctl.enqueue('text'); ctl.close(); } })).text());
        // A body taken over by new Request(input) leaves input used.
        const input = new Request('https://x.test/', { method: 'POST', body: 'abc' });
        const taken = new Request(input);
        return [both, await firstRead, secondRead, wrong, input.bodyUsed, input.body.locked,
                await taken.text(), await outcome(() => new Request(input))];
        """
    )
    assert out == [["abc", "abc", True, True], "h", "TypeError", "TypeError", True, True, "abc", "TypeError"]


def test_body_methods_reject_a_wrong_receiver(guest: Guest) -> None:
    # WebIDL: an operation returning a promise rejects instead of throwing.
    out = guest.run(
        """
        const p = Response.prototype.text.call({});
        return [p instanceof Promise, await p.then(() => 'ok', (e) => e.constructor.name)];
        """
    )
    assert out == [True, "TypeError"]
