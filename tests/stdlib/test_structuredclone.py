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
