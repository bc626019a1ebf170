"""Isolates start from a V8 startup snapshot of the runtime (codemode/_child/snapshot.py):
the runtime is there before anything is evaluated, every isolate still gets a heap, a seed
and channels of its own, and where a snapshot cannot be used the runtime is evaluated per
isolate with the same behaviour.

Each engine-level test runs in a fresh interpreter, as a child does: the snapshot is
installed once per process, before its first isolate."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from codemode import SyncIsolateExecutor


def _in_child_process(body: str) -> Any:
    """Run ``body`` (the statements of an async function that returns JSON data) in a new
    interpreter set up like a child, and return what it returned."""
    script = (
        textwrap.dedent("""
        import asyncio, json, sys
        from py_mini_racer import init_mini_racer
        init_mini_racer(flags=["--single-threaded", "--max-old-space-size=256"])
        from codemode._child.limits import MB
        from codemode._child.main import Child
        from codemode._child.runtime import LAYOUT
        from codemode._child.engine import Isolate
        from codemode._child import snapshot

        async def prepared(child):
            isolate = Isolate()
            await isolate.prepare(asyncio.get_running_loop(), child.boot_values(), 128 * MB, LAYOUT)
            return isolate

        async def main():
    """)
        + textwrap.indent(textwrap.dedent(body), "    ")
        + textwrap.dedent("""
        print(json.dumps(asyncio.run(main())))
    """)
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_context_starts_with_the_runtime_already_installed() -> None:
    got = _in_child_process("""
        child = Child(1, 128, 1 << 20, 100, 0, 1)
        child.load_stdlib()
        child.install_runtime()
        isolate = Isolate()
        # A bare context, before its setup: what it has came from the snapshot.
        from codemode._child.miniracer_internals import new_context
        from codemode._child.threads import CallbackThread
        ctx, free = await asyncio.to_thread(new_context, asyncio.get_running_loop(), lambda _id, _raw: False,
                                            CallbackThread())
        bare = list(await ctx.eval_cancelable(
            "[typeof Object.getOwnPropertyDescriptor(Function.prototype, '__codemode_boot').get,"
            " typeof __codemode_preload, typeof setTimeout, Promise.name,"
            " typeof Object.getOwnPropertyDescriptor(globalThis, 'console').value,"
            " typeof Object.getOwnPropertyDescriptor(globalThis, 'URL').get]"))
        free()
        booted = await prepared(child)
        after = list(await booted.ctx.eval_cancelable(
            "[typeof Object.getOwnPropertyDescriptor(Function.prototype, '__codemode_boot'),"
            " typeof (() => 0).__codemode_boot, typeof __codemode_preload, typeof setTimeout]"))
        await asyncio.to_thread(booted.close)
        import mmap
        from codemode._child.miniracer_snapshot import _protection
        pages = [_protection(slot) == mmap.PROT_READ for slot in snapshot.redirected]
        return [child.snapshot_refused, snapshot.installed(), bare, after, pages]
    """)
    refused, installed, bare, after, pages = got
    assert refused is None and installed is True
    # The redirected slot's page is read-only again, as relocation left it (RELRO).
    assert pages == [True]
    # The runtime's boot hook, its timers, its tracked Promise, console (loaded into the
    # snapshot, its preload hook gone) and the accessor that loads URL on first touch: all
    # present in a context nothing was evaluated in.
    assert bare == ["function", "undefined", "function", "Promise", "object", "function"]
    # Reading the hook from the bell removes it before any program can see it.
    assert after == ["undefined", "undefined", "undefined", "function"]


def test_isolates_from_one_snapshot_get_their_own_seeds_and_time_origin() -> None:
    code = "async () => [crypto.randomUUID(), Math.random(), performance.timeOrigin]"
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        rows = [ex.execute(code=code).result for _ in range(3)]
    assert len({row[0] for row in rows}) == 3  # crypto: a seed of its own per isolate
    assert len({row[1] for row in rows}) == 3  # Math.random: reseeded per isolate
    assert all(row[2] > 1.7e12 for row in rows)  # a time origin set at boot, not at snapshot
    assert rows[0][2] < rows[1][2] < rows[2][2]


def test_a_runtime_that_throws_leaves_isolates_as_they_were() -> None:
    got = _in_child_process("""
        from py_mini_racer._dll import init_mini_racer as dll_of
        reason = snapshot.install(dll_of(ignore_duplicate_init=True), "throw new Error('no')")
        return [reason, snapshot.installed()]
    """)
    reason, installed = got
    assert installed is False
    assert "threw" in reason


def test_a_build_of_another_layout_is_refused_before_anything_changes() -> None:
    class OtherBuild:
        def mr_v8_version(self) -> bytes:
            return b"13.1.0.0"

    reason = _snapshot_module()._unsupported(OtherBuild())
    assert reason is not None and "13.1.0.0" in reason


def _snapshot_module() -> Any:
    from codemode._child import miniracer_snapshot

    return miniracer_snapshot


@pytest.mark.parametrize("mode", ["on", "off"])
def test_programs_behave_the_same_with_and_without_the_snapshot(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_CHILD_SNAPSHOT", mode)
    code = """async () => {
        globalThis.leftover = 1;
        Array.prototype.extra = 2;
        console.log('seen', [1, 2]);
        await new Promise((r) => setTimeout(r, 1));
        return [typeof __codemode_boot + typeof __codemode_preload + typeof (() => 0).__codemode_boot, typeof process, new URL('https://a.test/x?q=1').searchParams.get('q'),
                new TextEncoder().encode('hé').length, typeof store.get];
    }"""

    def dispatch(provider: str, tool: str, args_json: str) -> str:
        return json.dumps({"result": None})

    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        first = ex.execute(code=code, providers=[{"name": "store", "tools": ["get"]}], dispatch=dispatch)
        second = ex.execute(code="async () => [typeof leftover, [].extra === undefined]")
        counts = [
            ex.execute(code="async () => { console.count(); console.group('g'); }").logs for _ in range(2)
        ]
    assert first.error is None, first.error
    assert first.result == ["undefinedundefinedundefined", "undefined", "1", 3, "function"]
    assert [entry.text for entry in first.logs] == ["seen [ 1, 2 ]"]
    # The next run on the same child starts from the snapshot again, not from what the
    # last program left.
    assert second.result == ["undefined", True]
    # console's own state (counters, groups) starts afresh in every isolate, whether it
    # was loaded into the snapshot or on first touch.
    assert [[entry.text for entry in logs] for logs in counts] == [["default: 1", "g"]] * 2


def test_the_host_is_told_when_children_run_without_the_snapshot(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from codemode._host import spawn

    monkeypatch.setattr(spawn, "_NO_SNAPSHOT_SAID", set())  # said once per process: afresh here
    caplog.set_level(logging.INFO, logger="codemode.pool")
    with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
        assert ex.execute(code="() => 1").result == 1
    assert not [r for r in caplog.records if "snapshot" in r.getMessage()]
    env = dict(os.environ, CODEMODE_CHILD_SNAPSHOT="off")
    with SyncIsolateExecutor(pool={"max_workers": 1}, child_env=env) as ex:
        assert ex.execute(code="() => 1").result == 1
    said = [r for r in caplog.records if "snapshot" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "turned off" in said[0].getMessage()


def test_what_the_snapshot_holds_as_source_is_one_byte_text() -> None:
    """The runtime's source and the modules preloaded into the snapshot stay in every
    isolate's heap as strings (for lazy compilation and toString). One character above
    U+00FF makes V8 store a whole source two bytes a character: console.js's table drawing
    characters, written as themselves, cost the snapshot every isolate reads 30 KB (5%).
    Written as \\u escapes they cost nothing."""
    from importlib import resources

    from codemode._child.runtime import SNAPSHOT_MODULES
    from codemode.stdlib import blank_comment_lines, sources

    texts = {
        "runtime.js": blank_comment_lines(
            (resources.files("codemode._child") / "runtime.js").read_text("utf-8")
        )
    }
    texts.update({m: sources()[m] for m in SNAPSHOT_MODULES})
    for name, text in texts.items():
        wide = sorted({c for c in text if ord(c) > 0xFF})
        assert not wide, f"{name} holds {wide}: write them as \\u escapes"
