"""ReadableStream, WritableStream, TransformStream and queuing strategies."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_readable_pull_and_reader(guest: Guest) -> None:
    out = guest.run(
        """
        let i = 0;
        const rs = new ReadableStream({ pull(c) { if (i < 3) c.enqueue(i++); else c.close(); } });
        const reader = rs.getReader();
        const got = [];
        for (;;) { const { value, done } = await reader.read(); if (done) break; got.push(value); }
        await reader.closed;
        let lockErr;
        try { rs.getReader(); } catch (e) { lockErr = e.constructor.name; }
        reader.releaseLock();
        return [got, rs.locked, lockErr];
        """
    )
    assert out == [[0, 1, 2], False, "TypeError"]


def test_async_iteration_cancel_and_from(guest: Guest) -> None:
    out = guest.run(
        """
        let canceled = null;
        const rs = new ReadableStream({
          start(c) { c.enqueue('a'); c.enqueue('b'); c.enqueue('c'); },
          cancel(r) { canceled = r === undefined ? 'undefined' : r; },
        });
        const got = [];
        for await (const v of rs) { got.push(v); if (v === 'b') break; }
        const from = [];
        for await (const v of ReadableStream.from((async function* () { yield 1; yield 2; })())) from.push(v);
        const fromArr = [];
        for await (const v of ReadableStream.from([3, 4])) fromArr.push(v);
        return [got, canceled, rs.locked, from, fromArr];
        """
    )
    assert out == [["a", "b"], "undefined", False, [1, 2], [3, 4]]


def test_errors_and_tee(guest: Guest) -> None:
    out = guest.run(
        """
        const bad = new ReadableStream({ start(c) { c.error(new Error('nope')); } });
        const r1 = await bad.getReader().read().catch((e) => e.message);
        const src = new ReadableStream({ start(c) { c.enqueue(1); c.enqueue(2); c.close(); } });
        const [a, b] = src.tee();
        const all = async (s) => { const out = []; for await (const v of s) out.push(v); return out; };
        return [r1, await all(a), await all(b)];
        """
    )
    assert out == ["nope", [1, 2], [1, 2]]


def test_writable_and_pipe(guest: Guest) -> None:
    out = guest.run(
        """
        const sink = [];
        let closed = false;
        const ws = new WritableStream({
          async write(chunk) { await null; sink.push(chunk); },
          close() { closed = true; },
        }, new CountQueuingStrategy({ highWaterMark: 2 }));
        const w = ws.getWriter();
        const ds = w.desiredSize;
        await w.write('x');
        w.releaseLock();
        const rs = new ReadableStream({ start(c) { c.enqueue('y'); c.enqueue('z'); c.close(); } });
        await rs.pipeTo(ws);
        return [sink, closed, ds, ws.locked];
        """
    )
    assert out == [["x", "y", "z"], True, 2, False]


def test_transform_stream(guest: Guest) -> None:
    out = guest.run(
        """
        const upper = new TransformStream({
          transform(chunk, c) { c.enqueue(chunk.toUpperCase()); },
          flush(c) { c.enqueue('!'); },
        });
        const rs = new ReadableStream({ start(c) { c.enqueue('a'); c.enqueue('b'); c.close(); } });
        const got = [];
        for await (const v of rs.pipeThrough(upper)) got.push(v);
        const id = new TransformStream();
        const w = id.writable.getWriter();
        w.write(1); w.close();
        const got2 = [];
        for await (const v of id.readable) got2.push(v);
        return [got, got2, new ByteLengthQueuingStrategy({ highWaterMark: 8 }).size(new Uint8Array(3))];
        """
    )
    assert out == [["A", "B", "!"], [1], 3]


def test_pipe_abort_signal(guest: Guest) -> None:
    out = guest.run(
        """
        const c = new AbortController();
        const rs = new ReadableStream({ pull(ctrl) { return new Promise((r) => setTimeout(() => { ctrl.enqueue(1); r(); }, 5)); } });
        const ws = new WritableStream({ write() {} });
        const p = rs.pipeTo(ws, { signal: c.signal });
        setTimeout(() => c.abort(), 12);
        return await p.then(() => 'resolved', (e) => e.name);
        """
    )
    assert out == "AbortError"
