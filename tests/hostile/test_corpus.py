"""A corpus of hostile programs, each a row: id, code, and the outcome the host must get.

Every row is also held to the invariants a program cannot be allowed to break, whatever
it does:

* the executor never raises for a program's misbehaviour: it comes back in ``error``;
* ``execute`` returns, and by the run's bound (plus the kill-and-replace grace);
* the logs stay inside their bounds (``max_log_entries`` plus one notice, each line
  inside the message ceiling plus its truncation marker);
* after the program the pool still serves, and the next run on the same child is clean
  (fresh built-ins, no leaked globals, nothing blamed on it).

Categories (the threat model maps each to the control that answers it): ``cpu``,
``memory``, ``escape``, ``flood``, ``ceiling``. CPU bombs use a 1000 ms bound to keep the
corpus short, memory bombs 6000 ms so that the memory bound, not the clock, meets them even
on a loaded machine; everything else gets the executor's 2000 ms.

The last test runs the whole table again in a subprocess host and checks that host's
resident memory did not explode.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codemode import Outcome, SyncIsolateExecutor, tool_result
from codemode.texts import NETWORK_DISABLED, memory_text, message_ceiling_text, timeout_text

from .conftest import HOSTILE_MEMORY_MB, HOSTILE_TIMEOUT_MS, HOSTILE_WORKERS, hostile_executor

pytestmark = pytest.mark.hostile

CPU_MS = 1_000
MEM_MS = 6_000  # a memory bomb must meet the memory bound first, even on a loaded machine
MB = 1024 * 1024
CEILING = MB  # the executor's default max_message_bytes
MAX_LOGS = 1_000  # the executor's default max_log_entries
TIMEOUT_CPU = timeout_text(CPU_MS)
TIMEOUT = timeout_text(HOSTILE_TIMEOUT_MS)
MEMORY = memory_text(HOSTILE_MEMORY_MB)
RESULT_CEILING = message_ceiling_text("return value", CEILING)
ARGS_CEILING = message_ceiling_text("tool call's argument list", CEILING)
TIMER_FLOOD = "Too many pending timers: a run may keep at most 10000."
STACK = "Maximum call stack size exceeded"
UNPRINTABLE = "The program threw a value that cannot be turned into text."
CYCLE = "The program's return value cannot cross to the host: it contains a cycle."
LOG_SLACK_BYTES = 200  # the truncation marker, and a prefix such as "Unhandled promise rejection: "
HANG_GRACE_S = 20.0  # past the run's bound, a call that has not returned is a hang
SETTLE_GRACE_S = 8.0
"""Past the run's bound, the latest an outcome may arrive. Generous on purpose: the corpus
proves that every program settles, with the right envelope, and a stuck one is killed and
replaced; how soon is measured in benchmarks/ (row e). On a 2-core machine at load average
8, a 1000 ms CPU bomb settled 4.3 s past its bound (its kill and the replacement waited for
a core), which a tighter grace reported as a failure."""
FLOOD_SETTLE_GRACE_S = SETTLE_GRACE_S
"""The same for a flood (10,000 sync tool calls at once keep the host's own loop busy
handing them to its dispatch threads)."""

PROVIDERS = [{"name": "api", "tools": ["echo"]}]


# ---- expected outcomes ------------------------------------------------------------------

Calls = list[tuple[str, str, str]]


class Expect:
    """An expected outcome: ``check`` returns None when it holds, else what differs."""

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Returns(Expect):
    """The program's value arrives as written."""

    value: Any

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        if outcome.error is None and outcome.result == self.value:
            return None
        return f"expected result {_short(self.value)}"


@dataclass(frozen=True)
class Fails(Expect):
    """Exactly this error text (a declared sentence, or the program's own error)."""

    text: str

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        if outcome.error == self.text and outcome.result is None:
            return None
        return f"expected error {self.text!r}"


@dataclass(frozen=True)
class StartsWith(Expect):
    prefix: str

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        if outcome.error is not None and outcome.error.startswith(self.prefix) and outcome.result is None:
            return None
        return f"expected an error starting {self.prefix!r}"


@dataclass(frozen=True)
class Mentions(Expect):
    """Any error mentioning one of the fragments."""

    fragments: tuple[str, ...]

    def __init__(self, *fragments: str) -> None:
        object.__setattr__(self, "fragments", fragments)

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        if (
            outcome.error is not None
            and outcome.result is None
            and any(f in outcome.error for f in self.fragments)
        ):
            return None
        return f"expected an error mentioning one of {self.fragments!r}"


@dataclass(frozen=True)
class AnyError(Expect):
    """Any error at all, as long as it is not the timeout text: the program did not loop."""

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        if outcome.error and outcome.result is None and not _is_timeout(outcome.error):
            return None
        return "expected a clear error (not a timeout: this program never loops)"


@dataclass(frozen=True)
class CorrectOrClear(Expect):
    """The value as written, or an error that says what happened. A program that returned
    at once and is told it timed out got neither."""

    value: Any

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        if Returns(self.value).check(outcome, calls) is None:
            return None
        if AnyError().check(outcome, calls) is None:
            return None
        return f"expected result {_short(self.value)} or a clear error (not a timeout)"


@dataclass(frozen=True)
class OneOf(Expect):
    options: tuple[Expect, ...]

    def __init__(self, *options: Expect) -> None:
        object.__setattr__(self, "options", options)

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        misses = [o.check(outcome, calls) for o in self.options]
        if any(m is None for m in misses):
            return None
        return " or ".join(m for m in misses if m)


@dataclass(frozen=True)
class Also(Expect):
    """An expectation plus a further check on the outcome and the tool calls the host saw."""

    first: Expect
    extra: Callable[[Outcome, Calls], str | None]

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        return self.first.check(outcome, calls) or self.extra(outcome, calls)


@dataclass(frozen=True)
class ReturnsNested(Expect):
    """``[[[...]]]`` nested ``depth`` deep (compared without recursion)."""

    depth: int

    def check(self, outcome: Outcome, calls: Calls) -> str | None:
        value, depth = outcome.result, 0
        while isinstance(value, list) and len(value) == 1:
            value, depth = value[0], depth + 1
        if outcome.error is None and value == [] and depth == self.depth:
            return None
        return f"expected a list nested {self.depth} deep"


