"""structuredClone."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_clones_graph_with_cycles(guest: Guest) -> None:
    out = guest.run(
        """
        const shared = { s: 1 };
        const src = { a: [1, shared, shared], m: new Map([[shared, new Set([1, 2])]]), d: new Date(5),
                      r: /x/gi, n: new Number(3), big: 10n, u: undefined, neg: -0 };
        src.self = src;
        const c = structuredClone(src);
        const mk = [...c.m.keys()][0];
        return [c !== src, c.self === c, c.a[1] === c.a[2], c.a[1] !== shared, mk === c.a[1],
                [...c.m.get(mk)], c.d instanceof Date && c.d.getTime(), c.r.source + c.r.flags,
                c.n instanceof Number && c.n.valueOf(), typeof c.big, 'u' in c, Object.is(c.neg, -0)];
        """
    )
    assert out == [True, True, True, True, True, [1, 2], 5, "xgi", 3, "bigint", True, True]


def test_buffers_views_errors_and_transfer(guest: Guest) -> None:
    out = guest.run(
        """
        const buf = new Uint8Array([1, 2, 3, 4]).buffer;
        const view = new Uint16Array(buf, 2, 1);
        const c = structuredClone({ buf, view });
        const e = structuredClone(new RangeError('r', { cause: 'c' }));
        const custom = structuredClone(Object.assign(new Error('m'), { name: 'Weird' }));
        const t = new Uint8Array([9, 9]).buffer;
        const moved = structuredClone(t, { transfer: [t] });
        const dom = structuredClone(new DOMException('x', 'AbortError'));
        return [c.view.buffer === c.buf, Array.from(new Uint8Array(c.buf)), c.view[0] === view[0],
                e instanceof RangeError, e.message, e.cause, custom.name,
                t.byteLength, t.detached, Array.from(new Uint8Array(moved)), dom.name, dom instanceof DOMException];
        """
    )
    assert out == [True, [1, 2, 3, 4], True, True, "r", "c", "Error", 0, True, [9, 9], "AbortError", True]


def test_uncloneable_values_throw_data_clone_error(guest: Guest) -> None:
    out = guest.run(
        """
        const names = [];
        for (const v of [() => 1, Symbol('s'), { f() {} }, new WeakMap(), Promise.resolve(), new URL('https://a/'), new Headers()]) {
          try { structuredClone(v); names.push('cloned'); } catch (e) { names.push(e.name + ':' + (e instanceof DOMException)); }
        }
        return names;
        """
    )
    assert out == ["DataCloneError:true"] * 7


def test_blob_and_class_instances(guest: Guest) -> None:
    out = guest.run(
        """
        class P { constructor() { this.x = 1; } get y() { return 2; } }
        const p = structuredClone(new P());
        const f = structuredClone(new File(['abc'], 'n.txt', { type: 'text/plain', lastModified: 7 }));
        return [Object.getPrototypeOf(p) === Object.prototype, p.x, p.y,
                f instanceof File, f.name, f.type, f.lastModified, await f.text()];
        """
    )
    assert out == [True, 1, None, True, "n.txt", "text/plain", 7, "abc"]


def test_resizable_buffers_and_length_tracking_views(guest: Guest) -> None:
    # HTML serializes a resizable buffer with its [[ArrayBufferMaxByteLength]], and a view with
    # [[ByteLength]]/[[ArrayLength]] "auto" when it tracks its buffer's length: both survive.
    out = guest.run(
        """
        const ab = new ArrayBuffer(8, { maxByteLength: 16 });
        new Uint8Array(ab).set([1, 2, 3, 4, 5, 6, 7, 8]);
        const c = structuredClone(ab);
        const fixed = structuredClone(new ArrayBuffer(4));
        const tracking = structuredClone(new Uint16Array(ab, 2));
        const bounded = structuredClone(new Uint16Array(ab, 2, 2));
        const dvTracking = structuredClone(new DataView(ab, 1));
        tracking.buffer.resize(16); bounded.buffer.resize(16); dvTracking.buffer.resize(16);
        // At its maximum the buffer is probed by shrinking: its bytes are put back.
        const full = new ArrayBuffer(8, { maxByteLength: 8 });
        new Uint8Array(full).set([9, 8, 7, 6, 5, 4, 3, 2]);
        const atMax = structuredClone(new Uint32Array(full));
        atMax.buffer.resize(4);
        return [c.resizable, c.maxByteLength, c.byteLength, Array.from(new Uint8Array(c)), c !== ab,
                fixed.resizable, tracking.length, Array.from(tracking.slice(0, 3)), bounded.length,
                dvTracking.byteLength, atMax.length, Array.from(new Uint8Array(full)), full.byteLength];
        """
    )
    assert out == [True, 16, 8, [1, 2, 3, 4, 5, 6, 7, 8], True, False, 7, [0x0403, 0x0605, 0x0807],
                   2, 15, 1, [9, 8, 7, 6, 5, 4, 3, 2], 8]  # fmt: skip


def test_views_out_of_bounds_throw_data_clone_error(guest: Guest) -> None:
    # HTML: "If IsArrayBufferViewOutOfBounds(value) is true, then throw a DataCloneError".
    out = guest.run(
        """
        const ab = new ArrayBuffer(8, { maxByteLength: 16 });
        const views = [new Uint16Array(ab, 4, 2), new DataView(ab, 2, 6), new Uint8Array(ab, 7)];
        ab.resize(6);
        const detached = new Uint8Array(4), dvDetached = new DataView(new ArrayBuffer(4));
        detached.buffer.transfer(); dvDetached.buffer.transfer();
        views.push(detached, dvDetached);
        const results = views.map((v) => { try { structuredClone(v); return 'cloned'; } catch (e) { return `${e.name}:${e instanceof DOMException}`; } });
        const still = structuredClone(new Uint16Array(ab, 2, 2)).length;  // in bounds after the shrink
        return [results, still];
        """
    )
    assert out == [["DataCloneError:true"] * 5, 2]


def test_subclass_instances_clone_as_their_serializable_base(guest: Guest) -> None:
    # Types are recognised by their internal slots, so a subclass clones as the base type, and
    # what the subclass overrides (exec, flags, toStringTag, species) is never consulted.
    out = guest.run(
        """
        const proto = (v) => Object.getPrototypeOf(v);
        class MyMap extends Map {} class MySet extends Set {} class MyDate extends Date {}
        class MyRe extends RegExp { exec() { throw new Error('exec called'); } get flags() { return 'x'; } }
        class MyBuf extends ArrayBuffer { static get [Symbol.species]() { throw new Error('species read'); } }
        class MyBytes extends Uint8Array { get [Symbol.toStringTag]() { return 'Float64Array'; } get length() { return 99; } }
        class MyRange extends RangeError {}
        class Named extends Error { constructor(m) { super(m); this.name = 'Named'; } }
        class MyArray extends Array {}
        class MyNumber extends Number {}
        const re = new MyRe('a+', 'gy'); re.lastIndex = 2;
        const m = structuredClone(new MyMap([[1, 'a']])), s = structuredClone(new MySet([1]));
        const d = structuredClone(new MyDate(5)), r = structuredClone(re);
        const b = structuredClone(new MyBuf(3)), u = structuredClone(new MyBytes([1, 2]));
        const e1 = structuredClone(new MyRange('r')), e2 = structuredClone(new Named('n'));
        const a = structuredClone(MyArray.from([1, 2])), n = structuredClone(new MyNumber(4));
        return [proto(m) === Map.prototype && m.get(1), proto(s) === Set.prototype && s.has(1),
                proto(d) === Date.prototype && d.getTime(), proto(r) === RegExp.prototype && String(r), re.lastIndex,
                proto(b) === ArrayBuffer.prototype && b.byteLength, proto(u) === Uint8Array.prototype && Array.from(u),
                proto(e1) === RangeError.prototype && e1.message, proto(e2) === Error.prototype && e2.name,
                proto(a) === Array.prototype && a, proto(n) === Number.prototype && n.valueOf()];
        """
    )
    assert out == ["a", True, 5, "/a+/gy", 2, 3, [1, 2], "r", "Error", [1, 2], 4]


def test_platform_subclasses_are_refused_and_program_classes_cloned(guest: Guest) -> None:
    out = guest.run(
        """
        class MyHeaders extends Headers {}
        class Tagged { constructor() { this.x = 1; } get [Symbol.toStringTag]() { return 'Tagged'; } }
        class MyBlob extends Blob {}
        let refused;
        try { structuredClone(new MyHeaders()); refused = 'cloned'; } catch (e) { refused = e.name; }
        const blob = structuredClone(new MyBlob(['ab']));
        return [refused, structuredClone(new Tagged()), blob instanceof Blob && await blob.text()];
        """
    )
    assert out == ["DataCloneError", {"x": 1}, "ab"]
