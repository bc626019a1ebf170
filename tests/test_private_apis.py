"""Every internal of mini-racer the child relies on (codemode/_child/miniracer_internals.py)
exists in the installed release, and a release that lacks one is named at start-up in a
sentence, not met later as an AttributeError inside a run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest


def test_the_installed_mini_racer_has_every_internal_the_child_relies_on() -> None:
    from codemode._child import miniracer_internals

    assert miniracer_internals.check() == []


def test_the_loaded_library_exports_every_function_the_child_calls() -> None:
    """In a process of its own: V8 never loads in the test process."""
    script = textwrap.dedent("""
        import json
        from codemode._child import miniracer_internals
        print(json.dumps(miniracer_internals.check_library(miniracer_internals.engine_library())))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_missing_internal_is_named_in_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from py_mini_racer import _context

    from codemode._child import miniracer_internals

    monkeypatch.delattr(_context.Context, "_wrap_raw_handle")
    assert miniracer_internals.check() == ["mini-racer's Context has no method _wrap_raw_handle."]


def test_a_child_on_a_release_without_an_internal_fails_to_start_with_the_reason(tmp_path: Path) -> None:
    """A child whose mini-racer lacks an internal stops at start-up; the host reports the
    failed start with the missing piece among its causes."""
    plugin = os.fspath(tmp_path)  # a sitecustomize that removes one internal before the child starts
    with open(os.path.join(plugin, "sitecustomize.py"), "w") as f:
        f.write("from py_mini_racer import _context\ndel _context.Context._value_handle_to_python\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([plugin, os.environ.get("PYTHONPATH", "")])}
    script = textwrap.dedent("""
        from codemode import ExecutorError, SyncIsolateExecutor
        try:
            with SyncIsolateExecutor(pool={"max_workers": 1}) as ex:
                ex.execute(code="async () => 1")
        except ExecutorError as exc:
            print(" | ".join((str(exc), *exc.causes)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "failed to start" in text, text
    assert "mini-racer's Context has no method _value_handle_to_python." in text, text


def test_the_python_has_every_asyncio_internal_the_host_relies_on() -> None:
    from codemode._host import asyncio_internals

    assert asyncio_internals.check() == []
    assert asyncio_internals.enter_task is not None and asyncio_internals.leave_task is not None


def test_a_missing_asyncio_internal_is_named_in_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio.tasks

    from codemode._host import asyncio_internals

    monkeypatch.delattr(asyncio.tasks, "_leave_task")
    assert asyncio_internals.check() == [
        "asyncio.tasks has no function _leave_task: each tool call gets a task of its own."
    ]


def test_detached_transports_outlive_their_loop() -> None:
    """What ``ChildProcess.forget_loop`` needs of asyncio's transports, on real pipes and a real
    process: once detached, a transport whose loop is closed closes (or is collected)
    without reaching for that loop, and a pipe's descriptor is closed at once."""
    import asyncio
    import gc
    import warnings

    from codemode._host.asyncio_internals import detach_transport, process_transport, reader_transport

    loop = asyncio.new_event_loop()
    read_fd, write_fd = os.pipe()

    async def start() -> tuple[Any, Any, Any, asyncio.subprocess.Process]:
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb"))
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(write_fd, "wb"))
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        await proc.wait()
        return reader_transport(reader), writer, process_transport(proc), proc

    read_transport, write_transport, subprocess_transport, proc = loop.run_until_complete(start())
    assert read_transport is not None and subprocess_transport is not None
    loop.close()

    detach_transport(read_transport, close_pipe=True)
    detach_transport(subprocess_transport, close_pipe=False)
    with pytest.raises(OSError):
        os.fstat(read_fd)  # closed here, not by a loop that is gone
    subprocess_transport.close()  # marked closed: does not reach for the loop
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del read_transport, subprocess_transport, proc
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []

    with warnings.catch_warnings(record=True) as caught:  # one left attached: warned about
        warnings.simplefilter("always")
        del write_transport
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] != []
