"""Conformance drivers: web-platform-tests data run against the guest standard library.

Every case runs inside a real V8 isolate: the data file is handed to one JavaScript loop that
runs all of its cases in a single eval and returns a JSON summary (passed, failed, the first
failing inputs). Until the executor's own runtime is wired in, the isolate is a bare
``MiniRacer`` prepared by :func:`_load_stdlib_into`, which emulates the executor's lazy loader
exactly as the module contract in :mod:`codemode.stdlib` describes it.

Data lives at ``$CODEMODE_CONFORMANCE_DIR``, else ``../shared/conformance`` beside the repository.

Run ``python -m codemode.conformance`` for the table.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py_mini_racer import JSPromise, MiniRacer

from codemode.stdlib import MODULES, sources

__all__ = [
    "DISABLED_FETCH_TEXT",
    "FileResult",
    "conformance_dir",
    "isolate",
    "run_all",
    "run_async",
]

DISABLED_FETCH_TEXT = (
    "Outbound fetch is disabled for this execution. "
    "Anything this run needs from outside has to arrive through a tool call."
)
"""What ``host.fetch`` rejects with in this harness (the executor's network-off text)."""

_USER_AGENT = "codemode"
_MAX_FAILURES_SHOWN = 20

# The loader, as the executor installs it: one lazy accessor per global; the first touch
# indirect-evals the module source, calls it with `host` once, and replaces every accessor of
# that module with a writable, configurable, non-enumerable data property. A name the guest
# has already overwritten is left alone.
_LOADER_JS = r"""
(function (sources, modules, seed, timeOrigin, userAgent, hostFetch) {
  'use strict';
  const cache = Object.create(null);
  const loading = Object.create(null);
  const logs = [];
  const getters = Object.create(null);
  const defineData = (name, value) => Object.defineProperty(globalThis, name, {
    value, writable: true, configurable: true, enumerable: false });
  const require = (id) => {
    if (id in cache) return cache[id];
    if (!(id in sources)) throw new Error(`no standard library module '${id}'`);
    if (loading[id]) throw new Error(`standard library module cycle at '${id}'`);
    loading[id] = true;
    try {
      const factory = (0, eval)(sources[id]);
      const exports = factory(host);
      cache[id] = exports;
      for (const name of modules[id]) {
        const d = Object.getOwnPropertyDescriptor(globalThis, name);
        if (d && d.get === getters[name]) defineData(name, exports[name]);
      }
      return exports;
    } finally {
      loading[id] = false;
    }
  };
  const host = Object.freeze({
    require,
    log(level, text) { logs.push({ level: String(level), text: String(text) }); },
    seed, timeOrigin, userAgent,
    fetch: hostFetch,
  });
  for (const id of Object.keys(modules)) {
    for (const name of modules[id]) {
      const get = function () { require(id); return globalThis[name]; };
      getters[name] = get;
      Object.defineProperty(globalThis, name, {
        configurable: true, enumerable: false, get,
        set(value) { defineData(name, value); },
      });
    }
  }
  defineData('__stdlibLogs', logs);
  defineData('__stdlibRequire', require);
  defineData('__stdlibLoaded', () => Object.keys(cache));
})
"""

# Timers: mini-racer ships its own setTimeout (which refuses a 0 ms delay); the executor's
# runtime installs real ones. This harness wraps the bundled one just enough for tests.
_TIMERS_JS = r"""
(() => {
  const st = globalThis.setTimeout, ct = globalThis.clearTimeout;
  // mini-racer's own setTimeout/clearTimeout are writable but not configurable.
  const define = (name, value) => {
    const d = Object.getOwnPropertyDescriptor(globalThis, name);
    if (d && !d.configurable) { globalThis[name] = value; return; }
    Object.defineProperty(globalThis, name, {
      value, writable: true, configurable: true, enumerable: false });
  };
  define('setTimeout', (fn, ms, ...args) => st(() => fn(...args), Math.max(1, Number(ms) || 0)));
  define('clearTimeout', (id) => { if (id !== undefined) ct(id); });
  const intervals = new Map();
  let next = 1;
  define('setInterval', (fn, ms, ...args) => {
    const id = next++;
    const tick = () => { intervals.set(id, st(tick, Math.max(1, Number(ms) || 0))); fn(...args); };
    intervals.set(id, st(tick, Math.max(1, Number(ms) || 0)));
    return id;
  });
  define('clearInterval', (id) => { const h = intervals.get(id); if (h !== undefined) ct(h);
    intervals.delete(id); });
  define('queueMicrotask', (fn) => { Promise.resolve().then(() => fn()); });
})();
"""

_DISABLED_FETCH_JS = f"(req) => Promise.reject(new Error({json.dumps(DISABLED_FETCH_TEXT)}))"


def _load_stdlib_into(mr: MiniRacer, *, host_fetch_js: str | None = None) -> None:
    """Install timers and the lazy standard-library loader into a fresh ``MiniRacer``.

    ``host_fetch_js`` is a JS function expression used as ``host.fetch`` (default: reject
    with :data:`DISABLED_FETCH_TEXT`, as an execution with the network off does).
    """
    mr.eval(_TIMERS_JS)
    call = (
        f"({_LOADER_JS.strip()})({json.dumps(sources())}, "
        f"{json.dumps({k: list(v) for k, v in MODULES.items()})}, "
        f"{json.dumps(secrets.token_hex(32))}, {time.time() * 1000!r}, "
        f"{json.dumps(_USER_AGENT)}, {host_fetch_js or _DISABLED_FETCH_JS})"
    )
    mr.eval(call)


@contextmanager
def isolate(*, host_fetch_js: str | None = None) -> Iterator[MiniRacer]:
    """A fresh isolate with the standard library installed; closed on exit."""
    mr = MiniRacer()
    try:
        _load_stdlib_into(mr, host_fetch_js=host_fetch_js)
        yield mr
    finally:
        mr.close()


def run_async(mr: MiniRacer, body: str, *, timeout_s: float = 30.0) -> Any:
    """Run ``body`` as the body of an async function; return its JSON-serialised result."""
    promise = mr.eval(f"(async () => JSON.stringify(await (async () => {{ {body} }})()))()")
    if not isinstance(promise, JSPromise):  # pragma: no cover - an async function always is one
        raise TypeError("expected a promise from the isolate")
    text = promise.get(timeout=timeout_s)
    return json.loads(text) if isinstance(text, str) else None


def conformance_dir() -> Path | None:
    """Where the conformance data lives, or ``None`` when it is absent."""
    env = os.environ.get("CODEMODE_CONFORMANCE_DIR")
    root = Path(env) if env else Path(__file__).resolve().parent.parent.parent / "shared" / ("conformance")
    return root if root.is_dir() else None


@dataclass(frozen=True)
class FileResult:
    """One data file's outcome."""

    name: str
    passed: int
    failed: int
    failures: list[Any] = field(default_factory=list)
    note: str = ""

    @property
    def total(self) -> int:
        """Cases run."""
        return self.passed + self.failed

    @property
    def percent(self) -> float:
        """Share of cases that passed, 0-100."""
        return 100.0 * self.passed / self.total if self.total else 100.0


# ---------------------------------------------------------------------------------------------
# JavaScript drivers. Each is the body of an async function with `DATA` bound to the parsed
# file; it returns {passed, failed, failures}. `check(input, fn)` counts one case.

_PRELUDE_JS = r"""
const failures = [];
let passed = 0, failed = 0;
const show = (v) => { try { return JSON.stringify(v); } catch { return String(v); } };
const fail = (input, why) => { failed++; if (failures.length < %d) failures.push({ input, why }); };
const check = (input, fn) => {
  try { const why = fn(); if (why) fail(input, why); else passed++; }
  catch (e) { fail(input, 'threw ' + (e && e.name) + ': ' + (e && e.message)); }
};
const checkAsync = async (input, fn) => {
  try { const why = await fn(); if (why) fail(input, why); else passed++; }
  catch (e) { fail(input, 'threw ' + (e && e.name) + ': ' + (e && e.message)); }
};
const expectThrow = (fn, ctor) => {
  try { const v = fn(); return 'expected a throw, got ' + show(String(v)); }
  catch (e) { return e instanceof ctor ? '' : 'threw the wrong error: ' + e; }
};
const cmp = (obj, expected, keys) => {
  for (const k of keys) {
    if (!(k in expected)) continue;
    if (obj[k] !== expected[k]) return `${k}: got ${show(obj[k])}, want ${show(expected[k])}`;
  }
  return '';
};
""".replace("%d", str(_MAX_FAILURES_SHOWN))

_URL_KEYS = "['href','protocol','username','password','host','hostname','port','pathname','search','hash']"

_DRIVERS: dict[str, str] = {
    "urltestdata": r"""
for (const c of DATA) {
  if (typeof c === 'string') continue;
  check(c.input + (c.base ? ' against ' + c.base : ''), () => {
    const make = () => c.base === null ? new URL(c.input) : new URL(c.input, c.base);
    if (c.failure) {
      const why = expectThrow(make, TypeError);
      if (why) return why;
      if (URL.canParse(c.input, c.base ?? undefined)) return 'canParse said true';
      if (URL.parse(c.input, c.base ?? undefined) !== null) return 'parse gave a URL';
      return '';
    }
    const url = make();
    const why = cmp(url, c, KEYS);
    if (why) return why;
    if ('origin' in c && url.origin !== c.origin) return `origin: got ${url.origin}`;
    if ('searchParams' in c && url.searchParams.toString() !== c.searchParams)
      return 'searchParams: got ' + url.searchParams;
    if (!URL.canParse(c.input, c.base ?? undefined)) return 'canParse said false';
    return '';
  });
}
""".replace("KEYS", _URL_KEYS),
    "setters": r"""
for (const [attr, cases] of Object.entries(DATA)) {
  if (attr === 'comment') continue;
  for (const c of cases) {
    check(`${attr} = ${show(c.new_value)} on ${c.href}`, () => {
      const url = new URL(c.href);
      url[attr] = c.new_value;
      return cmp(url, c.expected, Object.keys(c.expected));
    });
  }
}
""",
    "toascii": r"""
for (const c of DATA) {
  if (typeof c === 'string') continue;
  check(c.input + ' (URL)', () => {
    if (c.output === null) return expectThrow(() => new URL(`https://${c.input}/x`), TypeError);
    const url = new URL(`https://${c.input}/x`);
    return cmp(url, { host: c.output, hostname: c.output, pathname: '/x',
      href: `https://${c.output}/x` }, ['host', 'hostname', 'pathname', 'href']);
  });
  for (const attr of ['host', 'hostname']) {
    check(c.input + ' (' + attr + ' setter)', () => {
      const url = new URL('https://x/x');
      url[attr] = c.input;
      const want = c.output === null ? 'x' : c.output;
      return url[attr] === want ? '' : `got ${show(url[attr])}, want ${show(want)}`;
    });
  }
}
""",
    "idna": r"""
for (const c of DATA) {
  if (typeof c === 'string' || c.input === '') continue;
  check(c.input, () => {
    // Two inputs hold lone surrogates, which encodeURIComponent refuses: pass those raw
    // (URL's USVString conversion turns them into U+FFFD).
    let enc;
    try { enc = encodeURIComponent(c.input); } catch { enc = c.input; }
    if (c.output === null) return expectThrow(() => new URL(`https://${enc}/x`), TypeError);
    const url = new URL(`https://${enc}/x`);
    return cmp(url, { host: c.output, hostname: c.output, pathname: '/x',
      href: `https://${c.output}/x` }, ['host', 'hostname', 'pathname', 'href']);
  });
}
""",
    "percent": r"""
for (const c of DATA) {
  if (typeof c === 'string' || !('utf-8' in c.output)) continue;
  check(c.input, () => {
    const url = new URL('https://doesnotmatter.invalid/?' + c.input);
    const want = '?' + c.output['utf-8'];
    return url.search === want ? '' : `search: got ${show(url.search)}, want ${show(want)}`;
  });
}
""",
    "base64": r"""
for (const [input, output] of DATA) {
  check(input, () => {
    if (output === null) {
      try { atob(input); return 'expected InvalidCharacterError'; }
      catch (e) { return e instanceof DOMException && e.name === 'InvalidCharacterError'
        ? '' : 'wrong error ' + e; }
    }
    const got = Array.from(atob(input), (ch) => ch.charCodeAt(0));
    return show(got) === show(output) ? '' : `got ${show(got)}`;
  });
}
""",
    "dataurls": r"""
for (const [input, mime, body] of DATA) {
  await checkAsync(input, async () => {
    if (mime === null) {
      try { await fetch(input); return 'expected a network error'; }
      catch (e) { return e instanceof TypeError ? '' : 'wrong error ' + e; }
    }
    const res = await fetch(input);
    const got = Array.from(new Uint8Array(await res.arrayBuffer()));
    if (show(got) !== show(body)) return `body: got ${show(got)}`;
    const type = res.headers.get('content-type');
    return type === mime ? '' : `content-type: got ${show(type)}, want ${show(mime)}`;
  });
}
""",
    "encodings": r"""
let replacement = 0, replacementOk = 0;
for (const group of DATA) {
  for (const enc of group.encodings) {
    const name = enc.name.toLowerCase();
    for (const label of enc.labels) {
      if (name === 'replacement') {
        replacement++;
        try { new TextDecoder(label); } catch (e) { if (e instanceof RangeError) replacementOk++; }
        continue;
      }
      check(label, () => {
        for (const variant of [label, label.toUpperCase(), ' ' + label, label + '\t',
                               '\n\f\r' + label + ' ']) {
          const got = new TextDecoder(variant).encoding;
          if (got !== name) return `${show(variant)} -> ${show(got)}, want ${name}`;
        }
        return '';
      });
    }
  }
}
NOTE = `${replacementOk} of ${replacement} labels of the replacement encoding throw RangeError`;
""",
    # Every pointer of every index a decoder reads, as the bytes the standard's encoder lays it
    # out in: a pointer with a code point decodes to it (also in fatal mode); one without
    # decodes to U+FFFD (an ASCII trail byte kept after it) and throws in fatal mode.
    "indexes": r"""
const hex = (a) => a.map((b) => b.toString(16).padStart(2, '0')).join(' ');
const expectPointer = (label, bytes, want) => check(`${label} ${hex(bytes)}`, () => {
  const input = new Uint8Array(bytes);
  const got = new TextDecoder(label).decode(input);
  if (want === null) {
    const last = bytes[bytes.length - 1];
    const keep = label !== 'iso-2022-jp' && bytes.length > 1 && last < 0x80 ? String.fromCharCode(last) : '';
    if (got !== '\ufffd' + keep) return `got ${show(got)}, want U+FFFD${keep ? ' ' + show(keep) : ''}`;
    return expectThrow(() => new TextDecoder(label, { fatal: true }).decode(input), TypeError);
  }
  if (got !== want) return `got ${show(got)}, want ${show(want)}`;
  const fatal = new TextDecoder(label, { fatal: true }).decode(input);
  return fatal === want ? '' : `fatal: got ${show(fatal)}`;
});
const cp = (c) => c === null ? null : String.fromCodePoint(c);
const SINGLE = ['ibm866', 'iso-8859-2', 'iso-8859-3', 'iso-8859-4', 'iso-8859-5', 'iso-8859-6', 'iso-8859-7',
  'iso-8859-8', 'iso-8859-8-i', 'iso-8859-10', 'iso-8859-13', 'iso-8859-14', 'iso-8859-15', 'iso-8859-16', 'koi8-r',
  'koi8-u', 'macintosh', 'windows-874', 'windows-1250', 'windows-1251', 'windows-1252', 'windows-1253',
  'windows-1254', 'windows-1255', 'windows-1256', 'windows-1257', 'windows-1258', 'x-mac-cyrillic'];
for (const label of SINGLE) {
  const index = DATA[label === 'iso-8859-8-i' ? 'iso-8859-8' : label];
  for (let p = 0; p < 128; p++) expectPointer(label, [p + 0x80], cp(index[p]));
}
for (const label of ['gb18030', 'gbk']) {
  DATA.gb18030.forEach((c, p) => {
    const t = p % 190;
    expectPointer(label, [Math.floor(p / 190) + 0x81, t + (t < 0x3f ? 0x40 : 0x41)], cp(c));
  });
}
for (const [p, c] of DATA['gb18030-ranges']) {
  if (p === 7457) continue; // its code point comes from the algorithm, not from the range
  expectPointer('gb18030', [Math.floor(p / 12600) + 0x81, Math.floor(p % 12600 / 1260) + 0x30,
    Math.floor(p % 1260 / 10) + 0x81, p % 10 + 0x30], cp(c));
}
const BIG5_PAIRS = { 1133: '\u00ca\u0304', 1135: '\u00ca\u030c', 1164: '\u00ea\u0304', 1166: '\u00ea\u030c' };
DATA.big5.forEach((c, p) => {
  const t = p % 157;
  expectPointer('big5', [Math.floor(p / 157) + 0x81, t + (t < 0x3f ? 0x40 : 0x62)], BIG5_PAIRS[p] || cp(c));
});
DATA['euc-kr'].forEach((c, p) => expectPointer('euc-kr', [Math.floor(p / 190) + 0x81, p % 190 + 0x41], cp(c)));
DATA.jis0208.forEach((c, p) => {
  const l = Math.floor(p / 188), t = p % 188;
  const sjis = [l + (l < 0x1f ? 0x81 : 0xc1), t + (t < 0x3f ? 0x40 : 0x41)];
  expectPointer('shift_jis', sjis, p >= 8836 && p <= 10715 ? String.fromCharCode(0xe000 - 8836 + p) : cp(c));
  if (p >= 94 * 94) return;
  const row = Math.floor(p / 94), col = p % 94;
  expectPointer('euc-jp', [row + 0xa1, col + 0xa1], cp(c));
  expectPointer('iso-2022-jp', [0x1b, 0x24, 0x42, row + 0x21, col + 0x21], cp(c));
});
DATA.jis0212.forEach((c, p) => {
  expectPointer('euc-jp', [0x8f, Math.floor(p / 94) + 0xa1, p % 94 + 0xa1], cp(c));
});
""",
}

# (row name, data path relative to the conformance dir, driver)
_FILES: tuple[tuple[str, str, str], ...] = (
    ("url/resources/urltestdata.json", "wpt/url/resources/urltestdata.json", "urltestdata"),
    (
        "url/resources/urltestdata-javascript-only.json",
        "wpt/url/resources/urltestdata-javascript-only.json",
        "urltestdata",
    ),
    ("url/resources/setters_tests.json", "wpt/url/resources/setters_tests.json", "setters"),
    ("url/resources/toascii.json", "wpt/url/resources/toascii.json", "toascii"),
    ("url/resources/IdnaTestV2.json", "wpt/url/resources/IdnaTestV2.json", "idna"),
    ("url/resources/percent-encoding.json", "wpt/url/resources/percent-encoding.json", "percent"),
    (
        "fetch/data-urls/resources/base64.json",
        "wpt/fetch/data-urls/resources/base64.json",
        "base64",
    ),
    (
        "fetch/data-urls/resources/data-urls.json",
        "wpt/fetch/data-urls/resources/data-urls.json",
        "dataurls",
    ),
    ("whatwg-encoding/encodings.json", "whatwg-encoding/encodings.json", "encodings"),
    ("whatwg-encoding/indexes.json", "whatwg-encoding/indexes.json", "indexes"),
)

FILE_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _FILES)
"""Row names of the conformance table, in order."""


