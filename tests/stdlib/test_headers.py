"""Headers as the Fetch Standard and WebIDL define it: the pair iterator, set-cookie, and
how a HeadersInit is converted (the operations a Proxy observes)."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_iterators_are_webidl_pair_iterators(guest: Guest) -> None:
    # WebIDL: the iterator's prototype is the interface's iterator prototype object, whose
    # [[Prototype]] is %IteratorPrototype%, with an enumerable `next` and a @@toStringTag of
    # "Headers Iterator"; the iterator itself has no own properties; @@iterator is entries.
    out = guest.run(
        """
        const h = new Headers({ a: '1' });
        const it = h.entries(), proto = Object.getPrototypeOf(it);
        const IteratorPrototype = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
        const next = Object.getOwnPropertyDescriptor(proto, 'next');
        const tag = Object.getOwnPropertyDescriptor(proto, Symbol.toStringTag);
        let wrongThis;
        try { next.value.call({}); wrongThis = 'ok'; } catch (e) { wrongThis = e.constructor.name; }
        return [Object.getPrototypeOf(proto) === IteratorPrototype, Reflect.ownKeys(proto).length,
                [next.writable, next.enumerable, next.configurable, typeof next.value, 'prototype' in next.value],
                [tag.value, tag.writable, tag.enumerable, tag.configurable], String(it),
                Reflect.ownKeys(it).length, [h.keys(), h.values()].every((i) => Object.getPrototypeOf(i) === proto),
                Headers.prototype[Symbol.iterator] === Headers.prototype.entries,
                ['entries', 'keys', 'values', 'forEach', 'append', 'get'].every((k) => Object.getOwnPropertyDescriptor(Headers.prototype, k).enumerable),
                wrongThis, it[Symbol.iterator]() === it, it.next(), it.next()];
        """
    )
    assert out == [
        True,
        2,
        [True, True, True, "function", False],
        ["Headers Iterator", False, False, True],
        "[object Headers Iterator]",
        0,
        True,
        True,
        True,
        "TypeError",
        True,
        {"value": ["a", "1"], "done": False},
        {"done": True},
    ]


def test_iteration_sees_changes_made_while_iterating(guest: Guest) -> None:
    # Each `next` takes index `i` of the sorted-and-combined list as it is now; forEach reads
    # the pairs afresh after every callback.
    out = guest.run(
        """
        const h = new Headers([['b', '2'], ['a', '1'], ['d', '4']]);
        const seen = [];
        for (const [n, v] of h) {
          seen.push(`${n}=${v}`);
          if (n === 'a') { h.delete('b'); h.append('c', '3'); h.append('a', '0'); }
        }
        const it = new Headers({ x: '1' }).keys();
        const spent = [it.next().value, it.next().done];
        const g = new Headers({ m: '1' });
        const tail = g.values();
        g.append('z', '9');
        const late = [tail.next().value, tail.next().value, tail.next().done];
        const f = new Headers({ p: '1', q: '2' });
        const each = [];
        f.forEach((v, n, self) => { each.push(n + v + (self === f)); if (n === 'p') f.set('o', '0'); });
        return [seen, spent, late, each];
        """
    )
    assert out == [
        ["a=1", "c=3", "d=4"],
        ["x", True],
        ["1", "9", True],
        ["p1true", "p1true", "q2true"],
    ]


def test_set_cookie_is_never_combined(guest: Guest) -> None:
    # Fetch: getSetCookie() lists the values; "sort and combine" yields each set-cookie value
    # as its own pair, while get() still joins them (as for any name).
    out = guest.run(
        """
        const h = new Headers([['Set-Cookie', 'a=1'], ['x', '1'], ['set-cookie', 'b=2, c=3'], ['X', '2']]);
        const copy = new Headers(h);
        const response = new Response(null, { headers: h });
        return [[...h], h.getSetCookie(), h.get('set-cookie'), [...copy], copy.getSetCookie(),
                response.headers.getSetCookie(), new Headers().getSetCookie(), [...h.keys()]];
        """
    )
    assert out == [
        [["set-cookie", "a=1"], ["set-cookie", "b=2, c=3"], ["x", "1, 2"]],
        ["a=1", "b=2, c=3"],
        "a=1, b=2, c=3",
        [["set-cookie", "a=1"], ["set-cookie", "b=2, c=3"], ["x", "1, 2"]],
        ["a=1", "b=2, c=3"],
        ["a=1", "b=2, c=3"],
        [],
        ["set-cookie", "set-cookie", "x"],
    ]


# A Proxy whose handler logs every trap called, with the property key.
LOGGING_PROXY = """
const log = [];
const logged = (target) => new Proxy(target, new Proxy({}, {
  get: (_, trap) => (...args) => {
    const key = args[1];
    log.push(typeof key === 'symbol' ? `${trap}:${key.description}` : key === undefined || trap === 'ownKeys' ? trap : `${trap}:${key}`);
    return Reflect[trap](...args);
  },
}));
"""


def test_record_is_read_in_webidl_order(guest: Guest) -> None:
    # WebIDL union conversion: one [[Get]] of @@iterator (undefined: a record); the record
    # conversion: [[OwnPropertyKeys]], then per key [[GetOwnProperty]] and, if enumerable, [[Get]].
    out = guest.run(
        LOGGING_PROXY
        + """
        const target = { b: 'B' };
        Object.defineProperty(target, 'hidden', { value: 'x', enumerable: false });
        Object.defineProperty(target, Symbol('quiet'), { value: 'x', enumerable: false });
        target.a = 'A';
        const h = new Headers(logged(target));
        const first = log.splice(0);
        let error;
        try { new Headers(logged({ x: '1', [Symbol('loud')]: '2', y: '3' })); } catch (e) { error = e.constructor.name; }
        return [first, [...h], error, log];
        """
    )
    assert out == [
        [
            "get:Symbol.iterator",
            "ownKeys",
            "getOwnPropertyDescriptor:b",
            "get:b",
            "getOwnPropertyDescriptor:hidden",
            "getOwnPropertyDescriptor:a",
            "get:a",
            "getOwnPropertyDescriptor:quiet",
        ],
        [["a", "A"], ["b", "B"]],
        # An enumerable symbol key cannot become a ByteString: TypeError after its descriptor.
        "TypeError",
        [
            "get:Symbol.iterator",
            "ownKeys",
            "getOwnPropertyDescriptor:x",
            "get:x",
            "getOwnPropertyDescriptor:y",
            "get:y",
            "getOwnPropertyDescriptor:loud",
        ],
    ]


def test_record_values_are_converted_before_names_are_checked(guest: Guest) -> None:
    # The whole record is converted (every [[Get]]) before fill appends and validates.
    out = guest.run(
        LOGGING_PROXY
        + """
        let error;
        try { new Headers(logged({ 'bad name': '1', ok: '2' })); } catch (e) { error = e.constructor.name; }
        return [error, log];
        """
    )
    assert out == [
        "TypeError",
        [
            "get:Symbol.iterator",
            "ownKeys",
            "getOwnPropertyDescriptor:bad name",
            "get:bad name",
            "getOwnPropertyDescriptor:ok",
            "get:ok",
        ],
    ]


def test_sequence_uses_the_iterator_method_read_once(guest: Guest) -> None:
    # A sequence is read through the @@iterator method got once, its `next` got once, and no
    # `return` on failure (WebIDL "create a sequence from an iterable"); pair sizes are checked
    # after the whole sequence is converted.
    out = guest.run(
        """
        const calls = [];
        const pairs = [['a', '1'], ['b', '2', '3'], ['c', '3']];
        const init = {
          get [Symbol.iterator]() {
            calls.push('@@iterator');
            return function () {
              let i = 0;
              return {
                get next() { calls.push('next'); return () => (i < pairs.length ? { value: pairs[i++], done: false } : { done: true }); },
                return() { calls.push('return'); return {}; },
              };
            };
          },
        };
        let error;
        try { new Headers(init); } catch (e) { error = e.constructor.name; }
        const h = new Headers(new Map([['k', 'v']]));
        const notCallable = (() => { try { new Headers({ [Symbol.iterator]: 1 }); return 'ok'; } catch (e) { return e.constructor.name; } })();
        const notPair = (() => { try { new Headers(['ab']); return 'ok'; } catch (e) { return e.constructor.name; } })();
        return [error, calls, [...h], notCallable, notPair];
        """
    )
    assert out == ["TypeError", ["@@iterator", "next"], [["k", "v"]], "TypeError", "TypeError"]
