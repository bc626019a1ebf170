"""Data nested deeper than a reader's recursion limit, at every decoder of the host, the
fleet and the child: each says what went wrong as its kind of failure (a rejected call, a
dropped message, a malformed line, a typed fault), never a stray ``RecursionError``. The
end-to-end cases, in both executors, are in tests/contract (``deeply``)."""

from __future__ import annotations

import msgspec
import pytest

from codemode import Outcome, SyncIsolateExecutor, WorkerCrashed
from codemode._child.lines import decode_lines
from codemode._dispatch import _checked, too_deep_text
from codemode._host.nesting import RESULT_TOO_DEEP, fresh_stack
from codemode.fleet.wire import Finished, ToolReply, decode_down, decode_up, encode

from .conftest import child_fault_env

LEVELS = 5_000
"""Past Python's recursion limit however fresh the reading stack."""


def _deep_json(levels: int = LEVELS) -> str:
    return "[" * levels + "]" * levels


def _deep_msgpack(levels: int = LEVELS) -> bytes:
    return b"\x91" * levels + b"\x90"


def _with_unknown_field(message: bytes, value: bytes) -> bytes:
    """``message`` (a msgpack map of fewer than 15 keys) with one more key, ``later``, whose
    value is ``value``: what a newer peer may send, which this reader skips."""
    assert 0x80 <= message[0] < 0x8F
    return bytes([message[0] + 1]) + message[1:] + msgspec.msgpack.encode("later") + value


def test_a_reply_nested_too_deeply_is_an_envelope_that_says_so() -> None:
    reply = '{"result": ' + _deep_json() + "}"
    assert msgspec.json.decode(_checked("store", "get", reply, 1 << 20)) == {
        "error": too_deep_text("store", "get")
    }


def test_a_fresh_stack_reads_what_a_deep_stack_cannot() -> None:
    text = _deep_json(900)

    def deep(n: int) -> object:  # a caller ~300 frames deep, as a host's loop may be
        return deep(n - 1) if n else msgspec.json.decode(text)

    with pytest.raises(RecursionError):
        deep(300)
    assert fresh_stack(msgspec.json.decode, text) == msgspec.json.decode(text)
    with pytest.raises(RecursionError):
        fresh_stack(msgspec.json.decode, _deep_json())


def test_fleet_messages_nested_too_deeply_are_decode_errors() -> None:
    """The readers of both directions drop a message that is not one (DecodeError); a deep
    unknown field raised RecursionError past them instead."""
    down = _with_unknown_field(encode(ToolReply(1, '{"result": 1}')), _deep_msgpack())
    with pytest.raises(msgspec.DecodeError, match="too deeply"):
        decode_down(down)
    up = _with_unknown_field(encode(Finished(Outcome(result=1))), _deep_msgpack())
    with pytest.raises(msgspec.DecodeError, match="too deeply"):
        decode_up(up)


def test_an_outcome_nested_too_deeply_to_write_goes_as_the_runs_error() -> None:
    deep: list[object] = []
    for _ in range(LEVELS):
        deep = [deep]
    message = decode_up(encode(Finished(Outcome(result=deep, logs=[]))))
    assert isinstance(message, Finished)
    assert message.outcome.result is None
    assert message.outcome.error == RESULT_TOO_DEEP


def test_a_line_nested_too_deeply_is_a_line_that_does_not_read() -> None:
    with pytest.raises(ValueError, match="too deeply"):
        decode_lines('["l","log","fine"]\n' + _deep_json() + "\n")


def test_a_deep_frame_from_a_child_is_a_typed_fault() -> None:
    """The host's reader of a child's frames caught only DecodeError: a frame whose unknown
    field nests past the limit raised out of the reader's callback, and the run waited."""
    with SyncIsolateExecutor(pool={"max_workers": 1}, child_env=child_fault_env("deep-frame")) as ex:
        with pytest.raises(WorkerCrashed) as info:
            ex.execute("async () => 1", timeout=60_000)
        assert "sent a malformed message" in str(info.value)
        assert "too deeply" in str(info.value) or "recursion" in str(info.value)
