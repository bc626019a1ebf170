"""URL and URLSearchParams behaviour beyond the WPT data files."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_basic_components(guest: Guest) -> None:
    out = guest.run(
        """
        const u = new URL('HTTPS://user:pa ss@EXAMPLE.com:443/a/../b/./c?x=1&y=%20#frag');
        return [u.href, u.origin, u.protocol, u.username, u.password, u.host, u.port,
                u.pathname, u.search, u.hash, JSON.stringify({u}), String(u)];
        """
    )
    assert out == [
        "https://user:pa%20ss@example.com/b/c?x=1&y=%20#frag",
        "https://example.com",
        "https:",
        "user",
        "pa%20ss",
        "example.com",
        "",
        "/b/c",
        "?x=1&y=%20",
        "#frag",
        '{"u":"https://user:pa%20ss@example.com/b/c?x=1&y=%20#frag"}',
        "https://user:pa%20ss@example.com/b/c?x=1&y=%20#frag",
    ]


def test_relative_idna_ipv4_ipv6(guest: Guest) -> None:
    out = guest.run(
        """
        return [new URL('../x?q', 'http://h/a/b/c').href,
                new URL('https://münchen.de/').host,
                new URL('https://faß.ExAmple/').host,
                new URL('http://0x7f.1/').host,
                new URL('http://[::FFFF:192.168.0.1]:8080/').host,
                new URL('file:///C|/x').href,
                URL.canParse('nope'), URL.canParse('/p', 'https://b/'), URL.parse('::'),
                URL.parse('x', 'https://b/').href];
        """
    )
    assert out == [
        "http://h/a/x?q",
        "xn--mnchen-3ya.de",
        "xn--fa-hia.example",
        "127.0.0.1",
        "[::ffff:c0a8:1]:8080",
        "file:///C:/x",
        False,
        True,
        None,
        "https://b/x",
    ]


def test_invalid_url_throws_type_error(guest: Guest) -> None:
    out = guest.run(
        """
        const errs = [];
        for (const [u, b] of [['nope'], ['http://[::1'], ['https://a b/'], ['x', 'also bad']]) {
          try { new URL(u, b); errs.push('no throw'); } catch (e) { errs.push(e.constructor.name); }
        }
        try { new URL(); } catch (e) { errs.push(e.constructor.name); }
        return errs;
        """
    )
    assert out == ["TypeError"] * 5


def test_setters_and_search_params_link(guest: Guest) -> None:
    out = guest.run(
        """
        const u = new URL('https://example.com/p?a=1');
        const sp = u.searchParams;
        sp.append('b', 'x y&z');
        const afterAppend = u.href;
        u.search = '?c=3';
        const afterSearch = [sp.get('c'), sp.has('a')];
        u.hash = 'h'; u.port = '8080'; u.pathname = '/new path'; u.hostname = 'EXAMPLE.org';
        u.protocol = 'http'; u.username = 'me';
        sp.delete('c');
        return { afterAppend, afterSearch, href: u.href, same: u.searchParams === sp };
        """
    )
    assert out == {
        "afterAppend": "https://example.com/p?a=1&b=x+y%26z",
        "afterSearch": ["3", False],
        "href": "http://me@example.org:8080/new%20path#h",
        "same": True,
    }


def test_url_search_params(guest: Guest) -> None:
    out = guest.run(
        """
        const p = new URLSearchParams('?a=1&b=2&a=3&c=%F0%9F%98%80+x');
        const fromPairs = new URLSearchParams([['x', '1'], ['y', '2']]);
        const fromRecord = new URLSearchParams({ k: 'v', n: 5 });
        p.sort();
        const entries = [...p];
        p.set('a', 'z');
        let err;
        try { new URLSearchParams([['only-one']]); } catch (e) { err = e.constructor.name; }
        return { entries, all: p.getAll('a'), str: p.toString(), size: p.size,
                 pairs: fromPairs.toString(), rec: fromRecord.toString(), err,
                 has: [p.has('b', '2'), p.has('b', '9')], keys: [...fromPairs.keys()] };
        """
    )
    assert out == {
        "entries": [["a", "1"], ["a", "3"], ["b", "2"], ["c", "😀 x"]],
        "all": ["z"],
        "str": "a=z&b=2&c=%F0%9F%98%80+x",
        "size": 3,
        "pairs": "x=1&y=2",
        "rec": "k=v&n=5",
        "err": "TypeError",
        "has": [True, False],
        "keys": ["x", "y"],
    }


def test_idna_module_loads_only_for_unicode_hosts(guest: Guest) -> None:
    # The idna tables are compiled lazily: an ASCII host must not need them.
    out = guest.run(
        """
        const before = __stdlibLoaded();
        new URL('https://example.com/');
        const ascii = __stdlibLoaded().includes('idna');
        const host = new URL('https://bücher.example/').hostname;
        return [before, ascii, host, __stdlibLoaded().includes('idna')];
        """
    )
    assert out == [[], False, "xn--bcher-kva.example", True]