def _is_timeout(text: str) -> bool:
    return text.startswith("Execution timed out at its ")


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to show>"
    return text if len(text) <= 120 else text[:117] + "..."


def no_calls(outcome: Outcome, calls: Calls) -> str | None:
    return None if not calls else f"the host's dispatch was called: {_short(calls[:3])}"


def only_declared_providers(outcome: Outcome, calls: Calls) -> str | None:
    declared = {p["name"] for p in PROVIDERS}
    foreign = [c[:2] for c in calls if c[0] not in declared]
    return None if not foreign else f"dispatch received undeclared providers {_short(foreign)}"


def calls_count(n: int) -> Callable[[Outcome, Calls], str | None]:
    def check(outcome: Outcome, calls: Calls) -> str | None:
        return None if len(calls) == n else f"expected {n} tool calls in the host, saw {len(calls)}"

    return check


def logs_are(expected: list[tuple[str, str]]) -> Callable[[Outcome, Calls], str | None]:
    def check(outcome: Outcome, calls: Calls) -> str | None:
        got = [(e.level, e.text) for e in outcome.logs]
        return None if got == expected else f"expected logs {expected!r}, got {_short(got)}"

    return check


def one_truncated_log(outcome: Outcome, calls: Calls) -> str | None:
    if len(outcome.logs) != 1 or "[truncated:" not in outcome.logs[0].text:
        return f"expected one log line carrying the truncation marker, got {len(outcome.logs)} lines"
    return None


def log_flood_summarised(outcome: Outcome, calls: Calls) -> str | None:
    notice = f"[codemode] {100_000 - MAX_LOGS} more log entries were dropped: a run keeps at most {MAX_LOGS}."
    if len(outcome.logs) != MAX_LOGS + 1 or outcome.logs[-1].text != notice:
        last = outcome.logs[-1].text if outcome.logs else None
        return f"expected {MAX_LOGS} entries and the drop notice, got {len(outcome.logs)} ending {last!r}"
    return None


# ---- the corpus ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    code: str
    expect: Expect
    timeout: int | None = None  # ms; None: the executor's 2000


def _forge(tag: str, replacement: str) -> str:
    """Make every outgoing runtime message with this tag serialize as ``replacement``."""
    return (
        "Array.prototype.toJSON = function () { return this[0] === "
        + f"'{tag}' ? {replacement} : Array.from(this) "
        + "};"
    )


WALK_FOR_INTERNALS = """async () => {
  for (const name of Object.getOwnPropertyNames(globalThis)) { try { void globalThis[name] } catch (e) {} }
  const internal = ['bell', 'pump', 'start', 'feed', 'send', 'ring', 'requireModule', 'hostFetch',
    'callTool', 'takeFed', 'finish', 'succeed', 'fail', 'fire', 'arm', 'invoke'];
  const seen = new Set(); const found = []; const queue = [[globalThis, 'globalThis']];
  while (queue.length && seen.size < 100000) {
    const [obj, path] = queue.shift();
    if ((typeof obj !== 'object' && typeof obj !== 'function') || obj === null || seen.has(obj)) continue;
    seen.add(obj);
    if (typeof obj === 'function' && internal.includes(obj.name)) found.push(path);
    let keys = [];
    try { keys = Reflect.ownKeys(obj) } catch (e) { continue }
    if (keys.includes('require') && keys.includes('seed')) found.push(path + ' (the runtime host object)');
    if (obj instanceof SharedArrayBuffer) found.push(path + ' (a shared buffer)');
    for (const k of keys) {
      let d; try { d = Object.getOwnPropertyDescriptor(obj, k) } catch (e) { continue }
      if (!d) continue;
      for (const v of [d.value, d.get, d.set]) if (v !== undefined) queue.push([v, path + '.' + String(k)]);
    }
    try { queue.push([Object.getPrototypeOf(obj), path + '.__proto__']) } catch (e) {}
  }
  return found
}"""

STACK_FRAMES_LEAK = """async () => {
  'mark';
  Error.prepareStackTrace = (e, frames) => { 'mark'; return frames.map((f) => f.getFunction())
    .filter((fn) => typeof fn === 'function' && !String(fn).includes("'mark'"))
    .map((fn) => fn.name || 'anonymous') };
  const direct = new Error('x').stack;
  const viaTimer = await new Promise((r) => setTimeout(function cb() { 'mark'; r(new Error('x').stack) }, 0));
  const viaTool = await api.echo(1).then(function t() { 'mark'; return new Error('x').stack });
  const viaMicrotask = await new Promise((r) =>
    queueMicrotask(function q() { 'mark'; r(new Error('x').stack) }));
  return [direct, viaTimer, viaTool, viaMicrotask]
}"""

FORBIDDEN_GLOBALS = [
    "process",
    "require",
    "Buffer",
    "module",
    "exports",
    "__dirname",
    "__filename",
    "WebSocket",
    "Deno",
    "Bun",
    "gc",
    "print",
    "quit",
    "load",
    "readline",
    "os",
    "d8",
    "read",
    "readbuffer",
]

