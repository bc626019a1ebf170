"""console: levels, WHATWG format directives, Node-style inspection, timers, groups, table."""

from __future__ import annotations

import pytest

from tests.stdlib.conftest import Guest


def log_texts(guest: Guest, body: str) -> list[str]:
    guest.run(body + "\nreturn null;")
    return [entry["text"] for entry in guest.logs()]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1, 'a', {a: 1, b: 'x'}", "1 a { a: 1, b: 'x' }"),
        ("[1, 2, 3]", "[ 1, 2, 3 ]"),
        ("{a: {b: {c: {d: 1}}}}", "{ a: { b: { c: [Object] } } }"),
        ("{a: {b: {c: [1]}}}", "{ a: { b: { c: [Array] } } }"),
        ("function foo() {}, () => {}, class A {}", "[Function: foo] [Function (anonymous)] [class A]"),
        ("async function af() {}", "[AsyncFunction: af]"),
        ("new Map([['a', 1]]), new Set([1, 'two'])", "Map(1) { 'a' => 1 } Set(2) { 1, 'two' }"),
        ("new Map(), new Set(), {}, []", "Map(0) {} Set(0) {} {} []"),
        ("'%s is %d years', 'Bob', 42.5", "Bob is 42.5 years"),
        ("'%i|%f|%j', 42.9, '3.5', {a: 1}", '42|3.5|{"a":1}'),
        ("'%c styled', 'color: red'", " styled"),
        ("'100%', 5", "100% 5"),
        ("'%o', [1]", "[ 1, [length]: 1 ]"),
        ("'%s', {a: 1}", "{ a: 1 }"),
        ("'%s', 5n", "5n"),
        ("-0, 5n, Symbol('x'), null, undefined", "-0 5n Symbol(x) null undefined"),
        ("new Date(0)", "1970-01-01T00:00:00.000Z"),
        ("/ab+c/gi", "/ab+c/gi"),
        ("new Uint8Array([1, 2])", "Uint8Array(2) [ 1, 2 ]"),
        ("new ArrayBuffer(2)", "ArrayBuffer { [Uint8Contents]: <00 00>, byteLength: 2 }"),
        ("Object.create(null)", "[Object: null prototype] {}"),
        ("new (class Foo { constructor() { this.x = 1 } })()", "Foo { x: 1 }"),
        ("{ get a() { return 1 }, set b(v) {} }", "{ a: [Getter], b: [Setter] }"),
        ("new Number(3), new String('ab')", "[Number: 3] [String: 'ab']"),
        ("[1, , 3]", "[ 1, <1 empty item>, 3 ]"),
        ("{ 'a-b': 1, q: \"it's\" }", "{ 'a-b': 1, q: \"it's\" }"),
        ("[new Error('x')].length", "1"),
        ("new URL('https://a.example/p?q=1').searchParams", "URLSearchParams { q: '1' }"),
        ("new Headers({'X-A': '1'})", "Headers { 'x-a': '1' }"),
    ],
)
def test_format_matches_node(guest: Guest, expr: str, expected: str) -> None:
    assert log_texts(guest, f"console.log({expr});") == [expected]


def test_circular_reference(guest: Guest) -> None:
    texts = log_texts(guest, "const o = {name: 'x'}; o.self = o; console.log(o);")
    assert texts == ["<ref *1> { name: 'x', self: [Circular *1] }"]


def test_long_arrays_are_grouped_and_cut(guest: Guest) -> None:
    (text,) = log_texts(guest, "console.log(Array.from({length: 120}, (_, i) => i));")
    assert text.startswith("[\n   0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11,\n  12, 13,")
    assert text.endswith("... 20 more items\n]")


def test_multiline_object(guest: Guest) -> None:
    (text,) = log_texts(
        guest,
        "console.log({long1: 'a'.repeat(20), long2: 'b'.repeat(22), long3: 'c'.repeat(20), n: 1});",
    )
    assert text == (
        "{\n  long1: 'aaaaaaaaaaaaaaaaaaaa',\n  long2: 'bbbbbbbbbbbbbbbbbbbbbb',\n"
        "  long3: 'cccccccccccccccccccc',\n  n: 1\n}"
    )


def test_error_prints_stack_and_extra_props(guest: Guest) -> None:
    (text,) = log_texts(guest, "console.log(Object.assign(new Error('boom'), {code: 'E_X'}));")
    assert text.startswith("Error: boom\n    at ")
    assert text.endswith("{\n  code: 'E_X'\n}")


def test_levels(guest: Guest) -> None:
    guest.run(
        "console.log('l'); console.info('i'); console.warn('w'); console.error('e');"
        "console.debug('d'); console.trace('t'); return null;"
    )
    levels = [(e["level"], e["text"].split("\n")[0]) for e in guest.logs()]
    assert levels == [
        ("log", "l"),
        ("info", "i"),
        ("warn", "w"),
        ("error", "e"),
        ("debug", "d"),
        ("debug", "Trace: t"),
    ]


def test_count_assert_group_time(guest: Guest) -> None:
    guest.run(
        """
        console.count(); console.count(); console.count('x'); console.countReset(); console.count();
        console.countReset('nope');
        console.assert(true, 'never'); console.assert(false, 'bad %s', 'thing'); console.assert(false);
        console.group('G'); console.log('in\\nside'); console.groupEnd(); console.log('out');
        console.time('t'); console.timeLog('t', 'extra'); console.timeEnd('t'); console.timeEnd('t');
        return null;
        """
    )
    logs = guest.logs()
    texts = [e["text"] for e in logs]
    assert texts[:5] == ["default: 1", "default: 2", "x: 1", "default: 1", "Count for 'nope' does not exist"]
    assert texts[5:7] == ["Assertion failed: bad thing", "Assertion failed"]
    assert logs[5]["level"] == "error"
    assert texts[7:10] == ["G", "  in\n  side", "out"]
    assert texts[10].startswith("t: ") and texts[10].endswith("ms extra")
    assert texts[11].startswith("t: ") and texts[11].endswith("ms")
    assert texts[12] == "No such label 't' for console.timeEnd()"
    assert logs[12]["level"] == "warn"


def test_table(guest: Guest) -> None:
    (text,) = log_texts(guest, "console.table([{a: 1, b: 'x'}, {a: 2, c: true}]);")
    assert text == (
        "┌─────────┬───┬─────┬──────┐\n"
        "│ (index) │ a │ b   │ c    │\n"
        "├─────────┼───┼─────┼──────┤\n"
        "│ 0       │ 1 │ 'x' │      │\n"
        "│ 1       │ 2 │     │ true │\n"
        "└─────────┴───┴─────┴──────┘"
    )


def test_dir_and_hostile_values(guest: Guest) -> None:
    texts = log_texts(
        guest,
        """
        console.dir({a: {b: {c: {}}}}, {depth: 0});
        const p = new Proxy({}, { get() { throw new Error('trap'); } });
        console.log({ get bad() { throw new Error('x'); } });
        console.log(Object.create(null, { [Symbol.toStringTag]: { value: 'T' } }));
        """,
    )
    assert texts[0] == "{ a: [Object] }"
    assert texts[1] == "{ bad: [Getter] }"
    assert texts[2] == "[Object: null prototype] [T] {}"


def test_captured_builtins_survive_later_patching(guest: Guest) -> None:
    # Built-ins are captured when the module loads (the first touch of `console`).
    texts = log_texts(guest, "console.log(1); Object.keys = () => []; console.log({a: [1, 2]});")
    assert texts == ["1", "{ a: [ 1, 2 ] }"]
