"""The length-prefixed frames both ends of a child's pipes speak, split from a byte stream
however the stream arrives, the isolate thread's Python state kept between callbacks and
given back when the isolate closes, the collector kept off the child's startup objects, and
a closed isolate left to reference counting rather than to the collector."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode._protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    Call,
    FrameSplitter,
    FrameTooLarge,
    PipeFrames,
    encode_frame,
)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_frames_come_out_whole_and_in_order_however_the_stream_is_cut(
    bodies: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(FRAME_HEADER.pack(len(b)) + b for b in bodies)
    points = sorted({c for c in cuts if c < len(stream)} | {0, len(stream)})
    splitter = FrameSplitter()
    out: list[bytes] = []
    for start, end in itertools.pairwise(points):
        out.extend(splitter.feed(memoryview(stream)[start:end]))
    assert out == bodies


def test_a_message_survives_the_splitter_byte_by_byte() -> None:
    frame = encode_frame(Call(7, 3, "store", "get", '[{"i":1}]'))
    splitter = FrameSplitter()
    got = [body for i in range(len(frame)) for body in splitter.feed(frame[i : i + 1])]
    assert got == [frame[FRAME_HEADER.size :]]


def test_a_header_over_the_limit_is_refused_before_its_body_arrives() -> None:
    with pytest.raises(FrameTooLarge, match="above the protocol's limit"):
        FrameSplitter().feed(FRAME_HEADER.pack(MAX_FRAME_BYTES + 1))


def test_a_pipe_gives_nothing_until_a_frame_is_whole_and_none_once_closed() -> None:
    read_end, write_end = os.pipe()
    frames = PipeFrames(read_end)
    try:
        assert frames.read() == []  # nothing written yet: the read does not block
        frame = encode_frame(Call(1, 2, "store", "get", "[]"))
        os.write(write_end, frame[:3])
        assert frames.read() == []
        os.write(write_end, frame[3:] + frame)
        assert frames.read() == [frame[FRAME_HEADER.size :]] * 2
        os.close(write_end)
        assert frames.read() is None
    finally:
        os.close(read_end)


def test_an_isolates_thread_gives_its_python_state_back_when_it_closes() -> None:
    """Callbacks from an isolate's thread keep one Python thread state between them; each
    closed isolate must give it back, or every run would leak one. Counted with the C API
    in a process of its own (V8 never loads in the test process), against the process's
    Python threads."""
    script = textwrap.dedent("""
        import asyncio, ctypes, json, threading
        from codemode._child.limits import MB
        from codemode._child.main import Child
        from codemode._child.runtime import LAYOUT
        from codemode._child.engine import Isolate

        api = ctypes.pythonapi
        api.PyInterpreterState_Get.restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
        api.PyThreadState_Next.restype = ctypes.c_void_p
        api.PyThreadState_Next.argtypes = [ctypes.c_void_p]

        def thread_states():
            n, ts = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
            while ts:
                n, ts = n + 1, api.PyThreadState_Next(ts)
            return n

        async def main():
            child = Child(1, 128, 1 << 20, 100, 0, 1)
            child.load_stdlib()
            child.install_runtime()
            loop = asyncio.get_running_loop()
            counts = []
            for _ in range(6):
                isolate = Isolate()
                await isolate.prepare(loop, child.boot_values(), 128 * MB, LAYOUT)
                rang = asyncio.Event()
                isolate.on_bell = rang.set
                await isolate.start(json.dumps(["async () => 6 * 7", [], "none"]))
                await asyncio.wait_for(rang.wait(), 5)
                during = thread_states() - threading.active_count()
                await asyncio.to_thread(isolate.close)
                counts.append((during, thread_states() - threading.active_count()))
            print(json.dumps(counts))

        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # Thread states beyond the process's Python threads (the loop's executor may add some):
    # while an isolate lives its thread holds one, and once it is closed none is left over.
    counts = [tuple(c) for c in json.loads(out.stdout)]
    assert counts == [(1, 0)] * len(counts), counts


def test_the_child_freezes_what_it_built_to_start_and_still_collects_what_comes_after() -> None:
    """process.freeze_startup_objects: the oldest generation no longer walks the startup objects,
    and cyclic garbage made afterwards (what runs leave) is still collected."""
    script = textwrap.dedent("""
        import gc, json, weakref
        from codemode._child import process
        process.freeze_startup_objects()
        frozen = gc.get_freeze_count()

        class Node:
            pass

        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        print(json.dumps([frozen, gone() is None]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    frozen, collected = json.loads(out.stdout)
    assert frozen > 5_000 and collected


def test_a_closed_isolate_and_its_run_leave_no_cycles_for_the_collector() -> None:
    """Isolate.close undoes the links that made the isolate, its context and the run's state
    one cycle, so reference counting frees them, and the collector finds none of them.
    (mini-racer leaves a ctypes array type per isolate, a cycle of its own, not ours.)"""
    script = textwrap.dedent("""
        import asyncio, gc, json
        from codemode._child.limits import MB
        from codemode._child.main import Child
        from codemode._child.runtime import LAYOUT
        from codemode._child.engine import Isolate

        class RunState:  # what the child's bell holds, as Child.serve makes it
            def __init__(self, isolate):
                self.isolate = isolate

        async def main():
            child = Child(1, 128, 1 << 20, 100, 0, 1)
            child.load_stdlib()
            child.install_runtime()
            loop = asyncio.get_running_loop()
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)
            found = set()
            for _ in range(3):
                isolate = Isolate()
                await isolate.prepare(loop, child.boot_values(), 128 * MB, LAYOUT)
                state = RunState(isolate)
                rang = asyncio.Event()
                isolate.on_bell = lambda: (rang.set(), state)
                await isolate.start(json.dumps(["async () => 6 * 7", [], "none"]))
                await asyncio.wait_for(rang.wait(), 5)
                await asyncio.to_thread(isolate.close)
                del isolate, state, rang
                gc.collect()
                found |= {type(o).__qualname__ for o in gc.garbage}
                gc.garbage.clear()
            print(json.dumps(sorted(found)))

        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = set(json.loads(out.stdout))
    assert not found & {"Isolate", "Context", "RunState", "ValueHandle", "ExitStack", "Queue"}, found