CORPUS: list[Case] = [
    # ---- CPU: every kind of program that never yields, or yields forever ----------------
    Case("cpu-loop", "cpu", "async () => { while (true) {} }", Fails(TIMEOUT_CPU), CPU_MS),
    Case(
        "cpu-loop-after-await", "cpu", "async () => { await null; for (;;) {} }", Fails(TIMEOUT_CPU), CPU_MS
    ),
    Case(
        "cpu-loop-after-tool-call",
        "cpu",
        "async () => { await api.echo(1); for (;;) {} }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-loop-in-timer",
        "cpu",
        "async () => { setTimeout(() => { for (;;) {} }, 0); await new Promise(() => {}) }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-work-in-setinterval",
        "cpu",
        "async () => { setInterval(() => { for (let i = 0; i < 1e7; i++); }, 1); await "
        "new Promise(() => {}) }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-setinterval-zero-flood",
        "cpu",
        "async () => { for (let i = 0; i < 10000; i++) setInterval(() => {}, 0); await "
        "new Promise(() => {}) }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-queuemicrotask-chain",
        "cpu",
        "async () => { const f = () => queueMicrotask(f); f(); await new Promise(() => {}) }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case("cpu-await-spin", "cpu", "async () => { for (;;) await null }", Fails(TIMEOUT_CPU), CPU_MS),
    Case(
        "cpu-promise-then-chain-endless",
        "cpu",
        "async () => { const loop = () => Promise.resolve().then(loop); loop(); await "
        "new Promise(() => {}) }",
        # Each promise waits on the next, so the chain holds all of them: on a fast enough
        # machine the memory bound comes first (~1 s to reach 128 MB here). Either bound
        # ends it, in its own words.
        OneOf(Fails(TIMEOUT_CPU), Fails(MEMORY)),
        CPU_MS,
    ),
    Case(
        "cpu-atomics-wait-forever",
        "cpu",
        "async () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)",
        OneOf(Fails(TIMEOUT_CPU), Mentions("Atomics.wait")),
        CPU_MS,
    ),
    Case(
        "cpu-regex-catastrophic",
        "cpu",
        "async () => /(a+)+$/.test('a'.repeat(40) + 'b')",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-regex-catastrophic-after-await",
        "cpu",
        "async () => { await null; return /(a+)+$/.test('a'.repeat(40) + 'b') }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-loop-in-result-getter",
        "cpu",
        "async () => ({ get x() { for (;;) {} } })",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-loop-in-error-message-getter",
        "cpu",
        "async () => { throw { get message() { for (;;) {} } } }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-loop-in-thenable-result",
        "cpu",
        "async () => ({ then(resolve) { for (;;) {} } })",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case("cpu-thenable-never-settles", "cpu", "async () => ({ then() {} })", Fails(TIMEOUT_CPU), CPU_MS),
    Case(
        "cpu-catch-termination",
        "cpu",
        "async () => { for (;;) { try { for (;;) {} } catch (e) {} finally { continue } } }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-wasm-infinite-loop",
        "cpu",
        "async () => { const bytes = new "
        "Uint8Array([0,97,115,109,1,0,0,0,1,4,1,96,0,0,3,2,1,0,7,5,1,1,102,0,0,"
        "10,9,1,7,0,3,64,12,0,11,11]); new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports.f() }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-parallel-loops",
        "cpu",
        "async () => { await Promise.all([1, 2, 3].map(async () => { await null; for (;;) {} })) }",
        Fails(TIMEOUT_CPU),
        CPU_MS,
    ),
    Case(
        "cpu-deep-promise-chain",
        "cpu",
        "async () => { let p = Promise.resolve(0); for (let i = 0; i < 100000; i++) p = "
        "p.then((x) => x + 1); "
        "return await p }",
        OneOf(Returns(100_000), Fails(TIMEOUT)),
    ),
    # ---- memory: the heap, and what lives outside it ------------------------------------
    Case(
        "mem-array-growth",
        "memory",
        "async () => { const a = []; for (;;) a.push({ a }) }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-string-doubling",
        "memory",
        "async () => { let s = 'x'; for (;;) s += s }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-string-repeat-1gb",
        "memory",
        "async () => 'x'.repeat(2 ** 30).length",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-string-replace-256mb",
        "memory",
        "async () => { const s = 'x'.repeat(2 ** 28); return s.replace(/x/g, 'yy').length }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-arraybuffer-4gb",
        "memory",
        "async () => new ArrayBuffer(4 * 2 ** 30).byteLength",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-arraybuffers-untouched",
        "memory",
        "async () => { const keep = []; for (;;) keep.push(new ArrayBuffer(64 << 20)) }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-typed-arrays-filled",
        "memory",
        "async () => { const keep = []; for (;;) { const t = new Float64Array(4 << 20); "
        "t.fill(1); keep.push(t) } }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-wasm-memory-grow",
        "memory",
        "async () => { const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 "
        "}); for (;;) m.grow(160) }",
        OneOf(Fails(MEMORY), Mentions("grow")),
        MEM_MS,
    ),
    Case(
        "mem-wasm-memory-grow-touched",
        "memory",
        "async () => { const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 }); "
        "for (;;) { m.grow(160); new Uint8Array(m.buffer).fill(1) } }",
        OneOf(Fails(MEMORY), Mentions("grow")),
        MEM_MS,
    ),
    Case(
        "mem-map-growth",
        "memory",
        "async () => { const m = new Map(); for (let i = 0; ; i++) m.set(i, 'v' + i) }",
        OneOf(Fails(MEMORY), Mentions("Map maximum size")),
        MEM_MS,
    ),
    Case(
        "mem-object-keys",
        "memory",
        "async () => { const o = {}; for (let i = 0; ; i++) o['k' + i] = i }",
        OneOf(Fails(MEMORY), Fails(TIMEOUT)),
    ),
    Case(
        "mem-deep-recursion",
        "memory",
        "async () => { const f = (n) => f(n + 1) + 1; return f(0) }",
        Fails(STACK),
    ),
    Case(
        "mem-new-array-3e8",
        "memory",
        "async () => new Array(3e8).fill(0).length",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-array-from-1e9",
        "memory",
        "async () => Array.from({ length: 1e9 }).length",
        OneOf(Fails(MEMORY), Mentions("Invalid array length")),
        MEM_MS,
    ),
    Case(
        "mem-growth-in-timer",
        "memory",
        "async () => { setTimeout(() => { const a = []; for (;;) a.push([a]) }, 0); "
        "await new Promise(() => {}) }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-growth-after-tool-call",
        "memory",
        "async () => { await api.echo(1); const a = []; for (;;) a.push(new Array(1000).fill(1.5)) }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-structuredclone-accumulate",
        "memory",
        "async () => { const keep = []; for (;;) keep.push(structuredClone(new Array(1e5).fill('x'))) }",
        Fails(MEMORY),
        MEM_MS,
    ),
    Case(
        "mem-million-promises",
        "memory",
        "async () => (await Promise.all(Array.from({ length: 1e6 }, (_, i) => Promise.resolve(i)))).length",
        OneOf(Returns(1_000_000), Fails(MEMORY)),
        MEM_MS,
    ),
    # ---- escapes: reaching past the installed names --------------------------------------
    Case(
        "esc-constructor-chain",
        "escape",
        "async () => { const g = this.constructor.constructor('return this')(); "
        "return [typeof g.process, typeof g.require, typeof g.Buffer, g === globalThis] }",
        Returns(["undefined", "undefined", "undefined", True]),
    ),
    Case(
        "esc-function-constructor",
        "escape",
        "async () => Function('return [typeof process, typeof require, typeof module, typeof exports, "
        "typeof __dirname]')()",
        Returns(["undefined"] * 5),
    ),
    Case(
        "esc-eval",
        "escape",
        "async () => [eval('typeof require'), (0, eval)('typeof process'), (0, eval)('this') === globalThis]",
        Returns(["undefined", "undefined", True]),
    ),
    Case("esc-bare-process", "escape", "async () => process.version", Fails("process is not defined")),
    Case(
        "esc-bare-require",
        "escape",
        "async () => require('child_process').execSync('id')",
        Fails("require is not defined"),
    ),
    Case(
        "esc-dynamic-import-node-builtin",
        "escape",
        "async () => (await import('fs')).readFileSync('/etc/passwd', 'utf8')",
        AnyError(),
    ),
    Case(
        "esc-dynamic-import-data-url",
        "escape",
        "async () => (await import('data:text/javascript,export default typeof process')).default",
        AnyError(),
    ),
    Case(
        "esc-global-names",
        "escape",
        f"async () => {json.dumps(FORBIDDEN_GLOBALS)}.filter((n) => n in globalThis || typeof globalThis[n] "
        "!== 'undefined')",
        Returns([]),
    ),
    Case("esc-walk-for-runtime-internals", "escape", WALK_FOR_INTERNALS, Returns([])),
    Case(
        "esc-caller-chain",
        "escape",
        "(function f() { const first = f.caller === null; "
        "return new Promise((r) => setTimeout(function g() { r([first, g.caller === null]) }, 0)) })",
        Returns([True, True]),
    ),
    Case("esc-prepare-stack-trace-frames", "escape", STACK_FRAMES_LEAK, Returns([[], [], [], []])),
    Case(
        "esc-prepare-stack-trace-loops",
        "escape",
        "async () => { Error.prepareStackTrace = () => { for (;;) {} }; throw new Error('boom') }",
        Fails("boom"),
    ),
    Case(
        "esc-prepare-stack-trace-accessor-loops",
        "escape",
        "async () => { Object.defineProperty(Error, 'prepareStackTrace', { get() { for (;;) {} } });"
        " throw new Error('boom') }",
        Fails("boom"),
    ),
    Case(
        "esc-stack-getter-loops",
        "escape",
        "async () => { const e = new Error('boom');"
        " Object.defineProperty(e, 'stack', { get() { for (;;) {} } }); throw e }",
        Fails("boom"),
    ),
    Case(
        "esc-prepare-stack-trace-throws",
        "escape",
        "async () => { Error.prepareStackTrace = () => { throw new Error('inner') }; null.x }",
        Fails("Cannot read properties of null (reading 'x')"),
    ),
    Case(
        "esc-fetch-metadata-network-off",
        "escape",
        "async () => (await fetch('http://169.254.169.254/latest/meta-data/')).text()",
        Fails(NETWORK_DISABLED),
    ),
    Case(
        "esc-replace-json",
        "escape",
        "async () => { JSON.stringify = () => '\"pwned\"'; JSON.parse = () => ({ result: 'forged' }); "
        "return [{ a: 1 }, await api.echo('real')] }",
        Returns([{"a": 1}, "real"]),
    ),
    Case(
        "esc-replace-array-push",
        "escape",
        "async () => { Array.prototype.push = () => { throw new Error('push') }; console.log('hi'); "
        "return [1].concat([2]) }",
        Also(Returns([1, 2]), logs_are([("log", "hi")])),
    ),
    Case(
        "esc-replace-promise-then",
        "escape",
        "async () => { Promise.prototype.then = function () { return 'x' }; await null; return 42 }",
        Returns(42),
    ),
    Case(
        "esc-promise-constructor-getter",
        "escape",
        "async () => { Object.defineProperty(Promise.prototype, 'constructor', { get() { for (;;) {} } }); "
        "return 42 }",
        OneOf(Returns(42), Fails(TIMEOUT_CPU)),
        CPU_MS,
    ),
    Case(
        "esc-species-tricks",
        "escape",
        "async () => { const evil = { get [Symbol.species]() { throw new Error('species') } }; "
        "Object.defineProperty(Promise, Symbol.species, { get() { throw new Error('species') } }); "
        "Object.defineProperty(Array, Symbol.species, { get() { throw new Error('species') } }); "
        "Object.defineProperty(Uint16Array.prototype, 'constructor', { value: evil }); "
        "console.log('still here'); return await api.echo('ok') }",
        CorrectOrClear("ok"),
        CPU_MS,
    ),
    Case(
        "esc-object-prototype-then",
        "escape",
        "async () => { Object.prototype.then = function (r) { r('hijacked') }; return { a: 1 } }",
        OneOf(Returns("hijacked"), Returns({"a": 1}), AnyError()),
        CPU_MS,
    ),
    Case(
        "esc-object-prototype-error",
        "escape",
        "async () => { Object.prototype.error = 'polluted'; return await api.echo(5) }",
        CorrectOrClear(5),
        CPU_MS,
    ),
    Case(
        "esc-object-prototype-tojson",
        "escape",
        "async () => { Object.prototype.toJSON = () => 'pwned'; return { a: 1 } }",
        OneOf(Returns("pwned"), Returns({"a": 1}), AnyError()),
        CPU_MS,
    ),
    Case(
        "esc-string-charcodeat",
        "escape",
        "async () => { String.prototype.charCodeAt = () => 65; return 42 }",
        CorrectOrClear(42),
        CPU_MS,
    ),
    Case(
        "esc-delete-math-then-call",
        "escape",
        "async () => { delete globalThis.Math; return await api.echo('x') }",
        CorrectOrClear("x"),
        CPU_MS,
    ),
    Case(
        "esc-pollute-everything",
        "escape",
        "async () => { globalThis.leak = 1; Object.prototype.leak = 1; Array.prototype.push = null; "
        "JSON.stringify = null; Promise.prototype.then = null; Error.prepareStackTrace = () => 1; "
        "Object.freeze(Object.prototype); return 42 }",
        Returns(42),
        CPU_MS,
    ),
    Case(
        "esc-forge-frame-own-result",
        "escape",
        "async () => { " + _forge("d", "['d', '{\"forged\":true}']") + " return 1 }",
        OneOf(Returns({"forged": True}), Returns(1), AnyError()),
        CPU_MS,
    ),
    Case(
        "esc-forge-frame-provider-type",
        "escape",
        "async () => { "
        + _forge("c", "['c', this[1], { x: 1 }, 'echo', '[1]']")
        + " return await api.echo(1) }",
        CorrectOrClear(1),
        CPU_MS,
    ),
    Case(
        "esc-forge-frame-call-id-type",
        "escape",
        "async () => { " + _forge("c", "['c', 'abc', 'api', 'echo', '[1]']") + " return await api.echo(1) }",
        CorrectOrClear(1),
        CPU_MS,
    ),
    Case(
        "esc-forge-frame-undeclared-provider",
        "escape",
        "async () => { "
        + _forge("c", "['c', this[1], 'admin', 'deleteEverything', '[1]']")
        + " return await api.echo(1) }",
        Also(CorrectOrClear(1), only_declared_providers),
        CPU_MS,
    ),
    Case(
        "esc-forge-frame-fetch-network-off",
        "escape",
        "async () => { "
        + _forge(
            "c",
            "['f', this[1], JSON.stringify({ method: 'GET', url: 'http://169.254.169.254/', "
            "headers: [], body: null, redirect: 'follow' })]",
        )
        + " return await api.echo(1) }",
        # refused by the host (network off), or the forgery never took effect
        OneOf(Also(Mentions(NETWORK_DISABLED), no_calls), Returns(1)),
        CPU_MS,
    ),
    Case(
        "esc-forge-frame-result-type",
        "escape",
        "async () => { " + _forge("d", "['d', 5]") + " return 1 }",
        CorrectOrClear(1),
        CPU_MS,
    ),
    Case(
        "esc-result-getter-throws",
        "escape",
        "async () => ({ get x() { throw new Error('boom') } })",
        Fails("boom"),
    ),
    Case(
        "esc-result-proxy-trap-throws",
        "escape",
        "async () => new Proxy({}, { ownKeys() { throw new Error('trap') } })",
        Fails("trap"),
    ),
    Case(
        "esc-result-proxy-endless-depth",
        "escape",
        "async () => { const deep = () => new Proxy({}, { ownKeys: () => ['a'], "
        "getOwnPropertyDescriptor: () => "
        "({ value: 1, enumerable: true, configurable: true }), get: () => deep() }); return deep() }",
        OneOf(Fails(STACK), Fails(MEMORY)),
    ),
    Case(
        "esc-result-proxy-huge-length",
        "escape",
        "async () => new Proxy([], { get: (t, k) => (k === 'length' ? 2 ** 32 - 1 : 0) })",
        OneOf(AnyError(), Fails(TIMEOUT)),
    ),
    Case(
        "esc-tojson-over-ceiling",
        "escape",
        "async () => ({ toJSON() { return 'x'.repeat(2 << 20) } })",
        Fails(RESULT_CEILING),
    ),
    Case(
        "esc-tojson-max-string",
        "escape",
        "async () => ({ toJSON() { return 'x'.repeat(2 ** 29 - 24) } })",
        OneOf(Fails(MEMORY), Fails(RESULT_CEILING)),
    ),
    Case(
        "esc-tojson-cycle",
        "escape",
        "async () => { const o = {}; o.self = o; return { toJSON: () => o } }",
        StartsWith(CYCLE),
    ),
    Case(
        "esc-tojson-endless",
        "escape",
        "async () => { const mk = () => ({ toJSON: () => ({ a: mk() }) }); return mk() }",
        OneOf(Fails(STACK), Fails(MEMORY)),
    ),
    Case("esc-result-bigint", "escape", "async () => ({ a: 1n })", Mentions("a BigInt at key 'a'")),
    Case(
        "esc-throw-unprintable",
        "escape",
        "async () => { throw { toString() { throw 1 } } }",
        Fails(UNPRINTABLE),
    ),
    Case(
        "esc-result-nested-1500",
        "escape",
        "async () => { let a = []; for (let i = 0; i < 1500; i++) a = [a]; return a }",
        OneOf(ReturnsNested(1500), AnyError()),
    ),
    Case(
        "esc-result-lone-surrogate",
        "escape",
        "async () => '\\ud800'",
        OneOf(Returns("\ufffd"), Returns("\ud800"), AnyError()),  # lone surrogates cross as U+FFFD
    ),
    Case(
        "esc-log-lone-surrogate",
        "escape",
        "async () => { console.log('\\ud800'); return 1 }",
        CorrectOrClear(1),
        CPU_MS,
    ),
    Case(
        "esc-error-lone-surrogate",
        "escape",
        "async () => { throw new Error('bad \\ud800 text') }",
        AnyError(),
        CPU_MS,
    ),
    Case(
        "esc-tool-name-lone-surrogate", "escape", "async () => api['\\ud800']()", CorrectOrClear(None), CPU_MS
    ),
    # ---- floods ---------------------------------------------------------------------------
    Case(
        "flood-console-100k",
        "flood",
        "async () => { for (let i = 0; i < 100000; i++) console.log('line', i); return 1 }",
        Also(Returns(1), log_flood_summarised),
    ),
    Case(
        "flood-timers-100k",
        "flood",
        "async () => { for (let i = 0; i < 100000; i++) setTimeout(() => {}, 1e6); }",
        Fails(TIMER_FLOOD),
    ),
    Case(
        "flood-timers-caught",
        "flood",
        "async () => { let n = 0; try { for (;;) { setTimeout(() => {}, 1e6); n++ } } "
        "catch (e) {} return n }",
        Returns(10_000),
    ),
    Case(
        "flood-tool-calls-10k",
        "flood",
        "async () => (await Promise.all(Array.from({ length: 10000 }, (_, i) => api.echo(i)))).length",
        Also(
            OneOf(Returns(10_000), Fails(TIMEOUT)),
            lambda o, c: None if o.error else calls_count(10_000)(o, c),
        ),
    ),
    Case(
        "flood-tool-calls-100k-unawaited",
        "flood",
        "async () => { for (let i = 0; i < 100000; i++) api.echo(i); return 1 }",
        OneOf(Returns(1), Fails(TIMEOUT)),
    ),
    Case(
        "flood-tool-call-chain-endless",
        "flood",
        "async () => { let i = 0; const next = () => api.echo(i++).then(next); next(); "
        "await new Promise(() => {}) }",
        Fails(TIMEOUT),
    ),
    Case(
        "flood-unhandled-rejections-100k",
        "flood",
        "async () => { for (let i = 0; i < 100000; i++) Promise.reject(new Error('r' + i)); return 1 }",
        Returns(1),
    ),
    Case(
        "flood-unhandled-rejections-2mb",
        "flood",
        "async () => { const r = new Error('x'.repeat(2 << 20)); "
        "for (let i = 0; i < 20; i++) Promise.reject(r); return 1 }",
        OneOf(Returns(1), Fails(MEMORY)),
    ),
    Case(
        # Every line inside the ceiling and the entry cap, yet the child keeps all of them
        # until its resident-memory backstop ends the run, then ships them to the host.
        "flood-log-bytes-256k-lines",
        "flood",
        "async () => { const s = 'x'.repeat(1 << 18); for (let r = 0; r < 1000; r++) { "
        "for (let i = 0; i < 4; i++) console.log(s + r + '-' + i); "
        "await new Promise((ok) => setTimeout(ok, 1)) } return 1 }",
        OneOf(Returns(1), Fails(MEMORY), Fails(TIMEOUT)),
    ),
    Case(
        "flood-log-lines-1mb-x1000",
        "flood",
        "async () => { const s = 'x'.repeat(1 << 20); for (let i = 0; i < 1000; i++) "
        "console.log(s); return 1 }",
        OneOf(Returns(1), Fails(MEMORY)),
    ),
    # ---- the message ceiling --------------------------------------------------------------
    Case("ceiling-result", "ceiling", "async () => 'x'.repeat(2 << 20)", Fails(RESULT_CEILING)),
    Case(
        "ceiling-result-multibyte", "ceiling", "async () => '\\u20ac'.repeat(400000)", Fails(RESULT_CEILING)
    ),
    Case(
        "ceiling-tool-argument",
        "ceiling",
        "async () => api.echo('x'.repeat(2 << 20))",
        Also(Fails(ARGS_CEILING), no_calls),
    ),
    Case(
        "ceiling-tool-argument-multibyte",
        "ceiling",
        "async () => api.echo('\\u20ac'.repeat(400000))",
        Also(Fails(ARGS_CEILING), no_calls),
    ),
    Case(
        "ceiling-tool-argument-caught",
        "ceiling",
        "async () => { try { await api.echo('x'.repeat(2 << 20)) } catch (e) { return 'caught' } }",
        Also(Returns("caught"), no_calls),
    ),
    Case(
        "ceiling-log-line",
        "ceiling",
        "async () => { console.log('x'.repeat(2 << 20)); return 1 }",
        Also(Returns(1), one_truncated_log),
    ),
    Case(
        "ceiling-log-line-multibyte",
        "ceiling",
        "async () => { console.log('\\u20ac'.repeat(1 << 20)); return 1 }",
        Returns(1),
    ),
]

CASE_IDS = [c.id for c in CORPUS]
assert len(set(CASE_IDS)) == len(CASE_IDS), "corpus ids must be unique"

# Run after every hostile program on the same pool: the child that ran it must serve a
# clean isolate (fresh built-ins, no leaked globals) and not blame this run for the last one.
CLEAN_PROBE = """async () => {
  const problems = [];
  if (typeof globalThis.leak !== 'undefined') problems.push('a global leaked');
  if (({}).leak !== undefined || Object.isFrozen(Object.prototype)) problems.push('Object.prototype');
  if (Object.prototype.toJSON !== undefined || Array.prototype.toJSON !== undefined) problems.push('toJSON');
  if (Object.prototype.then !== undefined || Object.prototype.error !== undefined) {
    problems.push('then/error');
  }
  if (JSON.stringify({ a: [1, 'x'] }) !== '{"a":[1,"x"]}') problems.push('JSON.stringify');
  const arr = []; arr.push(1); if (arr.length !== 1) problems.push('Array.prototype.push');
  if ((await Promise.resolve(5)) !== 5) problems.push('Promise');
  if ('ab'.charCodeAt(1) !== 98 || typeof Math === 'undefined') problems.push('String/Math');
  if (Error.prepareStackTrace !== undefined) problems.push('Error.prepareStackTrace');
  if ((await api.echo('clean')) !== 'clean') problems.push('tool call');
  return problems
}"""


# ---- running one case -----------------------------------------------------------------


def make_dispatch(calls: Calls) -> Callable[[str, str, str], str]:
    def dispatch(provider: str, tool: str, args_json: str) -> str:
        calls.append((provider, tool, args_json[:200]))
        args = json.loads(args_json)
        return tool_result(args[0] if isinstance(args, list) and args else None)

    return dispatch


@dataclass
class Report:
    case: str
    outcome: Outcome | None = None
    raised: BaseException | None = None
    hung: bool = False
    elapsed: float = 0.0
    calls: Calls = field(default_factory=list)


def execute_guarded(ex: SyncIsolateExecutor, code: str, timeout_ms: int, calls: Calls) -> Report:
    """Run one program; a call that has not returned well past its bound is reported as a
    hang (its thread is a daemon, left blocked) instead of stalling the whole corpus."""
    report = Report(case="", calls=calls)
    started = time.monotonic()

    def run() -> None:
        try:
            report.outcome = ex.execute(
                code, providers=PROVIDERS, dispatch=make_dispatch(calls), timeout=timeout_ms, outbound=None
            )
        except BaseException as exc:
            report.raised = exc

    thread = threading.Thread(target=run, name="hostile-run", daemon=True)
    thread.start()
    thread.join(timeout_ms / 1000 + HANG_GRACE_S)
    report.hung = thread.is_alive()
    report.elapsed = time.monotonic() - started
    return report


def run_case(ex: SyncIsolateExecutor, case: Case) -> Report:
    timeout_ms = case.timeout or HOSTILE_TIMEOUT_MS
    report = execute_guarded(ex, case.code, timeout_ms, [])
    report.case = case.id
    return report


def problems_with(case: Case, report: Report) -> list[str]:
    """Everything wrong with one case's report (empty when the executor held)."""
    timeout_ms = case.timeout or HOSTILE_TIMEOUT_MS
    if report.hung:
        return [f"execute did not return within {timeout_ms / 1000 + HANG_GRACE_S:.0f} s: the caller hangs"]
    if report.raised is not None:
        return [f"the executor raised for a program's misbehaviour: {report.raised!r}"]
    outcome = report.outcome
    assert outcome is not None
    problems = []
    miss = case.expect.check(outcome, report.calls)
    if miss is not None:
        problems.append(f"{miss}; got result={_short(outcome.result)} error={_short(outcome.error)}")
    grace = FLOOD_SETTLE_GRACE_S if case.category == "flood" else SETTLE_GRACE_S
    if report.elapsed > timeout_ms / 1000 + grace:
        problems.append(f"settled after {report.elapsed:.2f} s, past its {timeout_ms} ms bound")
    if len(outcome.logs) > MAX_LOGS + 1:
        problems.append(f"{len(outcome.logs)} log entries came back (at most {MAX_LOGS} plus one notice)")
    longest = max((len(e.text.encode("utf-8", "surrogatepass")) for e in outcome.logs), default=0)
    if longest > CEILING + LOG_SLACK_BYTES:
        problems.append(f"a log line of {longest} bytes came back (the ceiling is {CEILING})")
    return problems


def summary(report: Report) -> Any:
    """The result when the run worked, else its error text, the fault's repr, or 'hung'."""
    if report.hung:
        return "hung"
    if report.raised is not None:
        return repr(report.raised)
    assert report.outcome is not None
    return report.outcome.result if report.outcome.error is None else report.outcome.error


def pool_still_serves(ex: SyncIsolateExecutor) -> list[str]:
    """6 * 7 twice (the pool hands each to a different idle child) and the clean probe."""
    problems = []
    for code in ("async () => 6 * 7", CLEAN_PROBE, "async () => 6 * 7"):
        report = execute_guarded(ex, code, HOSTILE_TIMEOUT_MS, [])
        expected: Any = 42 if "6 * 7" in code else []
        if report.hung:
            problems.append(f"the next run {code[:20]!r} hung")
        elif report.raised is not None:
            problems.append(f"the next run {code[:20]!r} raised {report.raised!r}")
        elif report.outcome is None or report.outcome.error is not None or report.outcome.result != expected:
            o = report.outcome
            got = (o.result, o.error) if o is not None else None
            problems.append(f"the next run {code[:20]!r} expected {expected!r}, got {_short(got)}")
    return problems


# ---- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("case", CORPUS, ids=CASE_IDS)
def test_hostile_program(executor: SyncIsolateExecutor, case: Case) -> None:
    report = run_case(executor, case)
    problems = problems_with(case, report)
    problems += pool_still_serves(executor)
    assert not problems, f"{case.id}: " + "; ".join(problems)


def pool_state(executor: SyncIsolateExecutor) -> str:
    """What the pool believes of each child beside what /proc says of it (for a failure)."""
    from tests.conftest import child_pids

    pool = executor._async._pool
    lines = [f"live codemode children of this process: {sorted(child_pids())}"]
    children = [] if pool is None else pool.children() + pool._standby_list()
    for child in children:
        proc = child.proc
        lines.append(
            f"slot {child.id} pid {child.pid}: alive={child.alive} standby={child.standby} "
            f"recycling={child.recycling} returncode={None if proc is None else proc.returncode} "
            f"frames_fd={child.pipes.frames_fd} run={child.run is not None}"
        )
        for task in sorted(glob.glob(f"/proc/{child.pid}/task/*")):
            try:
                with open(f"{task}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()[0]
                with open(f"{task}/comm") as f:
                    comm = f.read().strip()
                with open(f"{task}/wchan") as f:
                    wchan = f.read().strip()
            except OSError as exc:
                lines.append(f"  {task}: {exc}")
                continue
            lines.append(f"  {task}: {comm} state {stat} wchan {wchan}")
    return "\n".join(lines)


def test_pool_is_back_to_its_children(executor: SyncIsolateExecutor) -> None:
    """After the whole corpus: as many live children as configured, and they serve."""
    from tests.conftest import child_pids

    def settled() -> bool:
        # A child the last programs made recycle may still be listed for a while after it
        # began to exit: the pool notices when its pipe closes, which is when the last of
        # its threads is gone (a process whose leader is a zombie is not live here, and a
        # child once took over 15 s to end in a full run under CI). Wait for the two views
        # to agree; if they never do, say what each believes.
        pids = executor.worker_pids
        return len(pids) == HOSTILE_WORKERS and set(pids) <= set(child_pids())

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not settled():
        time.sleep(0.05)
    assert settled(), pool_state(executor)
    outcomes = [executor.execute("async () => 6 * 7") for _ in range(4)]
    assert [o.result for o in outcomes] == [42] * 4


AFTERMATH = [
    # The program's 256 MB string stays reachable after the run, so the child's next touch
    # of that isolate is a fatal out-of-memory.
    (
        "exhausted-heap",
        "async () => { const s = 'x'.repeat(2 ** 28); return s.replace(/x/g, 'yy').length }",
        MEMORY,
    ),
    # WebAssembly memory grown until the data limit refuses it. Right at that limit the
    # engine aborted the process (SIGABRT) after the program's own error; the child now ends
    # the run with the memory text when its process comes that close, and recycles.
    (
        "wasm-grow-refused",
        "async () => { const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 }); for (;;) m.grow(160) }",
        MEMORY,
    ),
    # A heap bomb inside a timer: the child keeps most of that memory resident after the run.
    (
        "resident-residue",
        "async () => { setTimeout(() => { const a = []; for (;;) a.push([a]) }, 0); "
        "await new Promise(() => {}) }",
        MEMORY,
    ),
]
# An ordinary program for the run that comes next: a quarter of the heap bound, held long
# enough for the child's memory sampling to see it.
ORDINARY = (
    "async () => { const a = new Array(4e6).fill(1.5); "
    "await new Promise((r) => setTimeout(r, 50)); return a.length }"
)


@pytest.mark.parametrize(("hostile", "its_error"), [a[1:] for a in AFTERMATH], ids=[a[0] for a in AFTERMATH])
def test_the_next_run_is_not_blamed_for_what_the_last_one_left(hostile: str, its_error: str) -> None:
    """One child, so the next run lands where the hostile one ran, at once. Whatever the
    child has to do with the hostile program's isolate afterwards (and whether it survives
    that), the next caller's ordinary program gets its value: never the previous program's
    error, never a memory error for memory it did not use, never a fault."""
    with SyncIsolateExecutor(pool={"max_workers": 1}, memory_limit=HOSTILE_MEMORY_MB, timeout=5_000) as ex:
        got = []
        for _ in range(3):
            assert ex.execute(hostile).error == its_error
            got.append(summary(execute_guarded(ex, ORDINARY, 5_000, [])))
        assert got == [4_000_000] * 3, got


def test_a_stream_of_wedging_programs_never_fails_an_innocent_caller() -> None:
    """Three callers keep sending programs that wedge the engine (each costs its child a
    kill-and-replace) while two others send 6 * 7. Those are owed 42 every time: the
    hostile callers' programs may slow them down, never turn them into a fault."""
    wedge = "async () => { await null; for (;;) {} }"
    stop = time.monotonic() + 6.0
    innocent: list[Any] = []
    hostile: list[Any] = []

    def loop(code: str, timeout_ms: int, into: list[Any]) -> None:
        while time.monotonic() < stop:
            report = execute_guarded(ex, code, timeout_ms, [])
            into.append(summary(report))
            if report.hung:
                return

    with hostile_executor() as ex:
        threads = [threading.Thread(target=loop, args=(wedge, 150, hostile)) for _ in range(3)]
        threads += [
            threading.Thread(target=loop, args=("async () => 6 * 7", 2_000, innocent)) for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert innocent and hostile
    assert all(h == timeout_text(150) for h in hostile), sorted({str(h) for h in hostile})
    wrong = [o for o in innocent if o != 42]
    kinds = sorted({str(w) for w in wrong})
    assert not wrong, f"{len(wrong)} of {len(innocent)} innocent runs failed: {kinds}"


# ---- the same corpus, in a subprocess host ----------------------------------------------

HOST_SCRIPT = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
from tests.hostile.conftest import hostile_executor
from tests.hostile.test_corpus import CORPUS, problems_with, run_case

def rss(field):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    return 0

ex = hostile_executor()
for _ in range(4):
    assert ex.execute('async () => 6 * 7').result == 42
baseline = rss('VmRSS')
reports = {}
lock = threading.Lock()
queue = list(CORPUS)

def worker():
    while True:
        with lock:
            if not queue:
                return
            case = queue.pop(0)
        report = run_case(ex, case)
        with lock:
            reports[case.id] = problems_with(case, report)

threads = [threading.Thread(target=worker, daemon=True) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
served = []
for _ in range(4):
    try:
        served.append(ex.execute('async () => 6 * 7').result)
    except Exception as exc:
        served.append(repr(exc))
final = rss('VmRSS')
peak = rss('VmHWM')
ex.dispose()
print(json.dumps({'baseline': baseline, 'final': final, 'peak': peak, 'served': served,
                  'problems': {k: v for k, v in reports.items() if v}}))
sys.stdout.flush()
import os
os._exit(0)  # a hung call's daemon thread must not hold the host open
"""

HOST_PEAK_GROWTH_BYTES = 256 * MB
"""How far the host's peak RSS may rise over its warm baseline across the whole corpus, two
runs in flight at a time. What a run hands the host is one result inside the message
ceiling, its tool arguments (each inside the ceiling) and its logs; a quarter of a gigabyte
of host memory for two runs of a 128 MB pool is already far past what bounded runs need."""
HOST_FINAL_GROWTH_BYTES = 128 * MB


@pytest.mark.timeout(300)
def test_a_subprocess_host_survives_the_corpus_with_bounded_memory() -> None:
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-c", HOST_SCRIPT, str(root)],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, f"the host died ({proc.returncode}): {proc.stderr[-3000:]}"
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    growth = report["peak"] - report["baseline"]
    summary = (
        f"baseline {report['baseline'] // MB} MB, peak {report['peak'] // MB} MB, "
        f"final {report['final'] // MB} MB; cases with problems: {sorted(report['problems'])}"
    )
    assert report["served"] == [42] * 4, summary
    assert growth < HOST_PEAK_GROWTH_BYTES, summary
    assert report["final"] - report["baseline"] < HOST_FINAL_GROWTH_BYTES, summary