def run_file(mr: MiniRacer, data_text: str, driver: str, name: str) -> FileResult:
    """Run one data file's cases through ``driver`` in ``mr``; return its summary."""
    body = (
        f"const DATA = JSON.parse({json.dumps(data_text)});\nlet NOTE = '';\n{_PRELUDE_JS}\n"
        f"{_DRIVERS[driver]}\nreturn {{ passed, failed, failures, note: NOTE }};"
    )
    out = run_async(mr, body, timeout_s=120.0)
    return FileResult(name, out["passed"], out["failed"], out["failures"], out["note"])


def run_all(
    root: Path | None = None,
    *,
    only: Callable[[str], bool] | None = None,
) -> list[FileResult]:
    """Run every conformance file (or those ``only`` accepts); one fresh isolate per file.

    Raises ``FileNotFoundError`` when the data directory is absent.
    """
    root = root or conformance_dir()
    if root is None:
        raise FileNotFoundError("conformance data not found; set CODEMODE_CONFORMANCE_DIR")
    results = []
    for name, rel, driver in _FILES:
        if only is not None and not only(name):
            continue
        text = (root / rel).read_text(encoding="utf-8")
        with isolate() as mr:
            results.append(run_file(mr, text, driver, name))
    return results


def format_table(results: list[FileResult]) -> str:
    """The results as a fixed-width text table."""
    rows = [("file", "passed", "failed", "total", "percent")]
    rows += [(r.name, str(r.passed), str(r.failed), str(r.total), f"{r.percent:.2f}%") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the conformance table; ``-v`` also prints the first failures of each file."""
    args = sys.argv[1:] if argv is None else argv
    verbose = "-v" in args
    names = [a for a in args if not a.startswith("-")]
    try:
        results = run_all(only=(lambda n: any(s in n for s in names)) if names else None)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(format_table(results))
    for r in results:
        if r.note:
            print(f"note ({r.name}): {r.note}")
        if verbose and r.failures:
            print(f"\n{r.name}: first failures")
            for f in r.failures:
                print("  ", json.dumps(f, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
